package redissup_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// TestHotKeyRelief: three instances of 64 goroutines each on one
// overloaded key (S = H = 2,000 per second), with default options but the
// window and the timeout (conformance.RunHotKey says why), make at most one
// script call per 20 refused decisions, accept no more than H in a window,
// and never answer degraded.
func TestHotKeyRelief(t *testing.T) {
	conformance.RunHotKey(t, func(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter {
		l, err := redissup.New(c, opts...)
		if err != nil {
			t.Fatalf("redissup.New: %v", err)
		}
		t.Cleanup(func() { l.Close(context.Background()) })
		return l
	}, 20, 2000)
}

// TestReliefTrace: with the default hard-limit factor (H = S, so a refusal
// does not depend on the draw), on a replayed trace that hammers a key
// past its limit, with calls at another rate, larger costs, peeks and
// Resets through the limiter, relief answers exactly as the limiter
// without it (Get's Declined aside: see RunReliefTrace), on miniredis and
// on a real server, and spares most of the script calls.
func TestReliefTrace(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	conformance.RunReliefSpared(t, conformance.SuppressedStrategy,
		func(t *testing.T, c *redis.Client, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
			return newLimiter(t, c, with(append([]limiter.Option{limiter.WithHotKeyRelief(true)}, opts...),
				limiter.WithClock(clk.Now), limiter.WithPrefix(redistest.Prefix(t)))...)
		})
}
