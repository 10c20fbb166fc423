package redisabs_test

import (
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redisprov"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// TestHotKeyRelief: three instances of 64 goroutines each on one refusing
// key (C = 2,000 per second), with default options but the window and
// the timeout (conformance.RunHotKey says why), make at most one
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

// TestReliefTrace: on a replayed trace that hammers a key past its limit,
// with calls at another rate, larger costs, peeks and Resets through the
// limiter, relief answers exactly as the limiter without it, on miniredis
// and on a real server, and spares most of the script calls.
func TestReliefTrace(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	conformance.RunReliefSpared(t, conformance.AbsoluteStrategy,
		func(t *testing.T, c *redis.Client, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
			return newLimiter(t, c, append([]limiter.Option{limiter.WithClock(clk.Now)}, opts...)...)
		})
}

// TestReliefResetElsewhere: relief refuses from memory for at most
// redisprov.MaxStale (1 s) after Redis's refusal, even when another instance
// resets the key meanwhile (a documented over-refusal, never an admission
// Redis would refuse), and asks Redis again at that bound, which sees the
// Reset; a Reset through the same limiter forgets at once.
func TestReliefResetElsewhere(t *testing.T) {
	clk := conformance.NewClock()
	c := realClient(t)
	prefix := limiter.WithPrefix(redistest.Prefix(t))
	a := newLimiter(t, c, limiter.WithClock(clk.Now), prefix)
	b := newLimiter(t, c, limiter.WithClock(clk.Now), prefix)
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
	stale := redisprov.MaxStale * time.Millisecond
	clk.Advance(stale - time.Millisecond)
	d := mustInc(t, a, "k", rate, 1)
	if d.Allowed || d.RetryAfter != first.RetryAfter-stale+time.Millisecond {
		t.Fatalf("Inc(k, 1) after another instance's Reset = %s, want refused from memory with RetryAfter %v",
			conformance.Format(d), first.RetryAfter-stale+time.Millisecond)
	}
	clk.Advance(time.Millisecond)
	if d := mustInc(t, a, "k", rate, 1); !d.Allowed {
		t.Fatalf("Inc(k, 1) %v after the refusal, the Reset elsewhere = %s, want allowed (asked of Redis)", stale, conformance.Format(d))
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

// TestReliefLeavesAnOpenBreakerToThePolicy: once the breaker is open,
// a key whose refusal is remembered is answered by the failure policy
// (FailOpen here: admitted, degraded), not from memory.
func TestReliefLeavesAnOpenBreakerToThePolicy(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(srv.Options())
	t.Cleanup(func() { c.Close() })
	clk := conformance.NewClock()
	l := newLimiter(t, c, limiter.WithClock(clk.Now), limiter.WithFailurePolicy(limiter.FailOpen), limiter.WithTimeout(time.Second))
	defer l.Close(ctx)
	rate := limiter.PerSecond(1) // C = 60 per minute
	if d := mustInc(t, l, "k", rate, 60); !d.Allowed {
		t.Fatalf("Inc(k, 60) = %s, want allowed", conformance.Format(d))
	}
	if d := mustInc(t, l, "k", rate, 1); d.Allowed {
		t.Fatalf("Inc(k, 1) on a full key = %s, want refused", conformance.Format(d))
	}
	srv.Stop()
	// Another rate is asked of Redis, which is gone: the breaker opens.
	if d, err := l.Inc(ctx, "k", limiter.PerSecond(2), 1); err != nil || !d.Degraded {
		t.Fatalf("Inc at another rate with Redis stopped = %s, %v; want a degraded answer", conformance.Format(d), err)
	}
	d, err := l.Inc(ctx, "k", rate, 1)
	if err != nil || !d.Degraded || !d.Allowed {
		t.Fatalf("Inc(k, 1) with the breaker open = %s, %v; want FailOpen's admission, degraded, not the remembered refusal",
			conformance.Format(d), err)
	}
}
