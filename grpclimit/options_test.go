package grpclimit_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluice-go/sluice/grpclimit"
	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/limiter"
)

// TestOptions: WithAllowKeys and WithSkip exempt calls from the limiter;
// a rate or cost function's status error refuses the call with it, and
// its other errors (a negative cost too) follow the error handler.
func TestOptions(t *testing.T) {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 1}})
	info := &grpc.UnaryServerInfo{FullMethod: "/shop.Cart/Checkout"}
	handled := 0
	handler := func(context.Context, any) (any, error) { handled++; return nil, nil }
	refuse := grpclimit.WithErrorHandler(grpclimit.RefuseOnError)
	rate := limiter.PerMinute(10)
	for _, tc := range []struct {
		name    string
		opts    []grpclimit.Option
		code    codes.Code
		charged int
	}{
		{"allowed key", []grpclimit.Option{grpclimit.WithAllowKeys("ip:192.0.2.7")}, codes.OK, 0},
		{"another key allowed", []grpclimit.Option{grpclimit.WithAllowKeys("ip:192.0.2.8")}, codes.OK, 1},
		{"skip func", []grpclimit.Option{grpclimit.WithSkip(func(_ context.Context, m string) bool { return m == "/shop.Cart/Checkout" })}, codes.OK, 0},
		{"rate func status", []grpclimit.Option{refuse, grpclimit.WithRateFunc(func(context.Context, string) (limiter.Rate, error) {
			return limiter.Rate{}, status.Error(codes.PermissionDenied, "no plan")
		})}, codes.PermissionDenied, 0},
		{"rate func error, refused by policy", []grpclimit.Option{refuse, grpclimit.WithRateFunc(func(context.Context, string) (limiter.Rate, error) {
			return limiter.Rate{}, errors.New("plans db down")
		})}, codes.Unavailable, 0},
		{"rate func error, let through by default", []grpclimit.Option{grpclimit.WithLogger(nil), grpclimit.WithRateFunc(func(context.Context, string) (limiter.Rate, error) {
			return limiter.Rate{}, errors.New("plans db down")
		})}, codes.OK, 0},
		{"a rate func's rate", []grpclimit.Option{grpclimit.WithRateFunc(func(context.Context, string) (limiter.Rate, error) {
			return limiter.PerMinute(1), nil
		})}, codes.OK, 1},
		{"negative cost", []grpclimit.Option{refuse, grpclimit.WithCost(func(context.Context, string) (int64, error) { return -1, nil })}, codes.Unavailable, 0},
		{"cost func status", []grpclimit.Option{grpclimit.WithCost(func(context.Context, string) (int64, error) {
			return 0, status.Error(codes.InvalidArgument, "bad size")
		})}, codes.InvalidArgument, 0},
		{"peek", []grpclimit.Option{grpclimit.WithCost(func(context.Context, string) (int64, error) { return 0, nil })}, codes.OK, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{provider: newLocal(t, conformance.NewClock(), time.Minute)}
			it := mustNew(t, rec, limiter.Limit{Rate: rate}, tc.opts...)
			before := handled
			_, err := it.Unary(ctx, nil, info, handler)
			if status.Code(err) != tc.code {
				t.Fatalf("%v, want %v", err, tc.code)
			}
			if ran := handled - before; (ran == 1) != (tc.code == codes.OK) {
				t.Errorf("the handler ran %d times for %v", ran, err)
			}
			if n := rec.count(); n != tc.charged {
				t.Errorf("%d limiter calls, want %d", n, tc.charged)
			}
		})
	}
}
