package redissup_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// The sustained-overload set-up: a target of 100/s over W = 1 s with
// B = 10 ms and F = 1.5, so S = 100 and H = 150.
const (
	olWindow = time.Second
	olBucket = 10 * time.Millisecond
	olTarget = 100.0
	olFactor = 1.5
	olSoft   = 100
	olHard   = 150
	// olWarmup windows are left out of the steady-state figures: the first
	// window fills to H before the factor has seen any refusal.
	olWarmup = 2
)

func overloadOptions() []limiter.Option {
	return []limiter.Option{limiter.WithWindow(olWindow), limiter.WithBucket(olBucket), limiter.WithHardLimitFactor(olFactor)}
}

// loadRun is what one sustained offer produced.
type loadRun struct {
	accepted  []int   // units admitted in each millisecond
	factorSum float64 // sum of the factors of steady-state decisions between S and H
	decisions int     // steady-state decisions between S and H (0 ≤ f < 1)
	maxUsed   int64   // the largest Get().Used seen (the limiter's own window)
}

// offer drives key "k" of l with mult × the target rate for d, one unit per
// call, spread evenly over the milliseconds of clk, and records the
// admissions. With check set, it reads Get after every admitted call.
func offer(l limiter.Limiter, clk *conformance.Clock, mult float64, d time.Duration, check bool) (loadRun, error) {
	ctx := context.Background()
	rate := limiter.PerSecond(olTarget)
	perMs := mult * olTarget / 1000
	n := int(d / time.Millisecond)
	run := loadRun{accepted: make([]int, n)}
	warm := olWarmup * int(olWindow/time.Millisecond)
	offered := 0
	for i := 0; i < n; i++ {
		for due := int(float64(i+1) * perMs); offered < due; offered++ {
			dec, err := l.Inc(ctx, "k", rate, 1)
			if err != nil {
				return run, err
			}
			if i >= warm && dec.Suppressed && dec.SuppressionFactor < 1 {
				run.factorSum += dec.SuppressionFactor
				run.decisions++
			}
			if !dec.Allowed {
				continue
			}
			run.accepted[i]++
			if check {
				u, err := l.Get(ctx, "k")
				if err != nil {
					return run, err
				}
				run.maxUsed = max(run.maxUsed, u.Used)
			}
		}
		clk.Advance(time.Millisecond)
	}
	return run, nil
}

// maxSliding returns the most units admitted in any span of span ms.
func (r loadRun) maxSliding(span int) int {
	best, sum := 0, 0
	for i, a := range r.accepted {
		sum += a
		if i >= span {
			sum -= r.accepted[i-span]
		}
		best = max(best, sum)
	}
	return best
}

// windows returns the units admitted in each whole window after the
// warm-up.
func (r loadRun) windows() []int {
	w := int(olWindow / time.Millisecond)
	var out []int
	for s := olWarmup * w; s+w <= len(r.accepted); s += w {
		c := 0
		for _, a := range r.accepted[s : s+w] {
			c += a
		}
		out = append(out, c)
	}
	return out
}

// steadyRate is the mean accepted rate per second after the warm-up.
func (r loadRun) steadyRate() float64 {
	ws := r.windows()
	total := 0
	for _, c := range ws {
		total += c
	}
	return float64(total) / float64(len(ws)) / olWindow.Seconds()
}

func (r loadRun) meanFactor() float64 {
	if r.decisions == 0 {
		return 0
	}
	return r.factorSum / float64(r.decisions)
}

