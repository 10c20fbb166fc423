package cleanup_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/window"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// events records the backend events an observer receives; decisions
// would be a bug here (a cleaner decides nothing).
type events struct {
	mu        sync.Mutex
	got       []limiter.Event
	decisions int
}

func (e *events) ObserveDecision(context.Context, limiter.DecisionEvent) {
	e.mu.Lock()
	e.decisions++
	e.mu.Unlock()
}

func (e *events) ObserveEvent(_ context.Context, ev limiter.Event) {
	e.mu.Lock()
	e.got = append(e.got, ev)
	e.mu.Unlock()
}

func (e *events) take() ([]limiter.Event, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	got := e.got
	e.got = nil
	return got, e.decisions
}

// wantEvent checks that ev is the EventCleanup of report r and error err.
func wantEvent(t *testing.T, ev limiter.Event, r cleanup.Report, err error, class string) {
	t.Helper()
	c := ev.Cleanup
	if ev.Kind != window.EventCleanup || ev.Provider != window.ProviderCleanup {
		t.Errorf("event %v from %q, want %v from %q", ev.Kind, ev.Provider, window.EventCleanup, window.ProviderCleanup)
	}
	if c.Scanned != r.Scanned || c.Deleted != r.Deleted || c.Trimmed != r.Trimmed || c.Duration != r.Duration {
		t.Errorf("event reports %+v, the pass %+v", c, r)
	}
	if !errors.Is(c.Err, err) || (err == nil) != (c.Err == nil) || c.ErrorClass != class {
		t.Errorf("event error %v (class %q), want %v (class %q)", c.Err, c.ErrorClass, err, class)
	}
}

// TestObserver: WithObserver gets one EventCleanup per pass, carrying the
// pass's counts and error: Run, each pass of the background loop, a Run
// that cannot reach Redis (classed as a connection error), and nothing for
// a Run refused with ErrLocked.
func TestObserver(t *testing.T) {
	c := redistest.Real(t).Client(t)
	prefix := redistest.Prefix(t)
	// 6 keys written at t0 with a 1-minute window, dead two minutes later,
	// and 4 live ones.
	t0 := redisNow(t, c).Add(-2 * time.Minute)
	old := newLimiter(t, key.Absolute, c, limiter.WithPrefix(prefix), limiter.WithClock(fixed(t0).Now))
	keys := make([]string, 6)
	for i := range keys {
		keys[i] = fmt.Sprintf("old%d", i)
	}
	incAll(t, old, keys)
	writeLive(t, c, prefix, 4)

	obs := &events{}
	cl := newCleaner(t, c, cleanup.WithPrefix(prefix), cleanup.WithWindow(time.Minute, 0), cleanup.WithObserver(obs))
	r, err := cl.Run(ctx)
	if err != nil || r.Scanned != 10 || r.Deleted != 6 {
		t.Fatalf("Run = %+v, %v; want 10 keys scanned, 6 deleted", r, err)
	}
	got, decisions := obs.take()
	if len(got) != 1 || decisions != 0 {
		t.Fatalf("%d events and %d decisions after one Run, want 1 and 0: %+v", len(got), decisions, got)
	}
	wantEvent(t, got[0], r, nil, "")

	// The background loop: one event per pass, the same as WithReports.
	type pass struct {
		r   cleanup.Report
		err error
	}
	passes := make(chan pass, 10)
	bg := newCleaner(t, c, cleanup.WithPrefix(prefix), cleanup.WithPeriod(time.Hour), cleanup.WithObserver(obs),
		cleanup.WithReports(func(r cleanup.Report, err error) { passes <- pass{r, err} }))
	bg.Start()
	p := <-passes
	// While bg holds the lease, Run is refused and reports nothing.
	if _, err := cl.Run(ctx); !errors.Is(err, cleanup.ErrLocked) {
		t.Fatalf("Run while the loop holds the lease = %v, want ErrLocked", err)
	}
	if err := bg.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ = obs.take()
	if len(got) != 1 {
		t.Fatalf("%d events for the loop's pass and a locked Run, want 1: %+v", len(got), got)
	}
	wantEvent(t, got[0], p.r, p.err, "")

	// A Redis that refuses connections: the pass fails, the event says why.
	dc := newCleaner(t, redistest.DeadClient(t), cleanup.WithPrefix(prefix), cleanup.WithObserver(obs))
	r, err = dc.Run(ctx)
	if err == nil {
		t.Fatalf("Run on a closed port = %+v, nil error", r)
	}
	got, _ = obs.take()
	if len(got) != 1 {
		t.Fatalf("%d events for a failed Run, want 1: %+v", len(got), got)
	}
	wantEvent(t, got[0], r, err, window.ErrorConnection)
}
