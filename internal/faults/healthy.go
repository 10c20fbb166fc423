package faults

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// RunHealthyPath checks what the per-call timeout adds to an Inc on a
// healthy real Redis, in allocations: nothing when the caller's context can
// never be cancelled (context.Background(), which shares one deadline
// context per timeout/16), and a context of its own (five allocations)
// when it can. The client is set up as docs/operations.md advises.
func RunHealthyPath(t *testing.T, newLimiter NewLimiter) {
	opt := redistest.Real(t).Options()
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	rate := limiter.PerSecond(1e9)
	allocs := func(ctx context.Context, timeout time.Duration) float64 {
		// FailError: a call the machine's load pushes past the timeout
		// fails the test instead of answering from the fallback.
		l := newLimiter(t, c, limiter.WithPrefix(redistest.Prefix(t)), limiter.WithTimeout(timeout),
			limiter.WithFailurePolicy(limiter.FailError))
		defer l.Close(context.Background())
		inc := func() {
			if d, err := l.Inc(ctx, "k", rate, 1); err != nil || !d.Allowed || d.Degraded {
				t.Fatalf("Inc on healthy Redis = %+v, %v", d, err)
			}
		}
		for i := 0; i < 100; i++ { // scripts loaded, connections open
			inc()
		}
		return mallocsPerCall(2000, inc)
	}
	bg := context.Background()
	cctx, cancel := context.WithCancel(bg)
	defer cancel()
	const timeout = 5 * time.Second // long: only the path is measured, never a timeout
	with, without := allocs(bg, timeout), allocs(bg, 0)
	// Means, not AllocsPerRun's truncated ones: go-redis allocates a
	// little more on an odd call, and 19.99 against 20.00 must not read as
	// one allocation more. One allocation per call would add 1.
	if with > without+0.5 {
		t.Errorf("Inc(context.Background()) allocates %.2f times with a timeout, %.2f without: the timeout must add none", with, without)
	}
	cwith, cwithout := allocs(cctx, timeout), allocs(cctx, 0)
	if cwith < cwithout+4 {
		t.Errorf("Inc(cancellable ctx) allocates %.2f times with a timeout, %.2f without: want its own timeout context (5 more)", cwith, cwithout)
	}
	t.Logf("allocations per Inc: Background %.2f (no timeout %.2f); cancellable context %.2f (no timeout %.2f)", with, without, cwith, cwithout)
}

// mallocsPerCall is the mean number of heap allocations of f over runs
// calls, as testing.AllocsPerRun counts them (GOMAXPROCS 1 meanwhile) but
// not truncated to an integer.
func mallocsPerCall(runs int, f func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < runs; i++ {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs)
}
