package window

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// recorder keeps every event it observes.
type recorder struct {
	mu        sync.Mutex
	decisions []limiter.DecisionEvent
	events    []limiter.Event
}

func (r *recorder) ObserveDecision(_ context.Context, e limiter.DecisionEvent) {
	r.mu.Lock()
	e.Limits = append([]limiter.LimitDecision(nil), e.Limits...)
	r.decisions = append(r.decisions, e)
	r.mu.Unlock()
}

func (r *recorder) ObserveEvent(_ context.Context, e limiter.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

type nopObserver struct{}

func (nopObserver) ObserveDecision(context.Context, limiter.DecisionEvent) {}
func (nopObserver) ObserveEvent(context.Context, limiter.Event)            {}

// TestObserverSeesEveryDecision: one DecisionEvent per decision, carrying
// the decision returned, and none for a call that returns an error.
func TestObserverSeesEveryDecision(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	clk := newClock()
	opts := []limiter.Option{limiter.WithObserver(rec), limiter.WithClock(clk.Now), limiter.WithWindow(time.Second)}
	a, err := NewLocalAbsolute(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	s, err := NewLocalSuppressed(append(opts, limiter.WithHardLimitFactor(2), limiter.WithSuppressionCache(0),
		limiter.WithRandom(func() float64 { return 0.999 }))...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	set, err := limiter.NewSet(
		limiter.Limit{Name: "per-second", Rate: limiter.PerSecond(1), Window: time.Second},
		limiter.Limit{Name: "per-minute", Rate: limiter.PerMinute(10), Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	two := limiter.PerSecond(2)
	type call struct {
		name       string
		do         func() (limiter.Decision, error)
		strategy   string
		op         string
		cost       int64
		suppressed bool
		allowed    bool
		policy     string
	}
	inc := func(l limiter.Limiter, n int64) func() (limiter.Decision, error) {
		return func() (limiter.Decision, error) { return l.Inc(ctx, "k", two, n) }
	}
	incSet := func(n int64) func() (limiter.Decision, error) {
		return func() (limiter.Decision, error) { d, err := a.IncSet(ctx, "k", set, n); return d.Decision, err }
	}
	calls := []call{
		{"abs 1", inc(a, 1), StrategyAbsolute, OpInc, 1, false, true, ""},
		{"abs 2", inc(a, 1), StrategyAbsolute, OpInc, 1, false, true, ""},
		{"abs full", inc(a, 1), StrategyAbsolute, OpInc, 1, false, false, ""},
		{"abs peek unknown", func() (limiter.Decision, error) { return a.IsAllowed(ctx, "other") },
			StrategyAbsolute, OpIsAllowed, 0, false, true, ""},
		{"sup 2", inc(s, 2), StrategySuppressed, OpInc, 2, false, true, ""},
		{"sup above soft", inc(s, 1), StrategySuppressed, OpInc, 1, true, true, ""},
		{"sup above hard", inc(s, 2), StrategySuppressed, OpInc, 2, true, false, ""},
		{"set 1", incSet(1), StrategyAbsolute, OpIncSet, 1, false, true, "per-second"},
		{"set refused", incSet(1), StrategyAbsolute, OpIncSet, 1, false, false, "per-second"},
		{"set peek", func() (limiter.Decision, error) { d, err := a.IncSet(ctx, "k", set, 0); return d.Decision, err },
			StrategyAbsolute, OpIncSet, 0, false, false, "per-second"},
	}
	for i, c := range calls {
		d, err := c.do()
		if err != nil || d.Suppressed != c.suppressed || d.Allowed != c.allowed {
			t.Fatalf("%s = %+v, %v, want suppressed %v allowed %v", c.name, d, err, c.suppressed, c.allowed)
		}
		if len(rec.decisions) != i+1 {
			t.Fatalf("after %s: %d decision events, want %d", c.name, len(rec.decisions), i+1)
		}
		e := rec.decisions[i]
		if e.Provider != ProviderLocal || e.Strategy != c.strategy || e.Op != c.op || e.Key == "" ||
			e.Cost != c.cost || !reflect.DeepEqual(e.Decision, d) || e.Backend || e.Duration != 0 || e.ErrorClass != "" {
			t.Errorf("%s: event %+v, want local %s %s cost %d with decision %+v and no backend", c.name, e, c.strategy, c.op, c.cost, d)
		}
		if p := e.Policy; p != c.policy {
			t.Errorf("%s: Policy = %q, want %q", c.name, p, c.policy)
		}
	}
	if _, err := a.Inc(ctx, "k", two, -1); err == nil {
		t.Fatal("Inc with n = -1 succeeded")
	}
	if _, err := a.IncSet(ctx, "", set, 1); err == nil {
		t.Fatal("IncSet with an empty key succeeded")
	}
	if len(rec.decisions) != len(calls) || len(rec.events) != 0 {
		t.Errorf("after two bad calls: %d decisions, %d events, want %d and 0", len(rec.decisions), len(rec.events), len(calls))
	}
}

// TestObserverAllocations: the hot path allocates nothing with no
// observer (TestZeroAllocs) and nothing more with one that does nothing.
func TestObserverAllocations(t *testing.T) {
	ctx := context.Background()
	a, _ := NewLocalAbsolute(limiter.WithWindow(time.Second), limiter.WithObserver(nopObserver{}))
	defer a.Close(ctx)
	s, _ := NewLocalSuppressed(limiter.WithWindow(time.Second), limiter.WithObserver(nopObserver{}))
	defer s.Close(ctx)
	rate := limiter.PerSecond(1e6)
	a.Inc(ctx, "hot", rate, 1)
	s.Inc(ctx, "hot", rate, 1)
	for name, f := range map[string]func(){
		"LocalAbsolute.Inc":         func() { a.Inc(ctx, "hot", rate, 1) },
		"LocalAbsolute.IsAllowed":   func() { a.IsAllowed(ctx, "hot") },
		"LocalSuppressed.Inc":       func() { s.Inc(ctx, "hot", rate, 1) },
		"LocalSuppressed.IsAllowed": func() { s.IsAllowed(ctx, "hot") },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s with a no-op observer allocates %v times per call, want 0", name, n)
		}
	}
}
