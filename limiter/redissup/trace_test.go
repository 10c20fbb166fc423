package redissup_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/limiter"
)

// regimes counts the Inc decisions of a trace by where the key stood.
type regimes struct {
	incs, belowSoft, between, beyondHard, never, peeks, isAllowed, gets int
}

// sameDecision compares every field; the factor within 1e-6 (every
// provider rounds it to whole parts per million, so in practice exactly).
func sameDecision(a, b limiter.Decision) bool {
	fa, fb := a.SuppressionFactor, b.SuppressionFactor
	a.SuppressionFactor, b.SuppressionFactor = 0, 0
	return a == b && math.Abs(fa-fb) <= 1e-6
}

// suppressedTrace feeds the local reference and the provider from f the
// same trace on one fake clock, each with its own source seeded alike, and
// fails at the first difference. Keys move between load phases so the trace
// spends time below the soft capacity, between soft and hard, and beyond
// hard (F = 1.5), with peeks, IsAllowed, Get and rare Resets mixed in.
//
// With W > 1 s the factor's "recent" second is a part of the window, which
// takes the scripts through their scan of the recent buckets.
func suppressedTrace(t *testing.T, f conformance.Factory, w time.Duration, steps int, seed uint64) regimes {
	t.Helper()
	clk := conformance.NewClock()
	opts := []limiter.Option{
		limiter.WithWindow(w), limiter.WithBucket(w / 100),
		limiter.WithHardLimitFactor(1.5), limiter.WithSuppressionCache(100 * time.Millisecond),
	}
	ref := localFactory(t, clk, with(opts, limiter.WithRandom(conformance.NewRand(seed)))...)
	defer ref.Close(context.Background())
	got := f(t, clk, with(opts, limiter.WithRandom(conformance.NewRand(seed)))...)
	defer got.Close(context.Background())

	keys := []string{"k0", "user:1", "2001:db8::7", "tier {free}"}
	// Each key offers about 250 units/s; the rates put that at 0.6×, 2.5×,
	// 6× and 17× the target. Every 1,000 steps the keys swap rates. A gap
	// of more than W now and then lets keys expire.
	rates := []limiter.Rate{limiter.PerSecond(400), limiter.PerSecond(100), limiter.PerSecond(40), limiter.PerSecond(15)}
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := context.Background()
	var r regimes
	for i := 0; i < steps; i++ {
		switch x := rng.IntN(1000); {
		case x < 2:
			clk.Advance(w + time.Duration(rng.IntN(500))*time.Millisecond)
		case x < 20:
			clk.Advance(time.Duration(50+rng.IntN(300)) * time.Millisecond)
		default:
			clk.Advance(time.Duration(1+rng.IntN(3)) * time.Millisecond)
		}
		ki := rng.IntN(len(keys))
		k := keys[ki]
		at := clk.Now().Sub(conformance.Start)
		switch x := rng.IntN(100); {
		case x < 80:
			rate := rates[(ki+i/1000)%len(rates)]
			var n int64
			switch y := rng.IntN(100); {
			case y < 6:
				n = 0
				r.peeks++
			case y < 86:
				n = 1
			case y < 98:
				n = int64(2 + rng.IntN(3))
			default:
				n = int64(30 * w / time.Second) // more than H at 15/s: never
			}
			a, ea := ref.Inc(ctx, k, rate, n)
			b, eb := got.Inc(ctx, k, rate, n)
			if ea != nil || eb != nil {
				t.Fatalf("step %d at +%v: Inc(%q, %v, %d) errors: %v / %v", i, at, k, rate, n, ea, eb)
			}
			if !sameDecision(a, b) {
				t.Fatalf("step %d at +%v: Inc(%q, %v, %d) = %s, want %s", i, at, k, rate, n, conformance.Format(b), conformance.Format(a))
			}
			r.incs++
			switch {
			case a.Never:
				r.never++
			case !a.Suppressed:
				r.belowSoft++
			case a.SuppressionFactor < 1:
				r.between++
			default:
				r.beyondHard++
			}
		case x < 90:
			a, ea := ref.IsAllowed(ctx, k)
			b, eb := got.IsAllowed(ctx, k)
			if ea != nil || eb != nil {
				t.Fatalf("step %d at +%v: IsAllowed(%q) errors: %v / %v", i, at, k, ea, eb)
			}
			if !sameDecision(a, b) {
				t.Fatalf("step %d at +%v: IsAllowed(%q) = %s, want %s", i, at, k, conformance.Format(b), conformance.Format(a))
			}
			r.isAllowed++
		case x < 99:
			a, ea := ref.Get(ctx, k)
			b, eb := got.Get(ctx, k)
			if ea != nil || eb != nil || a != b {
				t.Fatalf("step %d at +%v: Get(%q) = %+v, %v, want %+v, %v", i, at, k, b, eb, a, ea)
			}
			r.gets++
		default:
			if ea, eb := ref.Reset(ctx, k), got.Reset(ctx, k); ea != nil || eb != nil {
				t.Fatalf("step %d at +%v: Reset(%q) errors: %v / %v", i, at, k, ea, eb)
			}
		}
	}
	return r
}

