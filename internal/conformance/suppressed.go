package conformance

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

func sAllowed(limit, remaining int64, reset time.Duration) limiter.Decision {
	return allowed(limit, remaining, reset)
}

// supp is a Suppressed decision; factor is in parts per million.
func supp(ok bool, limit, remaining int64, retry, reset time.Duration, factorPPM int64) limiter.Decision {
	return limiter.Decision{Suppressed: true, Allowed: ok, Limit: limit, Remaining: remaining,
		RetryAfter: retry, ResetAfter: reset, SuppressionFactor: float64(factorPPM) / 1e6}
}

func suppOpts(seq *Seq, factor float64, cache time.Duration, w time.Duration) []limiter.Option {
	return []limiter.Option{
		limiter.WithWindow(w), limiter.WithBucket(100 * time.Millisecond),
		limiter.WithHardLimitFactor(factor), limiter.WithSuppressionCache(cache),
		limiter.WithRandom(seq.Float64),
	}
}

func wantDraws(seq *Seq, n int) func(*testing.T) {
	return func(t *testing.T) {
		t.Helper()
		if got := seq.Draws(); got != n {
			t.Errorf("random draws = %d, want exactly %d (one per Inc)", got, n)
		}
	}
}

func suppressedTables() []table {
	// S = 10, H = 15 at 10/s over 1 s with F = 1.5.
	a := NewSeq(0.5)
	b := NewSeq(0.5, 0.1, 0.1, 0.2, 0.25)
	c := NewSeq(0.5, 0.1, 0.1, 0.2, 0.25)
	d := NewSeq(0.5, 0.5, 0.79, 0.84)
	p := NewSeq(0.5)
	r := NewSeq(0.5)
	j := NewSeq(0.5)
	// A bucket opened at s lives until s + W + B: 1100 ms here, 10100 ms
	// in the 10 s table.
	return []table{
		{name: "soft hard and never", opts: suppOpts(a, 1.5, 100*time.Millisecond, time.Second), steps: []step{
			inc("k", ten, 10, sAllowed(10, 0, ms(1100))),
			inc("k", ten, 6, supp(false, 10, 0, ms(1100), ms(1100), 1e6)),
			get("k", limiter.Usage{Used: 10, Declined: 6, Limit: 10}),
			// A request over H is recorded as H + 1 = 16 units, whatever its n.
			inc("k", ten, math.MaxInt64, limiter.Decision{Suppressed: true, Limit: 10, ResetAfter: ms(1100), SuppressionFactor: 1, Never: true}),
			get("k", limiter.Usage{Used: 10, Declined: 22, Limit: 10}),
			// observed 32 over 1 s: f = 1 − 10/32 = 0.6875, computed, not cached, no draw.
			isAllowed("k", supp(false, 10, 0, ms(1100), ms(1100), 687500)),
			after(ms(1100), inc("k", ten, 1, sAllowed(10, 9, ms(1100)))),
			get("k", limiter.Usage{Used: 1, Limit: 10}),
		}, check: wantDraws(a, 4)},
		{name: "factor without cache", opts: suppOpts(b, 1.5, 0, time.Second), steps: []step{
			inc("k", ten, 10, sAllowed(10, 0, ms(1100))),
			// observed 10 over 1 s at S = 10: f = 0, admitted above soft.
			after(ms(100), inc("k", ten, 2, supp(true, 10, 0, 0, ms(1100), 0))),
			// observed 12: f = 1 − 10/12 = 0.166667; draw 0.1 < f: refused.
			after(ms(100), inc("k", ten, 1, supp(false, 10, 0, ms(900), ms(1100), 166667))),
			isAllowed("k", supp(false, 10, 0, ms(900), ms(1100), 230769)),
			// observed 13: f = 0.230769; draw 0.2 < f: refused.
			after(ms(50), inc("k", ten, 1, supp(false, 10, 0, ms(850), ms(1050), 230769))),
			// observed 14: f = 0.285714; draw 0.25 < f: refused.
			after(ms(50), inc("k", ten, 1, supp(false, 10, 0, ms(800), ms(1100), 285714))),
			get("k", limiter.Usage{Used: 12, Declined: 3, Limit: 10}),
		}, check: wantDraws(b, 5)},
		{name: "factor cached for its period", opts: suppOpts(c, 1.5, 100*time.Millisecond, time.Second), steps: []step{
			inc("k", ten, 10, sAllowed(10, 0, ms(1100))),
			after(ms(100), inc("k", ten, 2, supp(true, 10, 0, 0, ms(1100), 0))),
			// computed at +200 and cached until +300.
			after(ms(100), inc("k", ten, 1, supp(false, 10, 0, ms(900), ms(1100), 166667))),
			isAllowed("k", supp(false, 10, 0, ms(900), ms(1100), 166667)),
			// the cached 0.166667, not a fresh 0.230769: draw 0.2 admits.
			after(ms(50), inc("k", ten, 1, supp(true, 10, 0, 0, ms(1050), 166667))),
			// +300: the cache has expired; observed 14 gives 0.285714.
			after(ms(50), inc("k", ten, 1, supp(false, 10, 0, ms(800), ms(1100), 285714))),
			get("k", limiter.Usage{Used: 13, Declined: 2, Limit: 10}),
		}, check: wantDraws(c, 5)},
		{name: "recent second dominates a long window", opts: suppOpts(d, 2, 0, 10*time.Second), steps: []step{
			// 1/s over 10 s: S = 10, H = 20.
			inc("k", limiter.PerSecond(1), 10, sAllowed(10, 0, ms(10100))),
			// 10 observed long ago, none in the last second: f = 0.
			after(ms(5000), inc("k", limiter.PerSecond(1), 5, supp(true, 10, 0, 0, ms(10100), 0))),
			// 15·1000 against 5 in the last second·10000: f = 1 − 10000/50000 = 0.8.
			// (+5100 opens a bucket: 100 ms after +5000 is not less than B.)
			after(ms(100), inc("k", limiter.PerSecond(1), 1, supp(false, 10, 0, ms(5000), ms(10100), 800000))),
			// 6 in the last second: f = 1 − 10000/60000 = 0.833333; draw 0.84 admits.
			inc("k", limiter.PerSecond(1), 1, supp(true, 10, 0, 0, ms(10100), 833333)),
			get("k", limiter.Usage{Used: 16, Declined: 1, Limit: 10}),
		}, check: wantDraws(d, 4)},
		{name: "peek draws once and writes nothing", opts: suppOpts(p, 1.5, 100*time.Millisecond, time.Second), steps: []step{
			inc("k", ten, 0, sAllowed(10, 10, 0)),
			get("k", limiter.Usage{}),
			isAllowed("k", unknown),
			inc("k", ten, 10, sAllowed(10, 0, ms(1100))),
			inc("k", ten, 0, supp(true, 10, 0, 0, ms(1100), 0)),
			get("k", limiter.Usage{Used: 10, Limit: 10}),
		}, check: wantDraws(p, 3)},
		{name: "reset and idle key", opts: suppOpts(r, 1.5, 100*time.Millisecond, time.Second), steps: []step{
			// nothing observed yet: f = 0, so 12 is admitted above soft.
			inc("k", ten, 12, supp(true, 10, 0, 0, ms(1100), 0)),
			reset("k"),
			get("k", limiter.Usage{}),
			isAllowed("k", unknown),
			inc("k", ten, 3, sAllowed(10, 7, ms(1100))),
			after(ms(1099), isAllowed("k", sAllowed(10, 7, ms(1)))),
			after(ms(1), isAllowed("k", unknown)),
			get("k", limiter.Usage{}),
		}, check: wantDraws(r, 2)},
		{name: "clock jumps a year ahead and back", opts: suppOpts(j, 1.5, 100*time.Millisecond, time.Second),
			steps: clockJumpSteps(sAllowed, 6, supp(false, 10, 0, ms(2199), ms(2199), 1e6)), check: wantDraws(j, 6)},
	}
}

