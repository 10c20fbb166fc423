package conformance

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/check"
	"github.com/sluice-go/sluice/limiter"
)

// Pair builds two limiters of one provider that share state where the
// provider shares it: on one Redis server under one prefix (the local
// provider shares nothing between two limiters). o1 and o2 are the
// options of each; both run on clk.
type Pair func(t *testing.T, clk *Clock, o1, o2 []limiter.Option) (limiter.Limiter, limiter.Limiter)

// RunTwoWindows checks the rule for one name with two windows
// (limiter.ErrWindowConflict): two sets that give the limit "q" windows of
// 1 s and 10 s on one key, and two single limiters with those windows on
// one prefix, called in a random trace on the fake clock. A call of the
// other window while the state lives is refused with ErrWindowConflict and
// changes nothing; no span of either window holds more than its capacity
// of its own admissions (check.MostInAnyWindow), nor, counting what both
// admitted, from any of its own admissions on (check.MostFromEach). A
// window that starts afresh after the other's state died does not count
// that state's units: they are another limit's (docs/algorithms.md, One
// name, two windows). f builds the set limiter, pair the two single
// ones (nil for the local provider, whose limiters share nothing); f is nil
// for a provider without sets. The trace opens with the case of issue #32: 10 per 10 s spent,
// then 10 per 1 s 1.1 s later.
func RunTwoWindows(t *testing.T, s Strategy, f Factory, pair Pair) {
	runTwoWindowsN(t, s, f, pair, twoWindowsSteps)
}

// twoWindowsSteps is the length of RunTwoWindows' random trace, and
// twoWindowsMiniSteps that of RunTwoWindowsMini.
const (
	twoWindowsSteps     = 3000
	twoWindowsMiniSteps = 1000
)

// RunTwoWindowsMini is RunTwoWindows with a random trace of 1,000 calls
// instead of 3,000, for miniredis: its gopher-lua opens a Lua state per
// script call in the test's own process, a few milliseconds of CPU under
// the race detector, so the hybrid's four miniredis traces took 40 s of
// CPU in make test; the real server runs the whole trace, and 1,000 calls
// still change windows five times and let the state die some thirty times.
func RunTwoWindowsMini(t *testing.T, s Strategy, f Factory, pair Pair) {
	runTwoWindowsN(t, s, f, pair, twoWindowsMiniSteps)
}

func runTwoWindowsN(t *testing.T, s Strategy, f Factory, pair Pair, steps int) {
	const c1, c2 = 10, 10
	w1, w2 := time.Second, 10*time.Second
	r1, r2 := limiter.Every(c1, w1), limiter.Every(c2, w2)
	var opts []limiter.Option
	if s == SuppressedStrategy {
		// F = 1: the hard capacity is the capacity, so that the bound
		// checked is C (a larger F would bound accepted units by H)
		opts = append(opts, limiter.WithRandom(NewRand(3)))
	}
	ctx := context.Background()
	t.Run("sets", func(t *testing.T) {
		if f == nil {
			t.Skip("the provider has no sets")
		}
		clk := NewClock()
		l := f(t, clk, opts...)
		defer closeLimiter(t, l)
		sl := setLimiter(t, l)
		sets := [2]*limiter.Set{
			mustSet(lim("q", r1, w1, 0)),
			mustSet(lim("q", r2, w2, 0)),
		}
		inc := func(j int, n int64) (bool, error) {
			d, err := sl.IncSet(ctx, "k", sets[j], n)
			return d.Allowed, err
		}
		runTwoWindows(t, clk, inc, [2]time.Duration{w1, w2}, [2]int64{c1, c2}, steps)
	})
	t.Run("singles", func(t *testing.T) {
		if pair == nil {
			t.Skip("two limiters of this provider share no state")
		}
		clk := NewClock()
		la, lb := pair(t, clk, append([]limiter.Option{limiter.WithWindow(w1)}, opts...),
			append([]limiter.Option{limiter.WithWindow(w2)}, opts...))
		defer closeLimiter(t, la)
		defer closeLimiter(t, lb)
		ls := [2]limiter.Limiter{la, lb}
		rates := [2]limiter.Rate{r1, r2}
		inc := func(j int, n int64) (bool, error) {
			d, err := ls[j].Inc(ctx, "k", rates[j], n)
			return d.Allowed, err
		}
		runTwoWindows(t, clk, inc, [2]time.Duration{w1, w2}, [2]int64{c1, c2}, steps)
	})
}

// runTwoWindows drives inc (limit j of two, n units) and checks each
// limit's bound over every admission.
func runTwoWindows(t *testing.T, clk *Clock, inc func(j int, n int64) (bool, error), w [2]time.Duration, c [2]int64, steps int) {
	t.Helper()
	var all []check.Admission
	var mine [2][]check.Admission
	conflicts := 0
	call := func(j int, n int64) {
		t.Helper()
		ok, err := inc(j, n)
		switch {
		case errors.Is(err, limiter.ErrWindowConflict):
			conflicts++
		case err != nil:
			t.Fatalf("limit %d (window %v) at +%v: %v", j, w[j], clk.Now().Sub(Start), err)
		case ok:
			a := check.Admission{At: clk.Now(), Units: n}
			all = append(all, a)
			mine[j] = append(mine[j], a)
		}
	}
	// The case: the longer window spends its capacity; 1.1 s
	// later the shorter one is refused, not admitted.
	call(1, c[1])
	clk.Advance(1100 * time.Millisecond)
	before := len(all)
	call(0, c[0])
	if len(all) != before || conflicts != 1 {
		t.Fatalf("after %d units of the %v window, a call of the %v window 1.1 s later: %d admitted, %d conflicts; want none admitted, one conflict",
			c[1], w[1], w[0], len(all)-before, conflicts)
	}
	rng := rand.New(rand.NewPCG(32, 2))
	for i := 0; i < steps; i++ {
		switch x := rng.IntN(100); {
		case x < 70:
			clk.Advance(time.Duration(rng.IntN(120)) * time.Millisecond)
		case x < 97:
			clk.Advance(time.Duration(200+rng.IntN(2000)) * time.Millisecond)
		default:
			clk.Advance(w[1] + time.Duration(rng.IntN(2000))*time.Millisecond) // the state dies
		}
		// mostly one window at a time, as a tier change would
		j := (i / 200) % 2
		if rng.IntN(5) == 0 {
			j = 1 - j
		}
		call(j, int64(1+rng.IntN(3)))
	}
	for j := range w {
		if most, at := check.MostInAnyWindow(mine[j], w[j]); most > c[j] {
			t.Errorf("a span of %v from +%v holds %d units admitted under that window, capacity %d", w[j], at.Sub(Start), most, c[j])
		}
		// the state lives at least W after each unit it admits, so the
		// other window admits nothing then: counted from each of its
		// units, the name's units within W are the limit's own
		if most, at := check.MostFromEach(all, mine[j], w[j]); most > c[j] {
			t.Errorf("the %v from +%v, which starts with a unit of that window, holds %d units of the name, capacity %d", w[j], at.Sub(Start), most, c[j])
		}
		if len(mine[j]) == 0 {
			t.Errorf("the %v window admitted nothing: the trace must exercise both", w[j])
		}
	}
	if conflicts < 10 {
		t.Errorf("%d conflicts in the trace, want the two windows to meet often", conflicts)
	}
}
