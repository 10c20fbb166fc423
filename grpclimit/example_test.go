package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sluice-go/sluice/grpclimit"
	"github.com/sluice-go/sluice/httplimit"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// stoppedClock reads one instant, so that the examples' output is
// reproducible.
type stoppedClock struct{}

func (stoppedClock) Now() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) }

// serveExample serves the interop test service behind it over an
// in-memory listener whose clients all come from 10.0.0.1, the address a
// proxy in front of the server would have, and returns a client.
func serveExample(it *grpclimit.Interceptor) (testpb.TestServiceClient, func()) {
	l := peerListener{Listener: bufconn.Listen(1 << 16), remote: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 443}}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(it.Unary), grpc.ChainStreamInterceptor(it.Stream))
	testpb.RegisterTestServiceServer(srv, testServer{})
	go srv.Serve(l)
	cc, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	return testpb.NewTestServiceClient(cc), func() { cc.Close(); srv.Stop() }
}

// printCall prints a call's outcome: its code, the RetryInfo of a
// refusal and the ratelimit metadata.
func printCall(err error, hdr metadata.MD) {
	st := status.Convert(err)
	fmt.Print(st.Code())
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			fmt.Printf(" retry in %v", ri.GetRetryDelay().AsDuration())
		}
	}
	fmt.Printf(" ratelimit=%q\n", hdr.Get(grpclimit.MetadataRateLimit))
}

// Per client: 2 calls a minute per client address, the server behind a
// trusted proxy at 10.0.0.1 that appends the client's address to
// x-forwarded-for. The third call of 198.51.100.4 is refused with the
// exact wait; another client has its own count.
func Example() {
	l, err := local.NewAbsolute(limiter.WithWindow(time.Minute), limiter.WithClock(stoppedClock{}.Now))
	if err != nil {
		panic(err)
	}
	defer l.Close(context.Background())

	proxies, err := httplimit.NewIPKey(httplimit.TrustProxies(httplimit.HeaderXForwardedFor, "10.0.0.0/8"))
	if err != nil {
		panic(err)
	}
	lim, err := grpclimit.New(l, limiter.Limit{Rate: limiter.PerMinute(2)},
		grpclimit.WithKey(grpclimit.KeyByIPKey(proxies)))
	if err != nil {
		panic(err)
	}
	client, stop := serveExample(lim)
	defer stop()

	for _, addr := range []string{"198.51.100.4", "198.51.100.4", "198.51.100.4", "203.0.113.9"} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", addr)
		var hdr metadata.MD
		_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{}, grpc.Header(&hdr))
		fmt.Print(addr, ": ")
		printCall(err, hdr)
	}
	// Output:
	// 198.51.100.4: OK ratelimit=["\"default\";r=1;t=61"]
	// 198.51.100.4: OK ratelimit=["\"default\";r=0;t=61"]
	// 198.51.100.4: ResourceExhausted retry in 1m0.6s ratelimit=["\"default\";r=0;t=61"]
	// 203.0.113.9: OK ratelimit=["\"default\";r=1;t=61"]
}

// Per tenant, with tiers: each tenant's calls are counted against its
// tier's set of limits (a burst limit per second and a quota per hour),
// on Redis (here an in-memory miniredis with a frozen clock). The tenant
// comes from metadata that an authentication interceptor has checked.
func Example_tenants() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(stoppedClock{}.Now())
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb.Close()
	l, err := redisabs.New(rdb)
	if err != nil {
		panic(err)
	}
	defer l.Close(context.Background())

	tier := func(perSecond, perHour float64) *limiter.Set {
		s, err := limiter.NewSet(
			limiter.Limit{Name: "burst", Rate: limiter.PerSecond(perSecond), Window: time.Second},
			limiter.Limit{Name: "hourly", Rate: limiter.PerHour(perHour), Window: time.Hour})
		if err != nil {
			panic(err)
		}
		return s
	}
	free, pro := tier(1, 100), tier(50, 100_000)
	tenants := map[string]*limiter.Set{"tenant:acme": pro, "tenant:bob": free}

	byTenant := grpclimit.KeyByMetadata("tenant")
	lim, err := grpclimit.NewSet(l, nil,
		grpclimit.WithKey(byTenant),
		grpclimit.WithSetFunc(func(ctx context.Context, method string) (*limiter.Set, error) {
			k, err := byTenant(ctx, method)
			if err != nil {
				return nil, err
			}
			if s, ok := tenants[k]; ok {
				return s, nil
			}
			return nil, status.Error(codes.PermissionDenied, "unknown tenant")
		}))
	if err != nil {
		panic(err)
	}
	client, stop := serveExample(lim)
	defer stop()

	for _, tenant := range []string{"bob", "bob", "acme", "acme"} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "tenant", tenant)
		var hdr metadata.MD
		_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{}, grpc.Header(&hdr))
		fmt.Print(tenant, ": ")
		printCall(err, hdr)
	}
	// Output:
	// bob: OK ratelimit=["\"burst\";r=0;t=2, \"hourly\";r=99;t=3636"]
	// bob: ResourceExhausted retry in 1.01s ratelimit=["\"burst\";r=0;t=2, \"hourly\";r=99;t=3636"]
	// acme: OK ratelimit=["\"burst\";r=49;t=2, \"hourly\";r=99999;t=3636"]
	// acme: OK ratelimit=["\"burst\";r=48;t=2, \"hourly\";r=99998;t=3636"]
}
