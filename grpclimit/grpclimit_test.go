package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sluice-go/sluice/grpclimit"
	"github.com/sluice-go/sluice/httplimit"
	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
)

// provider is what the tests need of a sluice provider.
type provider interface {
	limiter.Limiter
	limiter.SetLimiter
	interface{ Window() time.Duration }
}

// recorder passes every call to the provider it wraps and keeps each
// decision and key, so a test can compare the response with what the
// limiter said.
type recorder struct {
	provider
	mu    sync.Mutex
	keys  []string
	one   []limiter.Decision
	set   []limiter.SetDecision
	calls int
}

func (r *recorder) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	d, err := r.provider.Inc(ctx, k, rate, n)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.keys = append(r.keys, k)
	if err == nil {
		r.one = append(r.one, d)
	}
	return d, err
}

func (r *recorder) IncSet(ctx context.Context, k string, s *limiter.Set, n int64) (limiter.SetDecision, error) {
	d, err := r.provider.IncSet(ctx, k, s, n)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.keys = append(r.keys, k)
	if err == nil {
		r.set = append(r.set, d)
	}
	return d, err
}

func (r *recorder) last(t *testing.T) limiter.Decision {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.one) == 0 {
		t.Fatal("the limiter decided nothing")
	}
	return r.one[len(r.one)-1]
}

func (r *recorder) lastSet(t *testing.T) limiter.SetDecision {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.set) == 0 {
		t.Fatal("the limiter decided no set")
	}
	return r.set[len(r.set)-1]
}

func (r *recorder) lastKey(t *testing.T) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.keys) == 0 {
		t.Fatal("the limiter was not called")
	}
	return r.keys[len(r.keys)-1]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func newLocal(t *testing.T, clk interface{ Now() time.Time }, window time.Duration) *local.Absolute {
	t.Helper()
	l, err := local.NewAbsolute(limiter.WithWindow(window), limiter.WithClock(clk.Now))
	if err != nil {
		t.Fatalf("local.NewAbsolute: %v", err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

// peerListener is a bufconn listener whose connections report remote as
// their peer's address, so that a test chooses the client's IP.
type peerListener struct {
	*bufconn.Listener
	remote net.Addr
}

type peerConn struct {
	net.Conn
	remote net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.remote }

func (l peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil || l.remote == nil {
		return c, err
	}
	return peerConn{c, l.remote}, nil
}

// testServer implements the interop TestService: UnaryCall answers an
// empty response; StreamingInputCall reads every message and answers with
// their count in AggregatedPayloadSize; FullDuplexCall answers each
// message with one.
type testServer struct {
	testpb.UnimplementedTestServiceServer
}

func (testServer) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{}, nil
}

func (testServer) StreamingInputCall(s grpc.ClientStreamingServer[testpb.StreamingInputCallRequest, testpb.StreamingInputCallResponse]) error {
	n := int32(0)
	for {
		_, err := s.Recv()
		if err == io.EOF {
			return s.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: n})
		}
		if err != nil {
			return err
		}
		n++
	}
}

