package redissup_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// TestHotKeyRelief: three instances of 64 goroutines each on one
// overloaded key (S = H = 2,000 per second), with default options, make at
// most one script call per 20 refused decisions and accept no more than H
// in a window.
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

// scriptCounter counts the script calls (EVALSHA, EVAL) a client sends,
// alone or in pipelines.
type scriptCounter struct{ n atomic.Int64 }

func (h *scriptCounter) count(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if name := c.Name(); name == "evalsha" || name == "eval" {
			h.n.Add(1)
		}
	}
}

func (h *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.count(cmd); return next(ctx, cmd) }
}

func (h *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.count(cmds...); return next(ctx, cmds) }
}

// TestReliefTrace: with the default hard-limit factor (H = S, so a refusal
// does not depend on the draw), on a replayed trace that hammers a key
// past its limit, with calls at another rate, larger costs, peeks and
// Resets through the limiter, relief answers exactly as the limiter
// without it, on miniredis and on a real server, and spares most of the
// script calls.
func TestReliefTrace(t *testing.T) {
	for _, b := range []struct {
		name   string
		client func(testing.TB) *redis.Client
		steps  int
	}{
		{"Mini", func(t testing.TB) *redis.Client { _, c := redistest.Mini(t); return c }, 2_000},
		{"Real", realClient, 10_000},
	} {
		t.Run(b.name, func(t *testing.T) {
			var plain, relieved scriptCounter
			factory := func(h *scriptCounter) conformance.Factory {
				return func(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
					c := redis.NewClient(b.client(t).Options())
					t.Cleanup(func() { c.Close() })
					c.AddHook(h)
					return newLimiter(t, c, with(append([]limiter.Option{limiter.WithHotKeyRelief(true)}, opts...),
						limiter.WithClock(clk), limiter.WithPrefix(redistest.Prefix(t)))...)
				}
			}
			st := conformance.RunReliefTrace(t, conformance.SuppressedStrategy, b.steps, 11, factory(&plain), factory(&relieved))
			t.Logf("%+v; script calls: %d without relief, %d with", st, plain.n.Load(), relieved.n.Load())
			if 2*relieved.n.Load() > plain.n.Load() {
				t.Errorf("%d script calls with relief, %d without: want relief to spare at least half", relieved.n.Load(), plain.n.Load())
			}
		})
	}
}