// TestSustainedOverload offers 2× and 4× the target for twelve windows to
// the Redis provider on a real server, on a fake clock, and checks that the
// accepted rate settles within ±10% of the target, that the limiter's
// window never holds more than H, that no span of W − B holds more than H
// (a bucket's units are all forgotten when its start leaves the window, so
// the full span W can hold up to one bucket's worth more), and that the
// local provider, fed the same draws, admits exactly the same calls.
func TestSustainedOverload(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	const windows = 12
	w := int(olWindow / time.Millisecond)
	b := int(olBucket / time.Millisecond)
	for _, mult := range []float64{2, 4} {
		t.Run(fmt.Sprintf("%g×", mult), func(t *testing.T) {
			clk := conformance.NewClock()
			l := realFactory(t, clk, with(overloadOptions(), limiter.WithRandom(conformance.NewRand(1)))...)
			defer l.Close(ctx)
			got, err := offer(l, clk, mult, windows*olWindow, true)
			if err != nil {
				t.Fatal(err)
			}
			lclk := conformance.NewClock()
			ref := localFactory(t, lclk, with(overloadOptions(), limiter.WithRandom(conformance.NewRand(1)))...)
			defer ref.Close(ctx)
			want, err := offer(ref, lclk, mult, windows*olWindow, false)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want.accepted {
				if got.accepted[i] != want.accepted[i] {
					t.Fatalf("at +%d ms: redissup admitted %d, local %d", i, got.accepted[i], want.accepted[i])
				}
			}

			rate := got.steadyRate()
			t.Logf("%g× the target: %.1f/s accepted (%.3f of the target), mean factor between S and H %.3f, windows %v, "+
				"limiter window max %d, max in W − B %d, max in W %d",
				mult, rate, rate/olTarget, got.meanFactor(), got.windows(), got.maxUsed, got.maxSliding(w-b), got.maxSliding(w))
			if rate < 0.9*olTarget || rate > 1.1*olTarget {
				t.Errorf("accepted %.1f/s under %g× overload, want within ±10%% of %v/s", rate, mult, olTarget)
			}
			if got.maxUsed > olHard {
				t.Errorf("Get().Used reached %d, above H = %d", got.maxUsed, olHard)
			}
			if m := got.maxSliding(w - b); m > olHard {
				t.Errorf("%d units admitted within %d ms, above H = %d", m, w-b, olHard)
			}
			if m, bound := got.maxSliding(w), olHard+int(mult*olTarget*olBucket.Seconds()); m > bound {
				t.Errorf("%d units admitted within W, above H plus one bucket's offer = %d", m, bound)
			}
		})
	}
}

// TestSustainedOverloadRealTime is the same offer at 2× on Redis TIME, in
// real time, for three seconds: a smoke test that nothing in the fake clock
// hid a problem. The target is 500/s so that three windows say something.
// The offers follow a schedule of mult × target per second; offers more
// than 100 ms behind it are dropped, not made in a burst (a descheduled
// test caught up 1,000 offers at once and "the last second" of its
// admissions spanned more than a second), and nothing is offered after
// secs.
func TestSustainedOverloadRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 3 s of real time")
	}
	const target, mult, secs = 500.0, 2.0, 3
	c := realClient(t)
	l := newLimiter(t, c, limiter.WithPrefix(redistest.Prefix(t)), limiter.WithWindow(olWindow),
		limiter.WithBucket(olBucket), limiter.WithHardLimitFactor(olFactor))
	rate := limiter.PerSecond(target)
	hard := int64(target * olFactor)
	const lag = int(mult * target / 10) // 100 ms of offers
	start := time.Now()
	var scheduled, offered, admitted, lastSecond, offeredLast int
	var maxUsed int64
	for {
		el := time.Since(start)
		if el >= secs*time.Second {
			break
		}
		due := int(el.Seconds() * mult * target)
		scheduled = max(scheduled, due-lag)
		for ; scheduled < due && time.Since(start) < secs*time.Second; scheduled++ {
			offered++
			last := time.Since(start) >= (secs-1)*time.Second
			if last {
				offeredLast++
			}
			d := mustInc(t, l, "k", rate, 1)
			if !d.Allowed {
				continue
			}
			admitted++
			if last {
				lastSecond++
			}
			maxUsed = max(maxUsed, mustGet(t, l, "k").Used)
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("offered %d (%d in the last second), admitted %d, in the last second %d, limiter window max %d (H = %d)",
		offered, offeredLast, admitted, lastSecond, maxUsed, hard)
	if maxUsed > hard {
		t.Errorf("Get().Used reached %d, above H = %d", maxUsed, hard)
	}
	if offeredLast < int(0.75*mult*target) {
		t.Fatalf("offered only %d in the last second, want at least %.0f: the machine is too slow for this test", offeredLast, 0.75*mult*target)
	}
	if lo, hi := 0.9*target, 1.2*target; float64(lastSecond) < lo || float64(lastSecond) > hi {
		t.Errorf("accepted %d in the last second, want within [%.0f, %.0f]", lastSecond, lo, hi)
	}
}
