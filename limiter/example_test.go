package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
)

func ExampleParseRate() {
	for _, s := range []string{"100/s", "1000/min", "5/h", "20000/day", "3/10s", "60/minute", "5/m"} {
		r, err := limiter.ParseRate(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%-10s %-10v %.6g per second\n", s, r, r.PerSecondValue())
	}
	// Output:
	// 100/s      100/s      100 per second
	// 1000/min   1000/min   16.6667 per second
	// 5/h        5/h        0.00138889 per second
	// 20000/day  20000/day  0.231481 per second
	// 3/10s      3/10s      0.3 per second
	// 60/minute  60/min     1 per second
	// sluice: invalid rate: parse "5/m": ambiguous unit "m" (want "min" or "ms")
}

func ExampleRate_String() {
	fmt.Println(limiter.PerMinute(1000), limiter.PerSecond(5.5), limiter.Every(1, 1500*time.Millisecond), limiter.PerDay(48))
	// Output: 1000/min 5.5/s 1/1500ms 48/day
}

func ExampleWait() {
	ctx := context.Background()
	// 10 per second over a 100 ms window: one unit per window.
	l, err := local.NewAbsolute(limiter.WithWindow(100 * time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer l.Close(ctx)
	rate := limiter.PerSecond(10)

	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for i := range 2 { // the second call sleeps until the first unit expires
		d, err := limiter.Wait(ctx, l, "user:42", rate, 1)
		fmt.Println(i, d.Allowed, err)
	}

	// Two units never fit in a window of one.
	d, err := limiter.Wait(ctx, l, "user:42", rate, 2)
	fmt.Println(d.Never, errors.Is(err, limiter.ErrNeverFits))
	// Output:
	// 0 true <nil>
	// 1 true <nil>
	// true true
}