func (testServer) FullDuplexCall(s grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
	for {
		_, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
}

// start serves the test service and the health service behind it over
// bufconn, with connections from remote ("192.0.2.7:5000"; "" keeps
// bufconn's own address, which is not an IP), and returns a client
// connection.
func start(t *testing.T, it *grpclimit.Interceptor, remote string) *grpc.ClientConn {
	t.Helper()
	l := peerListener{Listener: bufconn.Listen(1 << 20)}
	if remote != "" {
		ap, err := net.ResolveTCPAddr("tcp", remote)
		if err != nil {
			t.Fatal(err)
		}
		l.remote = ap
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(it.Unary), grpc.ChainStreamInterceptor(it.Stream))
	testpb.RegisterTestServiceServer(srv, testServer{})
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func mustNew(t *testing.T, l limiter.Limiter, limit limiter.Limit, opts ...grpclimit.Option) *grpclimit.Interceptor {
	t.Helper()
	it, err := grpclimit.New(l, limit, opts...)
	if err != nil {
		t.Fatalf("grpclimit.New: %v", err)
	}
	return it
}

// retryDelay returns the RetryInfo detail of err's status; ok is false
// when it has none.
func retryDelay(t *testing.T, err error) (d time.Duration, ok bool) {
	t.Helper()
	st, _ := status.FromError(err)
	for _, det := range st.Details() {
		if ri, isRI := det.(*errdetails.RetryInfo); isRI {
			if ok {
				t.Errorf("two RetryInfo details in %v", st.Proto())
			}
			d, ok = ri.GetRetryDelay().AsDuration(), true
		}
	}
	return d, ok
}

// checkRefusal checks that err is the refusal of d: ResourceExhausted, a
// RetryInfo of exactly d.RetryAfter (none when the call can never fit).
func checkRefusal(t *testing.T, call string, err error, d limiter.Decision) {
	t.Helper()
	if code := status.Code(err); code != codes.ResourceExhausted {
		t.Fatalf("%s: %v (code %v), want ResourceExhausted (decision %+v)", call, err, code, d)
	}
	got, ok := retryDelay(t, err)
	switch {
	case d.Never && ok:
		t.Errorf("%s: RetryInfo %v on a call that can never fit", call, got)
	case !d.Never && (!ok || got != d.RetryAfter):
		t.Errorf("%s: RetryInfo %v (present %v), want the decision's RetryAfter %v", call, got, ok, d.RetryAfter)
	}
}

// checkFields checks that md carries the RateLimit fields of a decision:
// exactly one value each, equal to what httplimit writes for it, and
// parsed by an RFC 9651 parser into the items the docs promise.
func checkFields(t *testing.T, what string, md metadata.MD, policy, rl string) {
	t.Helper()
	gotP, gotR := md.Get(grpclimit.MetadataPolicy), md.Get(grpclimit.MetadataRateLimit)
	if len(gotP) != 1 || gotP[0] != policy || len(gotR) != 1 || gotR[0] != rl {
		t.Fatalf("%s: ratelimit-policy %q, ratelimit %q; want [%s] and [%s]", what, gotP, gotR, policy, rl)
	}
	pl, err := httpsfv.UnmarshalList(gotP)
	if err != nil {
		t.Fatalf("%s: ratelimit-policy %q: %v", what, gotP, err)
	}
	rll, err := httpsfv.UnmarshalList(gotR)
	if err != nil {
		t.Fatalf("%s: ratelimit %q: %v", what, gotR, err)
	}
	if len(pl) != len(rll) || len(pl) == 0 {
		t.Fatalf("%s: %d policy items and %d ratelimit items", what, len(pl), len(rll))
	}
	for i := range pl {
		p, r := pl[i].(httpsfv.Item), rll[i].(httpsfv.Item)
		if p.Value != r.Value {
			t.Errorf("%s: item %d: policy %v, ratelimit %v", what, i, p.Value, r.Value)
		}
		for _, param := range []struct {
			it   httpsfv.Item
			name string
		}{{p, "q"}, {r, "r"}, {r, "t"}} {
			if v, ok := param.it.Params.Get(param.name); !ok {
				t.Errorf("%s: item %d has no %s", what, i, param.name)
			} else if _, isInt := v.(int64); !isInt {
				t.Errorf("%s: item %d: %s = %v (%T), want an Integer", what, i, param.name, v, v)
			}
		}
	}
}

// TestUnaryLocal: 3 per 10 s on the local provider with a fake clock, one
// client: the fourth call inside the window fails with ResourceExhausted
// and a RetryInfo equal to the limiter's RetryAfter; every call carries
// the fields httplimit writes for its decision, a refusal in its trailer
// too; waiting the RetryInfo admits again.
func TestUnaryLocal(t *testing.T) {
	clk := conformance.NewClock()
	rec := &recorder{provider: newLocal(t, clk, 10*time.Second)}
	cc := start(t, mustNew(t, rec, limiter.Limit{Rate: limiter.Every(3, 10*time.Second)}), "192.0.2.7:5000")
	c := testpb.NewTestServiceClient(cc)
	ctx := context.Background()
	for i, step := range []time.Duration{0, 200 * time.Millisecond, 0, 300 * time.Millisecond, 0} {
		clk.Advance(step)
		var hdr, trl metadata.MD
		_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl))
		d := rec.last(t)
		if got := rec.lastKey(t); got != "ip:192.0.2.7" {
			t.Errorf("call %d: key %q, want ip:192.0.2.7", i, got)
		}
		pol, rl := httplimit.Fields("", 10*time.Second, d)
		checkFields(t, "header", hdr, pol, rl)
		if i < 3 {
			if err != nil || !d.Allowed {
				t.Fatalf("call %d: %v (decision %+v), want admitted", i, err, d)
			}
			if len(trl.Get(grpclimit.MetadataRateLimit)) != 0 {
				t.Errorf("call %d: admitted, ratelimit in the trailer %v", i, trl)
			}
			continue
		}
		checkRefusal(t, "call", err, d)
		checkFields(t, "trailer", trl, pol, rl)
	}
	d := rec.last(t)
	clk.Advance(d.RetryAfter - time.Millisecond)
	if _, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("1 ms before the RetryInfo's delay: %v, want ResourceExhausted", err)
	}
	clk.Advance(time.Millisecond)
	if _, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Errorf("after the RetryInfo's delay: %v, want admitted", err)
	}
}

