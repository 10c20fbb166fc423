package cleanup_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// One pass over the keys of the default prefix. miniredis moves its clock
// (SetTime) without expiring keys, so the key written two minutes ago under
// a one-minute window is still there with no live bucket, as after a
// PERSIST: the pass deletes it and keeps the one written now.
func Example() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	ctx := context.Background()

	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	mr.SetTime(start)
	l, _ := redisabs.New(c, limiter.WithWindow(time.Minute))
	l.Inc(ctx, "user:1", limiter.PerMinute(10), 1)
	mr.SetTime(start.Add(2 * time.Minute))
	l.Inc(ctx, "user:2", limiter.PerMinute(10), 1)

	cl, err := cleanup.New(c, cleanup.WithWindow(time.Minute, 0))
	if err != nil {
		panic(err)
	}
	r, err := cl.Run(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("scanned", r.Scanned, "deleted", r.Deleted, "live", r.Live)
	fmt.Println(mr.Exists("sluice:{user%3A1}:abs:h"), mr.Exists("sluice:{user%3A2}:abs:h"))
	// Output:
	// scanned 2 deleted 1 live 1
	// false true
}
