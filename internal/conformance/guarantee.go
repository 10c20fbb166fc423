package conformance

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/check"
	"github.com/sluice-go/sluice/limiter"
)

// The window guarantee: a bucket opened at s lives until s + W + B, so no
// half-open span of length W ever holds more than C admitted units, and a
// unit is held at most W + B. The traces below check both with the exact
// checker (check.MostInAnyWindow) on every provider the suite runs on.

// guaranteeSteps is the length of each trace (the contract asks for at
// least 5,000 calls).
const guaranteeSteps = 5000

// Trace shapes of RunGuarantee.
const (
	shapeBursty    = iota // one unit opens a bucket, a burst joins it at its last millisecond
	shapeRandom           // random gaps (some longer than W + B), mixed costs, peeks and n > C
	shapeSaturated        // one unit every millisecond: the key is always full
)

// RunGuarantee runs the absolute strategy's window guarantee checks on
// providers built by f: adversarial (bursts at bucket ends) and random
// traces of guaranteeSteps calls over several keys, in which no span of W
// holds more than C admitted units of any key; a saturated key, which must
// admit at least C·W/(W + B) per W; and RetryAfter's exactness.
func RunGuarantee(t *testing.T, f Factory) {
	t.Run("Bursty", func(t *testing.T) { runGuaranteeTrace(t, f, shapeBursty, 1) })
	t.Run("Random", func(t *testing.T) { runGuaranteeTrace(t, f, shapeRandom, 2) })
	t.Run("Saturated", func(t *testing.T) { runGuaranteeTrace(t, f, shapeSaturated, 3) })
	t.Run("RetryAfterExact", func(t *testing.T) { runRetryExact(t, f) })
}

func runGuaranteeTrace(t *testing.T, f Factory, shape int, seed uint64) {
	const w, b = time.Second, 100 * time.Millisecond
	rate := limiter.PerSecond(20) // C = 20
	const c = 20
	clk := NewClock()
	l := f(t, clk, limiter.WithWindow(w), limiter.WithBucket(b))
	defer closeLimiter(t, l)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 7))
	keys := []string{"a", "user:b", "2001:db8::c"}
	adm := map[string][]check.Admission{}
	var admitted, refused int
	start := clk.Now()
	for i := 0; i < guaranteeSteps; i++ {
		k := keys[i%len(keys)]
		var n int64
		switch shape {
		case shapeBursty:
			// Per key: a bucket opens with one unit; 99 ms later (its last
			// millisecond) a burst asks for the rest; then a gap of a bucket
			// or so, so bursts land at every phase of the window.
			switch i % 6 {
			case 0:
				clk.Advance(time.Duration(1+rng.IntN(150)) * time.Millisecond)
				n = 1
			case 3:
				clk.Advance(b - time.Millisecond)
				n = int64(1 + rng.IntN(c))
			default:
				n = int64(1 + rng.IntN(3))
			}
		case shapeRandom:
			switch x := rng.IntN(100); {
			case x < 2:
				clk.Advance(w + b + time.Duration(rng.IntN(2000))*time.Millisecond)
			case x < 60:
				clk.Advance(time.Duration(rng.IntN(30)) * time.Millisecond)
			default:
				clk.Advance(time.Duration(rng.IntN(3)) * time.Millisecond)
			}
			switch x := rng.IntN(100); {
			case x < 5:
				n = 0
			case x < 8:
				n = c + 1 + rng.Int64N(1<<40)
			case x < 60:
				n = 1
			default:
				n = 1 + rng.Int64N(c)
			}
		case shapeSaturated:
			k = "hot"
			clk.Advance(time.Millisecond)
			n = 1
		}
		d, err := l.Inc(ctx, k, rate, n)
		if err != nil {
			t.Fatalf("step %d: Inc(%q, %d): %v", i, k, n, err)
		}
		if d.Allowed && n > 0 {
			adm[k] = append(adm[k], check.Admission{At: clk.Now(), Units: n})
			admitted++
		} else if !d.Allowed {
			refused++
		}
	}
	if admitted == 0 || refused == 0 {
		t.Fatalf("trace admitted %d and refused %d calls: it never reached the limit", admitted, refused)
	}
	for k, a := range adm {
		most, at := check.MostInAnyWindow(a, w)
		t.Logf("key %q: %d admissions, most in any %v: %d (capacity %d), from +%v", k, len(a), w, most, c, at.Sub(Start))
		if most > c {
			t.Errorf("key %q: %d units admitted in the %v from +%v, capacity %d", k, most, w, at.Sub(Start), c)
		}
	}
	if shape == shapeSaturated {
		// Every call finds the key full or admits one unit: over T the key
		// admits at least C per W + B, less the one period cut by the end.
		elapsed := clk.Now().Sub(start)
		var units int64
		for _, a := range adm["hot"] {
			units += a.Units
		}
		perW := float64(units) * float64(w) / float64(elapsed)
		floor := float64(c) * float64(w) / float64(w+b)
		min := int64(float64(c)*float64(elapsed)/float64(w+b)) - c
		t.Logf("saturated: %d units in %v: %.2f per W (C = %d, C·W/(W+B) = %.2f)", units, elapsed, perW, c, floor)
		if units < min {
			t.Errorf("saturated key admitted %d units in %v, want at least %d (C·W/(W+B) per W)", units, elapsed, min)
		}
	}
}

