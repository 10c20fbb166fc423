package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// RunSteady drives key "k" of a Redis provider and of the local provider of
// the same strategy with calls Inc(1)s at rate, step apart on clk, which both
// must read, and fails at the first decision, or the final usage, in which
// they differ. With a step of about half a bucket and enough calls to fill
// the window several times, it is the steady state of a key whose oldest
// bucket dies every other call; the caller checks what that cost Redis.
func RunSteady(t *testing.T, clk *Clock, redis, local limiter.Limiter, rate limiter.Rate, step time.Duration, calls int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < calls; i++ {
		clk.Advance(step)
		dr, err := redis.Inc(ctx, "k", rate, 1)
		if err != nil {
			t.Fatalf("call %d: Inc: %v", i, err)
		}
		dl, err := local.Inc(ctx, "k", rate, 1)
		if err != nil {
			t.Fatalf("call %d: local Inc: %v", i, err)
		}
		if dr != dl {
			t.Fatalf("call %d: Inc = %s from Redis, %s from local", i, Format(dr), Format(dl))
		}
	}
	ur, err := redis.Get(ctx, "k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if ul, _ := local.Get(ctx, "k"); ur != ul {
		t.Fatalf("Get = %+v from Redis, %+v from local", ur, ul)
	}
}
