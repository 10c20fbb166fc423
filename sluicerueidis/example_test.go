package sluicerueidis_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/sluicerueidis"
)

// A limiter of three calls a minute per key on a rueidis client. The
// example runs on miniredis, which needs client-side caching off
// (DisableCache); against Redis the same code works with the client's
// defaults.
func Example() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer rc.Close() // after the limiter's Close

	l, err := redisabs.New(sluicerueidis.New(rc), limiter.WithWindow(time.Minute))
	if err != nil {
		panic(err)
	}
	defer l.Close(context.Background())

	ctx := context.Background()
	for i := 1; i <= 4; i++ {
		d, err := l.Inc(ctx, "user:1", limiter.PerMinute(3), 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("call %d: allowed %v, remaining %d\n", i, d.Allowed, d.Remaining)
	}
	// Output:
	// call 1: allowed true, remaining 2
	// call 2: allowed true, remaining 1
	// call 3: allowed true, remaining 0
	// call 4: allowed false, remaining 0
}