// TestStreamChargedOnce: a client stream of five messages costs one unit,
// its open; the third stream within the window of 2 is refused with the
// RetryInfo and fields of its decision, in the header and the trailer.
func TestStreamChargedOnce(t *testing.T) {
	clk := conformance.NewClock()
	l := newLocal(t, clk, time.Minute)
	rec := &recorder{provider: l}
	cc := start(t, mustNew(t, rec, limiter.Limit{Name: "streams", Rate: limiter.PerMinute(2)}), "[2001:db8:1:2::7]:5000")
	c := testpb.NewTestServiceClient(cc)
	ctx := context.Background()
	for i := range 3 {
		s, err := c.StreamingInputCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if err := s.Send(&testpb.StreamingInputCallRequest{}); err != nil && err != io.EOF {
				t.Fatalf("stream %d: Send: %v", i, err)
			}
		}
		resp, err := s.CloseAndRecv()
		hdr, _ := s.Header()
		d := rec.last(t)
		pol, rl := httplimit.Fields("streams", time.Minute, d)
		checkFields(t, "header", hdr, pol, rl)
		if i < 2 {
			if err != nil || resp.GetAggregatedPayloadSize() != 5 {
				t.Fatalf("stream %d: %v, %v; want 5 messages received", i, resp, err)
			}
			continue
		}
		checkRefusal(t, "stream 2", err, d)
		checkFields(t, "trailer", s.Trailer(), pol, rl)
	}
	if rec.count() != 3 {
		t.Errorf("%d limiter calls for 3 streams of 5 messages, want 3", rec.count())
	}
	if got := rec.lastKey(t); got != "ip:2001:db8:1:2::/64" {
		t.Errorf("key %q, want the peer's /64", got)
	}
}

// TestMessageCharge: with WithMessageCharge a bidirectional stream pays
// its open and each message; the message past the capacity gets the
// refusal from Recv, with its RetryInfo and the fields in the trailer.
func TestMessageCharge(t *testing.T) {
	clk := conformance.NewClock()
	rec := &recorder{provider: newLocal(t, clk, time.Minute)}
	cc := start(t, mustNew(t, rec, limiter.Limit{Rate: limiter.PerMinute(4)}, grpclimit.WithMessageCharge()), "192.0.2.7:5000")
	s, err := testpb.NewTestServiceClient(cc).FullDuplexCall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The open is 1 unit: three messages fit, the fourth does not.
	for i := range 4 {
		clk.Advance(100 * time.Millisecond)
		if err := s.Send(&testpb.StreamingOutputCallRequest{}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		_, err := s.Recv()
		if i < 3 {
			if err != nil {
				t.Fatalf("message %d: %v, want an answer", i, err)
			}
			continue
		}
		d := rec.last(t)
		checkRefusal(t, "message 3", err, d)
		pol, rl := httplimit.Fields("", time.Minute, d)
		checkFields(t, "trailer", s.Trailer(), pol, rl)
	}
	if rec.count() != 5 {
		t.Errorf("%d limiter calls, want 5 (the open and four messages)", rec.count())
	}
}

// TestForwardedFor: x-forwarded-for is ignored from an untrusted peer
// (the client cannot pick its key) and honored from a trusted proxy.
func TestForwardedFor(t *testing.T) {
	ipk, err := httplimit.NewIPKey(httplimit.TrustProxies(httplimit.HeaderXForwardedFor, "10.0.0.0/8"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, peer, xff, want string
	}{
		{"untrusted peer spoofs", "203.0.113.9:5000", "1.2.3.4", "ip:203.0.113.9"},
		{"untrusted peer spoofs a trusted-looking chain", "203.0.113.9:5000", "1.2.3.4, 10.0.0.2", "ip:203.0.113.9"},
		{"trusted proxy", "10.0.0.1:443", "198.51.100.4", "ip:198.51.100.4"},
		{"trusted proxy, client forged an entry", "10.0.0.1:443", "1.2.3.4, 198.51.100.4", "ip:198.51.100.4"},
		{"trusted proxy, NAT64 client", "10.0.0.1:443", "64:ff9b::198.51.100.4", "ip:198.51.100.4"},
		{"trusted proxy, no metadata", "10.0.0.1:443", "", "ip:10.0.0.1"},
		{"IPv4-mapped peer", "[::ffff:203.0.113.9]:5000", "1.2.3.4", "ip:203.0.113.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{provider: newLocal(t, conformance.NewClock(), time.Minute)}
			it := mustNew(t, rec, limiter.Limit{Rate: limiter.PerMinute(10)}, grpclimit.WithKey(grpclimit.KeyByIPKey(ipk)))
			c := testpb.NewTestServiceClient(start(t, it, tc.peer))
			ctx := context.Background()
			if tc.xff != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "x-forwarded-for", tc.xff)
			}
			if _, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
				t.Fatal(err)
			}
			if got := rec.lastKey(t); got != tc.want {
				t.Errorf("peer %s, x-forwarded-for %q: key %q, want %q", tc.peer, tc.xff, got, tc.want)
			}
		})
	}
}