// RunSuppressed runs the suppressed strategy's step tables, the admission
// statistics check, error checks and the concurrency check.
func RunSuppressed(t *testing.T, f Factory) {
	runSuppressed(t, f, 1000, concurrentCalls)
}

// RunSuppressedMini is RunSuppressed for miniredis, whose gopher-lua opens
// a Lua state per script call in the test's own process (one to two
// milliseconds of CPU under the race detector): the admission statistics
// check makes 250 peeks per factor instead of 1,000 (with the tolerance
// of 4 standard deviations that follows) and the concurrency check 1,600
// calls instead of 6,400 (see RunAbsoluteMini). The step tables, the
// errors and the hard ceiling's 5,000-call trace run whole. The seeded
// draws are the client's, so the servers run the same checks at full
// size.
func RunSuppressedMini(t *testing.T, f Factory) {
	runSuppressed(t, f, 250, concurrentCallsMini)
}

func runSuppressed(t *testing.T, f Factory, peeks, calls int) {
	t.Run("Tables", func(t *testing.T) { runTables(t, f, suppressedTables()) })
	t.Run("OddDraws", func(t *testing.T) { RunOddDraws(t, f) })
	t.Run("AdmissionFollowsFactor", func(t *testing.T) { runAdmission(t, f, peeks) })
	t.Run("Errors", func(t *testing.T) { RunErrors(t, f) })
	t.Run("Concurrent", func(t *testing.T) { RunConcurrent(t, f, concurrentGoroutines, calls/concurrentGoroutines, 1000) })
	t.Run("HardCeiling", func(t *testing.T) { RunSuppressedCeiling(t, f) })
}

// RunSuppressedTables is RunSuppressed without the admission statistics
// check, for a provider whose peeks legitimately see a factor other than
// the one that check expects (the hybrid's leases count as offered units
// in Redis until used or given back).
func RunSuppressedTables(t *testing.T, f Factory) {
	t.Run("Tables", func(t *testing.T) { runTables(t, f, suppressedTables()) })
	t.Run("OddDraws", func(t *testing.T) { RunOddDraws(t, f) })
	t.Run("Errors", func(t *testing.T) { RunErrors(t, f) })
	t.Run("Concurrent", func(t *testing.T) {
		RunConcurrent(t, f, concurrentGoroutines, concurrentCalls/concurrentGoroutines, 1000)
	})
	t.Run("HardCeiling", func(t *testing.T) { RunSuppressedCeiling(t, f) })
}

