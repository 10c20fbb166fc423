package redisabs_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// TestHotKeyRelief: three instances of 64 goroutines each on one refusing
// key (C = 2,000 per second), with default options, make at most one
// script call per 50 refused decisions, admit no more than C in a window,
// and never answer degraded.
func TestHotKeyRelief(t *testing.T) {
	conformance.RunHotKey(t, func(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter {
		l, err := redisabs.New(c, opts...)
		if err != nil {
			t.Fatalf("redisabs.New: %v", err)
		}
		t.Cleanup(func() { l.Close(ctx) })
		return l
	}, 50, 2000)
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

// TestReliefTrace: on a replayed trace that hammers a key past its limit,
// with calls at another rate, larger costs, peeks and Resets through the
// limiter, relief answers exactly as the limiter without it, on miniredis
// and on a real server, and spares most of the script calls.
func TestReliefTrace(t *testing.T) {
	for _, b := range []struct {
		name   string
		client func(testing.TB) redisabs.Client
		steps  int
	}{
		{"Mini", func(t testing.TB) redisabs.Client { _, c := redistest.Mini(t); return c }, 2_000},
		{"Real", realClient, 10_000},
	} {
		t.Run(b.name, func(t *testing.T) {
			var plain, relieved scriptCounter
			factory := func(h *scriptCounter) conformance.Factory {
				return func(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
					c := redis.NewClient(b.client(t).(*redis.Client).Options())
					t.Cleanup(func() { c.Close() })
					c.AddHook(h)
					return newLimiter(t, c, append([]limiter.Option{limiter.WithClock(clk)}, opts...)...)
				}
			}
			st := conformance.RunReliefTrace(t, conformance.AbsoluteStrategy, b.steps, 11, factory(&plain), factory(&relieved))
			t.Logf("%+v; script calls: %d without relief, %d with", st, plain.n.Load(), relieved.n.Load())
			if 2*relieved.n.Load() > plain.n.Load() {
				t.Errorf("%d script calls with relief, %d without: want relief to spare at least half", relieved.n.Load(), plain.n.Load())
			}
		})
	}
}

// TestReliefResetElsewhere: relief refuses from memory until the
// RetryAfter Redis gave, even when another instance resets the key
// meanwhile (a documented over-refusal, never an admission Redis would
// refuse); a Reset through the same limiter forgets at once.
func TestReliefResetElsewhere(t *testing.T) {
	clk := conformance.NewClock()
	c := realClient(t)
	prefix := limiter.WithPrefix(redistest.Prefix(t))
	a := newLimiter(t, c, limiter.WithClock(clk), prefix)
	b := newLimiter(t, c, limiter.WithClock(clk), prefix)
	rate := limiter.PerSecond(2) // C = 120 per minute
	if d := mustInc(t, a, "k", rate, 120); !d.Allowed {
		t.Fatalf("Inc(k, 120) = %s, want allowed", conformance.Format(d))
	}
	first := mustInc(t, a, "k", rate, 1)
	if first.Allowed || first.RetryAfter <= 0 {
		t.Fatalf("Inc(k, 1) on a full key = %s, want refused with a RetryAfter", conformance.Format(first))
	}
	if err := b.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	d := mustInc(t, a, "k", rate, 1)
	if d.Allowed || d.RetryAfter != first.RetryAfter-time.Second {
		t.Fatalf("Inc(k, 1) after another instance's Reset = %s, want refused from memory with RetryAfter %v",
			conformance.Format(d), first.RetryAfter-time.Second)
	}
	if d := mustInc(t, b, "k", rate, 1); !d.Allowed {
		t.Fatalf("Inc(k, 1) on the instance that reset = %s, want allowed", conformance.Format(d))
	}
	if d := mustInc(t, a, "k", limiter.PerSecond(3), 1); !d.Allowed {
		t.Fatalf("Inc(k, 1) at another rate = %s, want allowed (asked of Redis)", conformance.Format(d))
	}
	if err := a.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if d := mustInc(t, a, "k", rate, 1); !d.Allowed {
		t.Fatalf("Inc(k, 1) after Reset through the same limiter = %s, want allowed", conformance.Format(d))
	}
}