// TestExemptMethods: the health service and reflection (v1 and v1alpha)
// are never charged by default, however often they are called;
// WithSkipMethods() charges them, and a pattern of one's own exempts its
// methods only.
func TestExemptMethods(t *testing.T) {
	clk := conformance.NewClock()
	rec := &recorder{provider: newLocal(t, clk, time.Minute)}
	it := mustNew(t, rec, limiter.Limit{Rate: limiter.PerMinute(1)})
	cc := start(t, it, "192.0.2.7:5000")
	h := healthpb.NewHealthClient(cc)
	for i := range 5 {
		var hdr metadata.MD
		if _, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&hdr)); err != nil {
			t.Fatalf("health check %d: %v", i, err)
		}
		if len(hdr.Get(grpclimit.MetadataRateLimit)) != 0 {
			t.Errorf("health check %d carries ratelimit %v", i, hdr)
		}
	}
	// Reflection, through the interceptor as grpc.Server calls it.
	ok := func(context.Context, any) (any, error) { return nil, nil }
	okStream := func(any, grpc.ServerStream) error { return nil }
	for _, m := range []string{
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
		"/grpc.health.v1.Health/Watch",
	} {
		for range 3 {
			if _, err := it.Unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: m}, ok); err != nil {
				t.Errorf("%s (unary): %v", m, err)
			}
			if err := it.Stream(nil, fakeStream{}, &grpc.StreamServerInfo{FullMethod: m}, okStream); err != nil {
				t.Errorf("%s (stream): %v", m, err)
			}
		}
	}
	if n := rec.count(); n != 0 {
		t.Fatalf("%d limiter calls for exempt methods, want 0", n)
	}
	// The limited methods still are: 1 per minute.
	c := testpb.NewTestServiceClient(cc)
	if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second UnaryCall: %v, want ResourceExhausted", err)
	}

	// WithSkipMethods() limits the health service too; a pattern of one's
	// own exempts what it names and nothing else.
	for _, tc := range []struct {
		patterns []string
		want     int // limiter calls for a health check and a UnaryCall
	}{
		{nil, 2},
		{[]string{"/grpc.testing.TestService/*"}, 1},
		{[]string{"/grpc.testing.TestService/UnaryCall", "/grpc.health.v1.Health/Check"}, 0},
	} {
		rec := &recorder{provider: newLocal(t, clk, time.Minute)}
		it := mustNew(t, rec, limiter.Limit{Rate: limiter.PerMinute(10)}, grpclimit.WithSkipMethods(tc.patterns...))
		cc := start(t, it, "192.0.2.7:5000")
		if _, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
		if _, err := testpb.NewTestServiceClient(cc).UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
		if n := rec.count(); n != tc.want {
			t.Errorf("WithSkipMethods(%q): %d limiter calls, want %d", tc.patterns, n, tc.want)
		}
	}
}

// fakeStream is a grpc.ServerStream for calling Stream directly.
type fakeStream struct{ grpc.ServerStream }

