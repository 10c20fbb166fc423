package local_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
)

// clock is a clock the example moves by hand, so its output is exact.
type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

// 3 requests per minute for each key, in one process: the fourth is
// refused with the time until it would fit, and admitted once the first
// requests have left the window.
func Example() {
	ctx := context.Background()
	clk := &clock{t: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)}
	// WithClock is for tests and examples; the default is the wall clock.
	l, err := local.NewAbsolute(limiter.WithWindow(time.Minute), limiter.WithClock(clk.Now))
	if err != nil {
		panic(err)
	}
	defer l.Close(ctx)
	rate := limiter.PerMinute(3)

	for range 4 {
		d, err := l.Inc(ctx, "user:42", rate, 1)
		if err != nil {
			panic(err) // bad input (an empty key, an invalid rate), never a refusal
		}
		fmt.Printf("allowed=%v remaining=%d retry-after=%v\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	clk.t = clk.t.Add(61 * time.Second) // W + B (60.6 s) after the first request
	d, _ := l.Inc(ctx, "user:42", rate, 1)
	fmt.Printf("a minute later: allowed=%v remaining=%d\n", d.Allowed, d.Remaining)
	// Output:
	// allowed=true remaining=2 retry-after=0s
	// allowed=true remaining=1 retry-after=0s
	// allowed=true remaining=0 retry-after=0s
	// allowed=false remaining=0 retry-after=1m0.6s
	// a minute later: allowed=true remaining=2
}

// A tier quota: each tier is a set of limits decided as one (a burst limit
// per second and a quota per day). A request is admitted only when every
// limit of its tier has room, and the decision names the limit that
// refused it. Build each tier's set once and pass it to every call.
func ExampleAbsolute_IncSet() {
	ctx := context.Background()
	clk := &clock{t: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)}
	l, err := local.NewAbsolute(limiter.WithClock(clk.Now))
	if err != nil {
		panic(err)
	}
	defer l.Close(ctx)
	tiers := map[string]*limiter.Set{}
	for name, daily := range map[string]float64{"free": 3, "pro": 10_000} {
		set, err := limiter.NewSet(
			limiter.Limit{Name: "burst", Rate: limiter.PerSecond(2), Window: time.Second},
			limiter.Limit{Name: "daily", Rate: limiter.PerDay(daily), Window: 24 * time.Hour},
		)
		if err != nil {
			panic(err)
		}
		tiers[name] = set
	}

	call := func(user, tier string) {
		d, err := l.IncSet(ctx, user, tiers[tier], 1)
		if err != nil {
			panic(err)
		}
		refused := ""
		for _, ld := range d.Limits {
			if ld.Refused {
				refused += " refused by " + ld.Name
			}
		}
		fmt.Printf("%-5s allowed=%-5v burst left %d, daily left %d%s\n",
			user, d.Allowed, d.Limits[0].Remaining, d.Limits[1].Remaining, refused)
	}
	call("alice", "free")
	call("alice", "free")
	call("alice", "free") // a third in one second: the burst limit refuses
	clk.t = clk.t.Add(2 * time.Second)
	call("alice", "free") // the third of the day
	clk.t = clk.t.Add(2 * time.Second)
	call("alice", "free") // the burst has room, the day does not
	call("bob", "pro")
	// Output:
	// alice allowed=true  burst left 1, daily left 2
	// alice allowed=true  burst left 0, daily left 1
	// alice allowed=false burst left 0, daily left 1 refused by burst
	// alice allowed=true  burst left 1, daily left 0
	// alice allowed=false burst left 2, daily left 0 refused by daily
	// bob   allowed=true  burst left 1, daily left 9999
}
