package redisabs_test

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// recorder keeps every event it observes.
type recorder struct {
	mu        sync.Mutex
	decisions []limiter.DecisionEvent
	events    []limiter.Event
}

func (r *recorder) ObserveDecision(_ context.Context, e limiter.DecisionEvent) {
	r.mu.Lock()
	r.decisions = append(r.decisions, e)
	r.mu.Unlock()
}

func (r *recorder) ObserveEvent(_ context.Context, e limiter.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) snapshot() ([]limiter.DecisionEvent, []limiter.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]limiter.DecisionEvent(nil), r.decisions...), append([]limiter.Event(nil), r.events...)
}

// TestObserverHealthy: each decision on Redis is one DecisionEvent with
// the timed Redis call; a bad call is none.
func TestObserverHealthy(t *testing.T) {
	_, c := redistest.Mini(t)
	rec := &recorder{}
	l, err := redisabs.New(c, limiter.WithObserver(rec), limiter.WithWindow(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	set, err := limiter.NewSet(limiter.Limit{Name: "burst", Rate: limiter.PerSecond(1), Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		op      string
		allowed bool
		policy  string
	}{{window.OpInc, true, ""}, {window.OpInc, false, ""}, {window.OpIsAllowed, false, ""},
		{window.OpIncSet, true, "burst"}, {window.OpIncSet, false, "burst"}}
	got := []limiter.Decision{mustInc(t, l, "k", limiter.PerSecond(1), 1), mustInc(t, l, "k", limiter.PerSecond(1), 1)}
	d, err := l.IsAllowed(ctx, "k")
	got = append(got, d)
	sd, err2 := l.IncSet(ctx, "k", set, 1)
	got = append(got, sd.Decision)
	sd2, err3 := l.IncSet(ctx, "k", set, 0)
	got = append(got, sd2.Decision)
	if err := errors.Join(err, err2, err3); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Inc(ctx, "k", limiter.PerSecond(1), -1); err == nil {
		t.Fatal("Inc with n = -1 succeeded")
	}
	ds, es := rec.snapshot()
	if len(ds) != len(want) || len(es) != 0 {
		t.Fatalf("%d decision events and %d events, want %d and 0: %+v %+v", len(ds), len(es), len(want), ds, es)
	}
	for i, w := range want {
		e := ds[i]
		if e.Provider != window.ProviderRedisAbs || e.Strategy != window.StrategyAbsolute || e.Op != w.op ||
			e.Decision != got[i] || e.Decision.Allowed != w.allowed || e.Decision.Suppressed || !e.Backend || e.Duration <= 0 || e.Start.IsZero() ||
			e.ErrorClass != "" || e.Policy != w.policy {
			t.Errorf("decision %d: %+v (policy %q), want %s allowed %v with a timed backend call, policy %q", i, e, e.Policy, w.op, w.allowed, w.policy)
		}
	}
}

// TestObserverOutage: with Redis gone (the client retries its dial
// until WithTimeout's deadline, but the dial hook sees the first dial
// refused), the call that finds it so is one "backend_error" Event of class
// connection and a degraded DecisionEvent with the failed call's time,
// and the breaker opens, one "state_change" Event; later calls, answered
// while the breaker is open, are degraded and ask no backend; the local
// fallback's own decisions are not reported as a local provider's; Close
// while degraded leaves degraded mode.
func TestObserverOutage(t *testing.T) {
	for name, policy := range map[string]limiter.FailurePolicy{"FallbackLocal": limiter.FallbackLocal, "FailOpen": limiter.FailOpen} {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			changed := make(chan limiter.StateChange, 4)
			l, err := redisabs.New(redistest.DeadClient(t), limiter.WithFailurePolicy(policy),
				limiter.WithTimeout(50*time.Millisecond), limiter.WithProbeInterval(time.Minute),
				limiter.WithObserver(limiter.MultiObserver(rec, window.StateObserver(func(sc limiter.StateChange) { changed <- sc }))))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close(ctx)
			if d := mustInc(t, l, "k", limiter.PerSecond(10), 1); !d.Allowed || d.Shed || !d.Degraded {
				t.Fatalf("Inc 0 = %+v, want allowed and degraded", d)
			}
			// rec is told before the state observer; a
			// minute is only a guard against a hang.
			select {
			case <-changed:
			case <-time.After(time.Minute):
				t.Fatal("the refused dial did not open the breaker within a minute")
			}
			for i := 1; i < 3; i++ {
				if d := mustInc(t, l, "k", limiter.PerSecond(10), 1); !d.Allowed || !d.Degraded {
					t.Fatalf("Inc %d = %+v, want allowed and degraded", i, d)
				}
			}
			ds, es := rec.snapshot()
			if len(ds) != 3 {
				t.Fatalf("%d decision events, want 3: %+v", len(ds), ds)
			}
			for i, e := range ds {
				first := i == 0
				if e.Provider != window.ProviderRedisAbs || !e.Decision.Degraded || e.Decision.Shed || e.Backend != first ||
					(e.Duration > 0) != first || (e.ErrorClass == window.ErrorConnection) != first || e.Source != window.SourcePolicy {
					t.Errorf("decision %d: %+v, want redisabs, degraded, with a failed backend call %v", i, e, first)
				}
			}
			// The state change comes from the probe goroutine, so it may
			// arrive before or after the failed call's event.
			var failed, entered []limiter.Event
			for _, e := range es {
				switch e.Kind {
				case window.EventBackendError:
					failed = append(failed, e)
				case window.EventStateChange:
					entered = append(entered, e)
				}
			}
			if len(es) != 2 || len(failed) != 1 || failed[0].ErrorClass != window.ErrorConnection ||
				failed[0].Op != window.OpInc || !errors.Is(failed[0].Err, syscall.ECONNREFUSED) || failed[0].Duration <= 0 ||
				len(entered) != 1 || !entered[0].State.Degraded || entered[0].State.Provider != window.ProviderRedisAbs {
				t.Errorf("events %+v, want one backend error (connection refused, inc) and one state change into degraded mode", es)
			}
			// Closed while degraded: it leaves degraded mode (what counts
			// degraded limiters stops counting it), with ErrClosed as
			// the cause, before Close returns.
			if err := l.Close(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case sc := <-changed:
				if sc.Degraded || !errors.Is(sc.Cause, limiter.ErrClosed) || sc.Duration <= 0 {
					t.Errorf("state change on Close: %+v, want leaving degraded mode, cause ErrClosed", sc)
				}
			default:
				t.Fatalf("Close returned without leaving degraded mode")
			}
			if _, es = rec.snapshot(); len(es) != 3 || es[2].Kind != window.EventStateChange || es[2].State.Degraded {
				t.Errorf("events after Close: %+v, want a third, leaving degraded mode", es)
			}
		})
	}
}