func (fakeStream) Context() context.Context     { return context.Background() }
func (fakeStream) SetHeader(metadata.MD) error  { return nil }
func (fakeStream) SetTrailer(metadata.MD)       {}
func (fakeStream) SendHeader(metadata.MD) error { return nil }
func (fakeStream) RecvMsg(any) error            { return io.EOF }
func (fakeStream) SendMsg(any) error            { return nil }

// failing wraps a real provider and fails every decision with err, as a
// Redis provider under limiter.FailError does while Redis is down.
type failing struct {
	provider
	err error
}

func (f failing) Inc(context.Context, string, limiter.Rate, int64) (limiter.Decision, error) {
	return limiter.Decision{}, f.err
}

func (f failing) IncSet(context.Context, string, *limiter.Set, int64) (limiter.SetDecision, error) {
	return limiter.SetDecision{}, f.err
}

// slogTo returns a logger writing text lines to w.
func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// logBuffer collects slog lines.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, string(p))
	return len(p), nil
}

// TestLimiterError: by default a call the limiter cannot decide goes
// through without metadata, unary and stream, and the first error is
// logged once (not once per call); RefuseOnError fails such calls with
// Unavailable; an ErrorFunc of one's own sees the limiter's error.
func TestLimiterError(t *testing.T) {
	down := failing{provider: newLocal(t, conformance.NewClock(), time.Minute), err: limiter.ErrUnavailable}
	var logs logBuffer
	it := mustNew(t, down, limiter.Limit{Rate: limiter.PerMinute(1)}, grpclimit.WithLogger(slogTo(&logs)))
	c := testpb.NewTestServiceClient(start(t, it, "192.0.2.7:5000"))
	for i := range 3 {
		var hdr metadata.MD
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}, grpc.Header(&hdr)); err != nil {
			t.Fatalf("call %d: %v, want let through", i, err)
		}
		if len(hdr.Get(grpclimit.MetadataRateLimit)) != 0 {
			t.Errorf("call %d: ratelimit %v on an undecided call", i, hdr)
		}
		s, err := c.StreamingInputCall(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CloseAndRecv(); err != nil {
			t.Fatalf("stream %d: %v, want let through", i, err)
		}
	}
	if len(logs.lines) != 1 || !strings.Contains(logs.lines[0], limiter.ErrUnavailable.Error()) || !strings.Contains(logs.lines[0], "UnaryCall") {
		t.Errorf("log lines %q, want one naming the error and the method", logs.lines)
	}

	it = mustNew(t, down, limiter.Limit{Rate: limiter.PerMinute(1)}, grpclimit.WithErrorHandler(grpclimit.RefuseOnError))
	c = testpb.NewTestServiceClient(start(t, it, "192.0.2.7:5000"))
	if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("RefuseOnError: %v, want Unavailable", err)
	} else if strings.Contains(err.Error(), limiter.ErrUnavailable.Error()) {
		t.Errorf("RefuseOnError shows the limiter's error: %v", err)
	}

	var seen error
	var mu sync.Mutex
	it = mustNew(t, down, limiter.Limit{Rate: limiter.PerMinute(1)}, grpclimit.WithErrorHandler(func(_ context.Context, m string, err error) error {
		mu.Lock()
		defer mu.Unlock()
		seen = err
		return status.Error(codes.Aborted, m)
	}))
	c = testpb.NewTestServiceClient(start(t, it, "192.0.2.7:5000"))
	if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); status.Code(err) != codes.Aborted || status.Convert(err).Message() != "/grpc.testing.TestService/UnaryCall" {
		t.Errorf("own ErrorFunc: %v, want its Aborted naming the method", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(seen, limiter.ErrUnavailable) {
		t.Errorf("the ErrorFunc saw %v, want the limiter's error", seen)
	}
}

// TestKeyRefusals: a call that cannot be keyed is refused, whatever the
// error policy, with the key function's code, and never reaches the
// limiter.
func TestKeyRefusals(t *testing.T) {
	type ctxKey struct{}
	for _, tc := range []struct {
		name   string
		key    grpclimit.KeyFunc
		remote string
		code   codes.Code
	}{
		{"no IP peer", grpclimit.KeyByIP, "", codes.Internal},
		{"no API key", grpclimit.KeyByMetadata("X-API-Key"), "192.0.2.7:1", codes.InvalidArgument},
		{"no user", grpclimit.KeyFromContext("user", ctxKey{}), "192.0.2.7:1", codes.Unauthenticated},
		{"a key too long", func(context.Context, string) (string, error) { return strings.Repeat("k", 513), nil }, "192.0.2.7:1", codes.InvalidArgument},
		{"an empty key", func(context.Context, string) (string, error) { return "", nil }, "192.0.2.7:1", codes.Internal},
		{"a plain error", func(context.Context, string) (string, error) { return "", errors.New("db down: 10.1.2.3") }, "192.0.2.7:1", codes.Internal},
		{"a status of its own", func(context.Context, string) (string, error) { return "", status.Error(codes.PermissionDenied, "no") }, "192.0.2.7:1", codes.PermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{provider: newLocal(t, conformance.NewClock(), time.Minute)}
			it := mustNew(t, rec, limiter.Limit{Rate: limiter.PerMinute(10)}, grpclimit.WithKey(tc.key))
			_, err := testpb.NewTestServiceClient(start(t, it, tc.remote)).UnaryCall(context.Background(), &testpb.SimpleRequest{})
			if status.Code(err) != tc.code {
				t.Errorf("%v, want %v", err, tc.code)
			}
			if strings.Contains(err.Error(), "10.1.2.3") {
				t.Errorf("%v shows the key function's error text", err)
			}
			if n := rec.count(); n != 0 {
				t.Errorf("%d limiter calls, want 0", n)
			}
		})
	}
}

