package redisabs_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// testClock is a clock a test moves by hand; limiter.WithClock takes its Now.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Testing code that uses a Redis limiter: miniredis and the limiter share
// one clock, and the test moves both. WithClock makes the limiter send its
// clock's time to the script (in place of Redis's TIME) and date its own
// memory of refusals by it; miniredis' FastForward expires the keys' TTLs.
// Moving only miniredis' clock (SetTime) would leave the limiter's memory
// of the refusal on the wall clock: refused for up to a second more.
func Example_testingWithMiniredis() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	clk := &testClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	mr.SetTime(clk.Now())
	advance := func(d time.Duration) {
		clk.Advance(d)
		mr.SetTime(clk.Now())
		mr.FastForward(d)
	}
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer client.Close()
	l, err := redisabs.New(client, limiter.WithWindow(time.Minute), limiter.WithClock(clk.Now))
	if err != nil {
		panic(err)
	}
	defer l.Close(context.Background())

	ctx := context.Background()
	rate := limiter.PerMinute(2)
	var d limiter.Decision
	for i := 0; i < 3; i++ {
		d, _ = l.Inc(ctx, "user:42", rate, 1)
		fmt.Println("allowed:", d.Allowed, "retry after:", d.RetryAfter)
	}
	advance(d.RetryAfter - time.Millisecond)
	d, _ = l.Inc(ctx, "user:42", rate, 1)
	fmt.Println("1 ms early, allowed:", d.Allowed, "retry after:", d.RetryAfter)
	advance(time.Millisecond)
	d, _ = l.Inc(ctx, "user:42", rate, 1)
	fmt.Println("at RetryAfter, allowed:", d.Allowed)
	// Output:
	// allowed: true retry after: 0s
	// allowed: true retry after: 0s
	// allowed: false retry after: 1m0.6s
	// 1 ms early, allowed: false retry after: 1ms
	// at RetryAfter, allowed: true
}
