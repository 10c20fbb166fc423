package conformance

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// Strategy selects what RunTrace exercises.
type Strategy int

const (
	// AbsoluteStrategy traces the absolute strategy.
	AbsoluteStrategy Strategy = iota
	// SuppressedStrategy traces the suppressed strategy (F = 1.5), with a
	// separate but identical seeded random source for each provider.
	SuppressedStrategy
)

// traceKeys include every character the Redis key schema escapes.
var traceKeys = []string{"alice", "user:42", "2001:db8::1", "a b{c}%", "bob@example.com", "tier/free"}

// TraceStats counts what a trace exercised, so a test can show it reached
// every regime.
type TraceStats struct {
	Steps, Allowed, Rejected, Suppressed, SuppressedAdmitted, Never, Peeks int
}

// RunTrace feeds providers a and b the same random trace of steps calls
// (Inc with costs from 0 to beyond capacity, IsAllowed, Get, Reset) on one
// shared fake clock that moves by random amounts, some longer than the
// window, and fails at the first decision or usage on which they differ.
func RunTrace(t *testing.T, s Strategy, steps int, seed uint64, a, b Factory) TraceStats {
	t.Helper()
	clk := NewClock()
	opts := []limiter.Option{limiter.WithWindow(time.Second), limiter.WithBucket(50 * time.Millisecond)}
	rates := []limiter.Rate{limiter.PerSecond(5), limiter.PerSecond(10), limiter.PerSecond(2.5), limiter.PerMinute(600), limiter.PerSecond(20)}
	if s == SuppressedStrategy {
		opts = append(opts, limiter.WithHardLimitFactor(1.5), limiter.WithSuppressionCache(100*time.Millisecond))
		rates = []limiter.Rate{limiter.PerSecond(8), limiter.PerSecond(4), limiter.PerSecond(12)}
	}
	withRand := func(o []limiter.Option) []limiter.Option {
		if s != SuppressedStrategy {
			return o
		}
		return append(append([]limiter.Option(nil), o...), limiter.WithRandom(NewRand(seed)))
	}
	la := a(t, clk, withRand(opts)...)
	defer closeLimiter(t, la)
	lb := b(t, clk, withRand(opts)...)
	defer closeLimiter(t, lb)

	rng := rand.New(rand.NewPCG(seed, 42))
	ctx := context.Background()
	var st TraceStats
	for i := 0; i < steps; i++ {
		switch x := rng.IntN(100); {
		case x < 30:
		case x < 80:
			clk.Advance(time.Duration(1+rng.IntN(40)) * time.Millisecond)
		case x < 97:
			clk.Advance(time.Duration(40+rng.IntN(400)) * time.Millisecond)
		default:
			clk.Advance(time.Duration(1000+rng.IntN(600)) * time.Millisecond)
		}
		k := traceKeys[rng.IntN(len(traceKeys))]
		at := clk.Now().Sub(Start)
		st.Steps++
		switch x := rng.IntN(100); {
		case x < 75:
			rate := rates[rng.IntN(len(rates))]
			var n int64
			switch y := rng.IntN(100); {
			case y < 8:
				n = 0
				st.Peeks++
			case y < 70:
				n = 1
			case y < 95:
				n = int64(2 + rng.IntN(5))
			default:
				n = int64(15 + rng.IntN(20))
			}
			da, ea := la.Inc(ctx, k, rate, n)
			db, eb := lb.Inc(ctx, k, rate, n)
			if ea != nil || eb != nil {
				t.Fatalf("step %d at +%v: Inc(%q, %v, %d) errors: %v / %v", i, at, k, rate, n, ea, eb)
			}
			if !Same(da, db) {
				t.Fatalf("step %d at +%v: Inc(%q, %v, %d) differs:\n\ta: %s\n\tb: %s", i, at, k, rate, n, Format(da), Format(db))
			}
			switch {
			case da.Never:
				st.Never++
			case da.Allowed && !da.Suppressed:
				st.Allowed++
			case !da.Allowed && !da.Suppressed:
				st.Rejected++
			case da.Allowed:
				st.SuppressedAdmitted++
			default:
				st.Suppressed++
			}
		case x < 88:
			da, ea := la.IsAllowed(ctx, k)
			db, eb := lb.IsAllowed(ctx, k)
			if ea != nil || eb != nil {
				t.Fatalf("step %d at +%v: IsAllowed(%q) errors: %v / %v", i, at, k, ea, eb)
			}
			if !Same(da, db) {
				t.Fatalf("step %d at +%v: IsAllowed(%q) differs:\n\ta: %s\n\tb: %s", i, at, k, Format(da), Format(db))
			}
		case x < 99:
			ua, ea := la.Get(ctx, k)
			ub, eb := lb.Get(ctx, k)
			if ea != nil || eb != nil || ua != ub {
				t.Fatalf("step %d at +%v: Get(%q) = %+v, %v / %+v, %v", i, at, k, ua, ea, ub, eb)
			}
		default:
			if ea, eb := la.Reset(ctx, k), lb.Reset(ctx, k); ea != nil || eb != nil {
				t.Fatalf("step %d at +%v: Reset(%q) errors: %v / %v", i, at, k, ea, eb)
			}
		}
	}
	return st
}