// TestKeys: the metadata and identity keys, and PerMethod's separate
// counts.
func TestKeys(t *testing.T) {
	type ctxKey struct{}
	rec := &recorder{provider: newLocal(t, conformance.NewClock(), time.Minute)}
	auth := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if u := md.Get("user"); len(u) == 1 {
			ctx = context.WithValue(ctx, ctxKey{}, u[0])
		}
		return h(ctx, req)
	}
	for _, tc := range []struct {
		key  grpclimit.KeyFunc
		md   []string
		want string
	}{
		{grpclimit.KeyByMetadata("X-API-Key"), []string{"x-api-key", " k-123 "}, "x-api-key:k-123"},
		{grpclimit.KeyFromContext("user", ctxKey{}), []string{"user", "alice"}, "user:alice"},
		{grpclimit.PerMethod(grpclimit.KeyByIP), nil, "/grpc.testing.TestService/UnaryCall|ip:192.0.2.7"},
	} {
		it := mustNew(t, rec, limiter.Limit{Rate: limiter.PerMinute(10)}, grpclimit.WithKey(tc.key))
		l := peerListener{Listener: bufconn.Listen(1 << 16), remote: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 1}}
		srv := grpc.NewServer(grpc.ChainUnaryInterceptor(auth, it.Unary))
		testpb.RegisterTestServiceServer(srv, testServer{})
		go srv.Serve(l)
		cc, err := grpc.NewClient("passthrough:///bufnet",
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		ctx := metadata.AppendToOutgoingContext(context.Background(), tc.md...)
		if _, err := testpb.NewTestServiceClient(cc).UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
			t.Errorf("%v", err)
		} else if got := rec.lastKey(t); got != tc.want {
			t.Errorf("key %q, want %q", got, tc.want)
		}
		cc.Close()
		srv.Stop()
	}
}

// TestNeverFits: a call whose cost is above the capacity is refused with
// ResourceExhausted and no RetryInfo: no wait admits it.
func TestNeverFits(t *testing.T) {
	rec := &recorder{provider: newLocal(t, conformance.NewClock(), time.Minute)}
	it := mustNew(t, rec, limiter.Limit{Rate: limiter.PerMinute(3)},
		grpclimit.WithCost(func(context.Context, string) (int64, error) { return 4, nil }))
	_, err := testpb.NewTestServiceClient(start(t, it, "192.0.2.7:1")).UnaryCall(context.Background(), &testpb.SimpleRequest{})
	d := rec.last(t)
	if !d.Never {
		t.Fatalf("decision %+v, want Never", d)
	}
	checkRefusal(t, "cost 4 of 3", err, d)
}

