package hybrid_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
)

func ExampleNewAbsolute() {
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

	l, err := hybrid.NewAbsolute(client, limiter.WithWindow(time.Minute))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	rate := limiter.PerMinute(3) // C = 3 per 1-minute window
	for i := 0; i < 4; i++ {
		// The first call takes no lease (a key without history); the
		// next ones lease what the window leaves room for; the fourth
		// is refused by Redis, with the exact wait.
		d, err := l.Inc(ctx, "user:42", rate, 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v remaining=%d retry-after=%v\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Close gives back what the instance still holds: Redis then counts
	// exactly the units admitted.
	if err := l.Close(ctx); err != nil {
		panic(err)
	}
	other, err := hybrid.NewAbsolute(client, limiter.WithWindow(time.Minute))
	if err != nil {
		panic(err)
	}
	defer other.Close(ctx)
	u, err := other.Get(ctx, "user:42")
	if err != nil {
		panic(err)
	}
	fmt.Printf("after Close: used=%d limit=%d\n", u.Used, u.Limit)
	// Output:
	// allowed=true remaining=2 retry-after=0s
	// allowed=true remaining=1 retry-after=0s
	// allowed=true remaining=0 retry-after=0s
	// allowed=false remaining=0 retry-after=1m0.6s
	// after Close: used=3 limit=3
}
