package conformance

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// ScriptCounter is a go-redis hook that counts the script calls (EVALSHA,
// EVAL) a client sends, alone or in pipelines: add it with AddHook.
type ScriptCounter struct{ N atomic.Int64 }

func (h *ScriptCounter) count(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if name := c.Name(); name == "evalsha" || name == "eval" {
			h.N.Add(1)
		}
	}
}

// DialHook is go-redis' hook; it counts nothing.
func (h *ScriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts a command sent alone.
func (h *ScriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.count(cmd); return next(ctx, cmd) }
}

// ProcessPipelineHook counts the commands of a pipeline.
func (h *ScriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.count(cmds...); return next(ctx, cmds) }
}

// RunReliefSpared runs RunReliefSpared1 on a fresh miniredis (2,000 steps:
// gopher-lua is slow) and on the shared real redis-server (10,000 steps).
// newL builds a limiter on c that sends clk's reading as the script's
// clock, with opts.
func RunReliefSpared(t *testing.T, s Strategy, newL func(t *testing.T, c *redis.Client, clk *Clock, opts ...limiter.Option) limiter.Limiter) {
	t.Helper()
	for _, b := range []struct {
		name    string
		connect func(testing.TB) *redis.Client
		steps   int
	}{
		{"Mini", func(t testing.TB) *redis.Client { _, c := redistest.Mini(t); return c }, 2_000},
		{"Real", func(t testing.TB) *redis.Client { return redistest.Real(t).Client(t) }, 10_000},
	} {
		t.Run(b.name, func(t *testing.T) { RunReliefSpared1(t, s, b.steps, b.connect, newL) })
	}
}

// RunReliefSpared1 runs RunReliefTrace with plain and relieved built by
// newL on clients of connect, each counted, and checks that relief spared
// at least half of the script calls.
func RunReliefSpared1(t *testing.T, s Strategy, steps int, connect func(testing.TB) *redis.Client,
	newL func(t *testing.T, c *redis.Client, clk *Clock, opts ...limiter.Option) limiter.Limiter) {
	t.Helper()
	var plain, relieved ScriptCounter
	factory := func(h *ScriptCounter) Factory {
		return func(t *testing.T, clk *Clock, opts ...limiter.Option) limiter.Limiter {
			c := redis.NewClient(connect(t).Options())
			t.Cleanup(func() { c.Close() })
			c.AddHook(h)
			return newL(t, c, clk, opts...)
		}
	}
	st := RunReliefTrace(t, s, steps, 11, factory(&plain), factory(&relieved))
	t.Logf("%+v; script calls: %d without relief, %d with", st, plain.N.Load(), relieved.N.Load())
	if 2*relieved.N.Load() > plain.N.Load() {
		t.Errorf("%d script calls with relief, %d without: want relief to spare at least half", relieved.N.Load(), plain.N.Load())
	}
}

// ReliefStats counts what RunReliefTrace exercised.
type ReliefStats struct {
	Steps, Refused, Allowed, Resets, Peeks int
}

// RunReliefTrace feeds plain (a limiter without hot-key relief) and
// relieved (the same provider with it, the default) the same random trace
// on one fake clock, shaped as relief sees it: two keys hammered in small
// steps of time so that they refuse most calls, mostly one unit at one
// rate, with calls at another rate (a plan change), larger costs, peeks
// (Inc of 0 units and IsAllowed), Get and Reset through the limiter. It
// fails at the first decision or usage on which they differ: relief must
// answer exactly as Redis would, when nothing else writes the keys.
func RunReliefTrace(t *testing.T, s Strategy, steps int, seed uint64, plain, relieved Factory) ReliefStats {
	t.Helper()
	clk := NewClock()
	opts := []limiter.Option{limiter.WithWindow(time.Second), limiter.WithBucket(50 * time.Millisecond)}
	rate, other := limiter.PerSecond(20), limiter.PerSecond(30)
	withRand := func(o []limiter.Option) []limiter.Option {
		if s != SuppressedStrategy {
			return o
		}
		return append(append([]limiter.Option(nil), o...), limiter.WithRandom(NewRand(seed)))
	}
	if s == SuppressedStrategy {
		opts = append(opts, limiter.WithSuppressionCache(100*time.Millisecond))
	}
	la := plain(t, clk, withRand(append(opts, limiter.WithHotKeyRelief(false)))...)
	defer closeLimiter(t, la)
	lb := relieved(t, clk, withRand(opts)...)
	defer closeLimiter(t, lb)

	keys := []string{"hot", "hot", "hot", "warm{1}"}
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := context.Background()
	var st ReliefStats
	for i := 0; i < steps; i++ {
		switch x := rng.IntN(1000); {
		case x < 400:
		case x < 995:
			clk.Advance(time.Duration(1+rng.IntN(5)) * time.Millisecond)
		default:
			clk.Advance(time.Duration(200+rng.IntN(1200)) * time.Millisecond)
		}
		k := keys[rng.IntN(len(keys))]
		at := clk.Now().Sub(Start)
		st.Steps++
		switch x := rng.IntN(1000); {
		case x < 930:
			rate, n := rate, int64(1)
			switch y := rng.IntN(100); {
			case y < 3:
				n = 0
			case y < 8:
				n = int64(2 + rng.IntN(3))
			case y < 12:
				rate = other
			}
			da, ea := la.Inc(ctx, k, rate, n)
			db, eb := lb.Inc(ctx, k, rate, n)
			if ea != nil || eb != nil {
				t.Fatalf("step %d at +%v: Inc(%q, %v, %d) errors: %v / %v", i, at, k, rate, n, ea, eb)
			}
			if !Same(da, db) {
				t.Fatalf("step %d at +%v: Inc(%q, %v, %d) differs:\n\tplain:    %s\n\trelieved: %s", i, at, k, rate, n, Format(da), Format(db))
			}
			if da.Allowed {
				st.Allowed++
			} else {
				st.Refused++
			}
		case x < 970:
			st.Peeks++
			da, ea := la.IsAllowed(ctx, k)
			db, eb := lb.IsAllowed(ctx, k)
			if ea != nil || eb != nil {
				t.Fatalf("step %d at +%v: IsAllowed(%q) errors: %v / %v", i, at, k, ea, eb)
			}
			if !Same(da, db) {
				t.Fatalf("step %d at +%v: IsAllowed(%q) differs:\n\tplain:    %s\n\trelieved: %s", i, at, k, Format(da), Format(db))
			}
		case x < 995:
			ua, ea := la.Get(ctx, k)
			ub, eb := lb.Get(ctx, k)
			// Suppressed: relief reports the units it declined with the
			// key's next Redis call, into the bucket that call opens, so
			// they may count one bucket longer than without relief.
			declined := ua.Declined == ub.Declined || s == SuppressedStrategy && ub.Declined > ua.Declined
			if ea != nil || eb != nil || ua.Used != ub.Used || ua.Limit != ub.Limit || !declined {
				t.Fatalf("step %d at +%v: Get(%q) = %+v, %v / %+v, %v", i, at, k, ua, ea, ub, eb)
			}
		default:
			st.Resets++
			if ea, eb := la.Reset(ctx, k), lb.Reset(ctx, k); ea != nil || eb != nil {
				t.Fatalf("step %d at +%v: Reset(%q) errors: %v / %v", i, at, k, ea, eb)
			}
		}
	}
	if st.Refused < st.Steps/2 || st.Allowed == 0 || st.Resets == 0 {
		t.Errorf("trace %+v: want mostly refusals, some admissions and a Reset", st)
	}
	return st
}
