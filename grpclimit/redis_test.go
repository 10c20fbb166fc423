package grpclimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/sluice-go/sluice/httplimit"
	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// TestRedisMini: the checks of TestUnaryLocal on redisabs over miniredis,
// both on the fake clock (limiter.WithClock, miniredis driven by it): the
// call past the capacity gets the Redis decision's exact RetryAfter.
func TestRedisMini(t *testing.T) {
	clk := conformance.NewClock()
	mr := miniredis.RunT(t)
	clk.Drive(mr)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	l, err := redisabs.New(client, limiter.WithWindow(10*time.Second), limiter.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	rec := &recorder{provider: l}
	cc := start(t, mustNew(t, rec, limiter.Limit{Name: "calls", Rate: limiter.Every(2, 10*time.Second)}), "192.0.2.7:5000")
	c := testpb.NewTestServiceClient(cc)
	for i, step := range []time.Duration{0, 1500 * time.Millisecond, 700 * time.Millisecond} {
		clk.Advance(step)
		var hdr, trl metadata.MD
		_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl))
		d := rec.last(t)
		if d.Degraded {
			t.Fatalf("call %d: a degraded decision: miniredis did not answer", i)
		}
		pol, rl := httplimit.Fields("calls", 10*time.Second, d)
		checkFields(t, "header", hdr, pol, rl)
		if i < 2 {
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			continue
		}
		checkRefusal(t, "call 2", err, d)
		checkFields(t, "trailer", trl, pol, rl)
		// The first call's bucket expires W + B after it: 10.1 s − 2.2 s.
		if want := 10*time.Second + 100*time.Millisecond - 2200*time.Millisecond; d.RetryAfter != want {
			t.Errorf("RetryAfter %v, want %v", d.RetryAfter, want)
		}
	}
}