// runRetryExact checks on refused calls of random costs that a retry at
// exactly RetryAfter is admitted and one at a millisecond earlier is
// refused, when nothing else happens in between.
func runRetryExact(t *testing.T, f Factory) {
	const w, b = time.Second, 100 * time.Millisecond
	rate := limiter.PerSecond(20) // C = 20
	clk := NewClock()
	l := f(t, clk, limiter.WithWindow(w), limiter.WithBucket(b))
	defer closeLimiter(t, l)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(4, 4))
	checked := 0
	for i := 0; i < 300 && checked < 40; i++ {
		clk.Advance(time.Duration(rng.IntN(120)) * time.Millisecond)
		n := 1 + rng.Int64N(20)
		d, err := l.Inc(ctx, "k", rate, n)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed || d.Never {
			continue
		}
		if d.RetryAfter <= 0 || d.RetryAfter > w+b {
			t.Fatalf("step %d: refused Inc(k, %d) with RetryAfter %v, want in (0, W + B]", i, n, d.RetryAfter)
		}
		checked++
		clk.Advance(d.RetryAfter - time.Millisecond)
		if early, err := l.Inc(ctx, "k", rate, n); err != nil || early.Allowed {
			t.Fatalf("step %d: Inc(k, %d) 1 ms before RetryAfter %v = %s, %v; want refused", i, n, d.RetryAfter, Format(early), err)
		}
		clk.Advance(time.Millisecond)
		if on, err := l.Inc(ctx, "k", rate, n); err != nil || !on.Allowed {
			t.Fatalf("step %d: Inc(k, %d) at RetryAfter %v = %s, %v; want admitted", i, n, d.RetryAfter, Format(on), err)
		}
	}
	if checked < 20 {
		t.Fatalf("only %d refusals checked", checked)
	}
}

// RunSuppressedCeiling feeds a suppressed provider (S = 20, H = 30) a
// random overload of guaranteeSteps calls over several keys, with bursts at
// bucket ends, and checks with the same checker that no span of W holds
// more than H accepted units of any key. It logs the most in any window
// against S, the soft target, which is not a per-window bound.
func RunSuppressedCeiling(t *testing.T, f Factory) {
	const w, b = time.Second, 100 * time.Millisecond
	rate := limiter.PerSecond(20)
	const soft, hard = 20, 30
	clk := NewClock()
	l := f(t, clk, limiter.WithWindow(w), limiter.WithBucket(b), limiter.WithHardLimitFactor(1.5),
		limiter.WithSuppressionCache(50*time.Millisecond), limiter.WithRandom(NewRand(11)))
	defer closeLimiter(t, l)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 5))
	keys := []string{"a", "b", "c"}
	adm := map[string][]check.Admission{}
	for i := 0; i < guaranteeSteps; i++ {
		k := keys[rng.IntN(len(keys))]
		switch x := rng.IntN(100); {
		case x < 1:
			clk.Advance(w + b)
		case x < 10:
			clk.Advance(b - time.Millisecond)
		case x < 70:
			clk.Advance(time.Duration(rng.IntN(4)) * time.Millisecond)
		}
		n := 1 + rng.Int64N(4)
		if rng.IntN(50) == 0 {
			n = hard + 1 + rng.Int64N(1<<40)
		}
		d, err := l.Inc(ctx, k, rate, n)
		if err != nil {
			t.Fatalf("step %d: Inc(%q, %d): %v", i, k, n, err)
		}
		if d.Allowed {
			adm[k] = append(adm[k], check.Admission{At: clk.Now(), Units: n})
		}
	}
	for _, k := range keys {
		most, at := check.MostInAnyWindow(adm[k], w)
		t.Logf("key %q: most accepted in any %v: %d (soft %d, hard %d)", k, w, most, soft, hard)
		if most > hard {
			t.Errorf("key %q: %d units accepted in the %v from +%v, hard capacity %d", k, most, w, at.Sub(Start), hard)
		}
		if most <= soft {
			t.Errorf("key %q: the overload never took the key above its soft capacity (most %d)", k, most)
		}
	}
}