// RunOddDraws: a random source returning NaN decides as one returning 0
// (the draw that admits least), -Inf and other negatives as 0, and +Inf
// and other values of 1 or more as the largest draw below 1. The trace
// (S = 10, H = 20, no factor cache, 30 single units at one instant)
// admits 11 at draw 0 and 20 at the largest draw, so a source mapped to
// the wrong end is seen.
func RunOddDraws(t *testing.T, f Factory) {
	trace := func(r float64) []limiter.Decision {
		t.Helper()
		l := f(t, NewClock(), limiter.WithWindow(time.Second), limiter.WithBucket(100*time.Millisecond),
			limiter.WithHardLimitFactor(2), limiter.WithSuppressionCache(0), limiter.WithRandom(func() float64 { return r }))
		defer closeLimiter(t, l)
		ds := make([]limiter.Decision, 30)
		for i := range ds {
			d, err := l.Inc(context.Background(), "k", ten, 1)
			if err != nil {
				t.Fatalf("draw %v: Inc %d: %v", r, i, err)
			}
			ds[i] = d
		}
		return ds
	}
	admitted := func(ds []limiter.Decision) (n int) {
		for _, d := range ds {
			if d.Allowed {
				n++
			}
		}
		return n
	}
	least, most := trace(0), trace(math.Nextafter(1, 0))
	if a, b := admitted(least), admitted(most); a >= b {
		t.Fatalf("draw 0 admitted %d, the largest draw %d: the trace cannot tell the ends apart", a, b)
	}
	for _, tt := range []struct {
		name string
		r    float64
		want []limiter.Decision
	}{
		{"NaN", math.NaN(), least},
		{"-Inf", math.Inf(-1), least},
		{"-0.5", -0.5, least},
		{"+Inf", math.Inf(1), most},
		{"1", 1, most},
		{"1e300", 1e300, most},
	} {
		got := trace(tt.r)
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("draw %s: Inc %d = %s, want %s", tt.name, i, Format(got[i]), Format(tt.want[i]))
				break
			}
		}
	}
}

// lockedRand is a seeded source safe for concurrent use.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// NewRand returns a deterministic source for WithRandom.
func NewRand(seed uint64) func() float64 {
	l := &lockedRand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	return func() float64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.r.Float64()
	}
}

// runAdmission freezes a key between soft and hard and peeks many times:
// the share admitted must follow 1 − f.
func runAdmission(t *testing.T, f Factory, peeks int) {
	// 1,000 peeks per factor: the share admitted has a standard deviation
	// of at most 0.016, so ±0.065 is 4 of them (250 peeks: 0.032, ±0.13);
	// f = 0.75 (share 0.25) is told from a rule that admitted with
	// probability f (share 0.75).
	tolerance := 0.065 * math.Sqrt(1000/float64(peeks))
	clk := NewClock()
	l := f(t, clk, limiter.WithWindow(time.Second), limiter.WithBucket(100*time.Millisecond),
		limiter.WithHardLimitFactor(3), limiter.WithSuppressionCache(0), limiter.WithRandom(NewRand(7)))
	defer closeLimiter(t, l)
	ctx := context.Background()
	// S = 10, H = 30. 20 accepted (the second 10 at f = 0).
	for _, n := range []int64{10, 10} {
		if d, err := l.Inc(ctx, "k", ten, n); err != nil || !d.Allowed {
			t.Fatalf("Inc(k, 10) = %s, %v; want allowed", Format(d), err)
		}
	}
	check := func(wantF float64) {
		t.Helper()
		admitted := 0
		for i := 0; i < peeks; i++ {
			d, err := l.Inc(ctx, "k", ten, 0)
			if err != nil {
				t.Fatalf("peek: %v", err)
			}
			if d.SuppressionFactor != wantF || !d.Suppressed {
				t.Fatalf("peek = %s, want suppressed with factor %v", Format(d), wantF)
			}
			if d.Allowed {
				admitted++
			}
		}
		share := float64(admitted) / float64(peeks)
		if math.Abs(share-(1-wantF)) > tolerance {
			t.Errorf("factor %v: admitted %.3f of %d peeks, want %.3f ± %.2f", wantF, share, peeks, 1-wantF, tolerance)
		}
	}
	check(0.5) // observed 20: f = 1 − 10/20
	// 20 more offered beyond hard: refused, but observed 40: f = 0.75.
	if d, err := l.Inc(ctx, "k", ten, 20); err != nil || d.Allowed || d.SuppressionFactor != 1 {
		t.Fatalf("Inc(k, 20) beyond hard = %s, %v; want refused with factor 1", Format(d), err)
	}
	check(0.75)
}