// TestSetTiers: NewSet with the tenant's tier chosen per call from
// metadata, keyed by tenant: each tier's set is enforced, the fields have
// one item per limit, and the refusal's RetryInfo is the set's RetryAfter.
func TestSetTiers(t *testing.T) {
	clk := conformance.NewClock()
	rec := &recorder{provider: newLocal(t, clk, time.Minute)}
	free := mustSet(t,
		limiter.Limit{Name: "per-second", Rate: limiter.PerSecond(2), Window: time.Second},
		limiter.Limit{Name: "per-minute", Rate: limiter.PerMinute(3), Window: time.Minute})
	pro := mustSet(t,
		limiter.Limit{Name: "per-second", Rate: limiter.PerSecond(20), Window: time.Second},
		limiter.Limit{Name: "per-minute", Rate: limiter.PerMinute(300), Window: time.Minute})
	tiers := map[string]*limiter.Set{"acme": pro, "bob": free}
	tierOf := func(ctx context.Context, _ string) (*limiter.Set, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if s, ok := tiers[strings.Join(md.Get("tenant"), "")]; ok {
			return s, nil
		}
		return nil, status.Error(codes.PermissionDenied, "unknown tenant")
	}
	it, err := grpclimit.NewSet(rec, nil, grpclimit.WithSetFunc(tierOf), grpclimit.WithKey(grpclimit.KeyByMetadata("tenant")))
	if err != nil {
		t.Fatal(err)
	}
	c := testpb.NewTestServiceClient(start(t, it, "192.0.2.7:1"))
	call := func(tenant string) (metadata.MD, metadata.MD, error) {
		var hdr, trl metadata.MD
		ctx := metadata.AppendToOutgoingContext(context.Background(), "tenant", tenant)
		_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl))
		return hdr, trl, err
	}
	var codesSeen []codes.Code
	for i, step := range []time.Duration{0, 0, 0, 1100 * time.Millisecond, 0} {
		clk.Advance(step)
		hdr, trl, err := call("bob")
		codesSeen = append(codesSeen, status.Code(err))
		d := rec.lastSet(t)
		pol, rl := httplimit.SetFields(free, d)
		checkFields(t, "header", hdr, pol, rl)
		if !d.Allowed {
			checkRefusal(t, "bob", err, d.Decision)
			checkFields(t, "trailer", trl, pol, rl)
		} else if err != nil {
			t.Fatalf("call %d: %v on an admitted decision", i, err)
		}
	}
	// Two per second, then the per-minute limit of 3.
	want := []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted, codes.OK, codes.ResourceExhausted}
	for i := range want {
		if codesSeen[i] != want[i] {
			t.Fatalf("free tier codes %v, want %v", codesSeen, want)
		}
	}
	for range 10 {
		if _, _, err := call("acme"); err != nil {
			t.Fatalf("pro tier: %v", err)
		}
	}
	if _, _, err := call("mallory"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("unknown tenant: %v, want the set func's PermissionDenied", err)
	}
}

func mustSet(t *testing.T, limits ...limiter.Limit) *limiter.Set {
	t.Helper()
	s, err := limiter.NewSet(limits...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestNewErrors: configuration mistakes are ErrInvalidConfig at New.
func TestNewErrors(t *testing.T) {
	l := newLocal(t, conformance.NewClock(), time.Minute)
	rate := limiter.PerMinute(10)
	for name, f := range map[string]func() error{
		"nil limiter":    func() error { _, err := grpclimit.New(nil, limiter.Limit{Rate: rate}); return err },
		"another window": func() error { _, err := grpclimit.New(l, limiter.Limit{Rate: rate, Window: time.Second}); return err },
		"bad name":       func() error { _, err := grpclimit.New(l, limiter.Limit{Name: "Bad Name", Rate: rate}); return err },
		"set func on New": func() error {
			_, err := grpclimit.New(l, limiter.Limit{Rate: rate}, grpclimit.WithSetFunc(func(context.Context, string) (*limiter.Set, error) { return nil, nil }))
			return err
		},
		"rate func on NewSet": func() error {
			_, err := grpclimit.NewSet(l, nil, grpclimit.WithRateFunc(func(context.Context, string) (limiter.Rate, error) { return rate, nil }))
			return err
		},
		"nil set":    func() error { _, err := grpclimit.NewSet(l, nil); return err },
		"nil option": func() error { _, err := grpclimit.New(l, limiter.Limit{Rate: rate}, nil); return err },
		"skip every method": func() error {
			_, err := grpclimit.New(l, limiter.Limit{Rate: rate}, grpclimit.WithSkipMethods("*"))
			return err
		},
	} {
		if err := f(); !errors.Is(err, limiter.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	var zero grpclimit.Interceptor
	_, err := zero.Unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/a.B/C"}, func(context.Context, any) (any, error) { return nil, nil })
	if status.Code(err) != codes.Internal {
		t.Errorf("zero Interceptor: %v, want Internal", err)
	}
}