// regime is how many decisions of a trace fell in one regime, and the
// least the trace must have for its comparison to cover that regime.
type regime struct {
	name    string
	n, want int
}

// wantRegimes fails t for each regime the trace of total calls of op
// visited fewer times than it must.
func wantRegimes(t *testing.T, op string, total int, rs []regime) {
	t.Helper()
	for _, c := range rs {
		if c.n < c.want {
			t.Errorf("trace had %d %s decisions %s out of %d, want at least %d", c.n, op, c.name, total, c.want)
		}
	}
}

// TestSameAsLocalBatched is TestSameAsLocal's trace with batching on
// (WithBatching(128)), on real Redis and the cluster, in parallel.
func TestSameAsLocalBatched(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, p := range providers[1:3] {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			batched := func(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
				return p.f(t, clk, append(opts, limiter.WithBatching(128))...)
			}
			const steps = 6000
			r := suppressedTrace(t, batched, time.Second, steps, 11)
			wantRegimes(t, "Inc", r.incs, []regime{
				{"below soft", r.belowSoft, r.incs / 20},
				{"between soft and hard", r.between, r.incs / 40},
				{"beyond hard", r.beyondHard, r.incs / 40},
				{"never", r.never, 10},
				{"peeks", r.peeks, r.incs / 50},
			})
		})
	}
}

// TestSameAsLocal shows that, given the same seeded source and the same
// time, the Redis provider decides exactly as the local one in every
// regime, so nothing depends on server-side randomness. The traces, one
// per provider and window, each on its own limiters, run in parallel.
//
// The servers run 6,000 steps, miniredis the first 3,000 of the same
// trace, which reach every regime: its gopher-lua runs in this process,
// slowly under the race detector (21 s of make test at 6,000).
func TestSameAsLocal(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, p := range providers {
		for _, w := range []time.Duration{time.Second, 3 * time.Second} {
			t.Run(fmt.Sprintf("%s/W=%v", p.name, w), func(t *testing.T) {
				t.Parallel()
				steps := 6000
				if p.name == "Mini" {
					steps = 3000
				}
				r := suppressedTrace(t, p.f, w, steps, 11)
				t.Logf("%+v", r)
				wantRegimes(t, "Inc", r.incs, []regime{
					{"below soft", r.belowSoft, r.incs / 20},
					{"between soft and hard", r.between, r.incs / 40},
					{"beyond hard", r.beyondHard, r.incs / 40},
					{"never", r.never, r.incs / 400}, // 12 of the servers' 4,800
					{"peeks", r.peeks, r.incs / 50},
				})
			})
		}
	}
}
