package redisabs_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

func Example() {
	// An in-memory Redis with a frozen clock, so that the output is
	// reproducible; in production, pass your *redis.Client,
	// *redis.ClusterClient or *redis.Ring.
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer client.Close()

	l, err := redisabs.New(client, limiter.WithWindow(time.Minute))
	if err != nil {
		panic(err)
	}
	defer l.Close(context.Background())

	ctx := context.Background()
	// New makes no call: Ping at start-up turns a wrong address or
	// password into an error naming the address.
	if err := l.Ping(ctx); err != nil {
		panic(err)
	}
	rate := limiter.PerMinute(3) // C = 3 per 1-minute window
	for i := 0; i < 4; i++ {
		d, err := l.Inc(ctx, "user:42", rate, 1)
		if err != nil {
			// Bad input. A Redis that cannot be asked is no error: a
			// local limiter answers, with d.Degraded set.
			panic(err)
		}
		fmt.Printf("allowed=%v remaining=%d retry-after=%v\n", d.Allowed, d.Remaining, d.RetryAfter)
	}

	mr.SetTime(time.Date(2026, 1, 1, 12, 0, 45, 0, time.UTC))
	u, err := l.Get(ctx, "user:42")
	if err != nil {
		panic(err)
	}
	d, err := l.IsAllowed(ctx, "user:42")
	if err != nil {
		panic(err)
	}
	fmt.Printf("45 s later: used=%d limit=%d, one more allowed=%v in %v\n", u.Used, u.Limit, d.Allowed, d.RetryAfter)
	// Output:
	// allowed=true remaining=2 retry-after=0s
	// allowed=true remaining=1 retry-after=0s
	// allowed=true remaining=0 retry-after=0s
	// allowed=false remaining=0 retry-after=1m0.6s
	// 45 s later: used=3 limit=3, one more allowed=false in 15.6s
}
