package redissup_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// A key offered more than its rate: up to the soft capacity S every unit
// is admitted; between S and the hard capacity H a unit is admitted with
// probability 1 − f, where f grows with the offered rate; beyond H nothing
// is. The draws are fixed at 0.5 here to make the output reproducible.
func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // freeze Redis TIME
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer client.Close()

	l, err := redissup.New(client,
		limiter.WithWindow(time.Second),
		limiter.WithHardLimitFactor(3),  // H = 3 × S
		limiter.WithSuppressionCache(0), // recompute f on every call
		limiter.WithRandom(func() float64 { return 0.5 }),
	)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	rate := limiter.PerSecond(10) // S = 10, H = 30 over 1 s
	for _, n := range []int64{10, 10, 5, 5, 1, 20} {
		d, err := l.Inc(ctx, "user:42", rate, n)
		if err != nil {
			// Bad input. A Redis that cannot be asked is no error: a
			// local limiter answers, with d.Degraded set.
			panic(err)
		}
		fmt.Printf("Inc(%2d): suppressed=%-5v admitted=%-5v factor=%.3f remaining=%d\n", n, d.Suppressed, d.Allowed, d.SuppressionFactor, d.Remaining)
	}
	u, err := l.Get(ctx, "user:42")
	if err != nil {
		panic(err)
	}
	fmt.Printf("accepted %d, declined %d, soft limit %d\n", u.Used, u.Declined, u.Limit)
	// Output:
	// Inc(10): suppressed=false admitted=true  factor=0.000 remaining=0
	// Inc(10): suppressed=true  admitted=true  factor=0.000 remaining=0
	// Inc( 5): suppressed=true  admitted=true  factor=0.500 remaining=0
	// Inc( 5): suppressed=true  admitted=false factor=0.600 remaining=0
	// Inc( 1): suppressed=true  admitted=false factor=0.667 remaining=0
	// Inc(20): suppressed=true  admitted=false factor=1.000 remaining=0
	// accepted 25, declined 26, soft limit 10
}

// The suppressed curve: a key with a target of 100/s (W = 1 s, B = 10 ms,
// F = 1.5, so S = 100 and H = 150) offered a steady 0.5× to 8× its target,
// one unit per call, for 60 windows on a fake clock; the figures leave out
// the first two windows (warm-up: the first fills to H before any refusal
// raises the factor). Under k× overload the factor settles near 1 − 1/k and
// the accepted rate 6–9% above the target: whenever the window holds less
// than S every unit is admitted, so it hovers between S and H instead of
// around S. The local provider computes the table; the Redis provider, fed
// the same draws, admits exactly the same calls (TestSustainedOverload).
func Example_suppressedCurve() {
	const windows = 60
	fmt.Println("| offered | offered/s | accepted/s | accepted ÷ target | mean f between S and H | 1-s windows, min–max |")
	fmt.Println("| --- | --- | --- | --- | --- | --- |")
	for _, mult := range []float64{0.5, 1, 2, 4, 8, 16} {
		clk := conformance.NewClock()
		l, err := localFactoryE(clk, with(overloadOptions(), limiter.WithRandom(conformance.NewRand(1)))...)
		if err != nil {
			panic(err)
		}
		run, err := offer(l, clk, mult, windows*olWindow, false)
		if err != nil {
			panic(err)
		}
		l.Close(context.Background())
		ws := run.windows()
		rate := run.steadyRate()
		f := "—" // never between S and H
		if run.decisions > 0 {
			f = fmt.Sprintf("%.3f", run.meanFactor())
		}
		fmt.Printf("| %g× | %.0f | %.1f | %.2f | %s | %d–%d |\n", mult, mult*olTarget, rate, rate/olTarget,
			f, slices.Min(ws), slices.Max(ws))
	}
	// Output:
	// | offered | offered/s | accepted/s | accepted ÷ target | mean f between S and H | 1-s windows, min–max |
	// | --- | --- | --- | --- | --- | --- |
	// | 0.5× | 50 | 50.0 | 0.50 | — | 50–50 |
	// | 1× | 100 | 100.0 | 1.00 | 0.000 | 100–100 |
	// | 2× | 200 | 104.7 | 1.05 | 0.502 | 98–115 |
	// | 4× | 400 | 105.9 | 1.06 | 0.752 | 98–118 |
	// | 8× | 800 | 108.1 | 1.08 | 0.876 | 99–144 |
	// | 16× | 1600 | 107.7 | 1.08 | 0.938 | 98–143 |
}
