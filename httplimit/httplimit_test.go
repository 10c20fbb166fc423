package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice/httplimit"
	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// decisionLog keeps the decisions a limiter returned, safely for the
// concurrent handlers of a test server. D is limiter.Decision or
// limiter.SetDecision.
type decisionLog[D any] struct {
	mu   sync.Mutex
	decs []D
}

// keep records d when err is nil, and passes both on.
func (l *decisionLog[D]) keep(d D, err error) (D, error) {
	if err == nil {
		l.mu.Lock()
		l.decs = append(l.decs, d)
		l.mu.Unlock()
	}
	return d, err
}

func (l *decisionLog[D]) last(t *testing.T) D {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.decs) == 0 {
		t.Fatal("the limiter was not called")
	}
	return l.decs[len(l.decs)-1]
}

func (l *decisionLog[D]) calls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.decs)
}

// recorder passes every call to the limiter it wraps and keeps each
// Inc's decision, so a test can compare the response with what the
// limiter said.
type recorder struct {
	limiter.Limiter
	decisionLog[limiter.Decision]
}

func (r *recorder) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	return r.keep(r.Limiter.Inc(ctx, k, rate, n))
}

func newLocal(t *testing.T, clk interface{ Now() time.Time }, window time.Duration) limiter.Limiter {
	t.Helper()
	opts := []limiter.Option{limiter.WithWindow(window)}
	if clk != nil {
		opts = append(opts, limiter.WithClock(clk.Now))
	}
	l, err := local.NewAbsolute(opts...)
	if err != nil {
		t.Fatalf("local.NewAbsolute: %v", err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

func mustNew(t *testing.T, l limiter.Limiter, lim limiter.Limit, opts ...httplimit.Option) *httplimit.Middleware {
	t.Helper()
	m, err := httplimit.New(l, lim, opts...)
	if err != nil {
		t.Fatalf("httplimit.New: %v", err)
	}
	return m
}

// server serves h behind m on a real loopback listener and counts the
// connections the client opens.
type server struct {
	*httptest.Server
	conns atomic.Int64
}

func serve(t *testing.T, m *httplimit.Middleware) *server {
	t.Helper()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	return serveHandler(t, m.Handler(ok))
}

func serveHandler(t *testing.T, h http.Handler) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

type response struct {
	status int
	header http.Header
	body   string
}

// get sends one request on the server's client (keep-alive) and reads the
// whole body, so the connection is reused.
func (s *server) get(t *testing.T, path string, hdr ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", path, err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

func ceilSec(d time.Duration) int64 { return int64(math.Ceil(d.Seconds())) }

// wantT is the t parameter the docs promise for a decision.
func wantT(d limiter.Decision) int64 {
	if d.RetryAfter > 0 {
		return ceilSec(d.RetryAfter)
	}
	return ceilSec(d.ResetAfter)
}

// checkStatus checks a response's status against the decision: 200 when
// admitted, 413 when the request can never fit, else 429.
func checkStatus(t *testing.T, i int, resp response, d limiter.Decision) {
	t.Helper()
	want := http.StatusOK
	if !d.Allowed {
		want = http.StatusTooManyRequests
	}
	if d.Never {
		want = http.StatusRequestEntityTooLarge
	}
	if resp.status != want {
		t.Fatalf("request %d: status %d, want %d (decision %+v)", i, resp.status, want, d)
	}
}

// checkRetryAfter checks Retry-After: none when waiting cannot change the
// answer (admitted, or never fits), else ceil(RetryAfter) in seconds.
func checkRetryAfter(t *testing.T, i int, resp response, d limiter.Decision) {
	t.Helper()
	ra := resp.header.Values("Retry-After")
	switch {
	case d.Allowed || d.Never:
		if len(ra) != 0 {
			t.Errorf("request %d: Retry-After %q on a decision that waiting cannot change (%+v)", i, ra, d)
		}
	case len(ra) != 1 || ra[0] != strconv.FormatInt(ceilSec(d.RetryAfter), 10):
		t.Errorf("request %d: Retry-After %q, want ceil(%v) = %d", i, ra, d.RetryAfter, ceilSec(d.RetryAfter))
	}
}

// checkResponse compares a response with the decision the limiter made
// for it: 429 exactly when refused (413 when the request can never fit),
// Retry-After = ceil(RetryAfter), the RateLimit headers as the decision
// says.
func checkResponse(t *testing.T, i int, resp response, d limiter.Decision, name string, q int64, w int64) {
	t.Helper()
	checkStatus(t, i, resp, d)
	wantPolicy := fmt.Sprintf(`%q;q=%d;w=%d`, name, q, w)
	if got := resp.header.Values("RateLimit-Policy"); len(got) != 1 || got[0] != wantPolicy {
		t.Errorf("request %d: RateLimit-Policy %q, want [%s]", i, got, wantPolicy)
	}
	wantRL := fmt.Sprintf(`%q;r=%d;t=%d`, name, d.Remaining, wantT(d))
	if got := resp.header.Values("RateLimit"); len(got) != 1 || got[0] != wantRL {
		t.Errorf("request %d: RateLimit %q, want [%s]", i, got, wantRL)
	}
	checkRetryAfter(t, i, resp, d)
	for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if v := resp.header.Values(h); len(v) != 0 {
			t.Errorf("request %d: %s = %q without WithLegacyHeaders", i, h, v)
		}
	}
}

// TestLocalOverHTTP: a fake clock, 5 per 10 s, one client on one
// keep-alive connection: 429 exactly when the limiter refuses, Retry-After
// the refusal's RetryAfter rounded up, RateLimit headers from the
// decision, admitted again once Retry-After has passed.
func TestLocalOverHTTP(t *testing.T) {
	clk := conformance.NewClock()
	rec := &recorder{Limiter: newLocal(t, clk, 10*time.Second)}
	s := serve(t, mustNew(t, rec, limiter.Limit{Rate: limiter.Every(5, 10*time.Second), Window: 10 * time.Second}))

	var refused, admitted int
	steps := []time.Duration{0, 0, 300 * time.Millisecond, 0, 1700 * time.Millisecond, 0, 0, 0, 2500 * time.Millisecond, 0}
	for i, step := range steps {
		clk.Advance(step)
		resp := s.get(t, "/")
		d := rec.last(t)
		checkResponse(t, i, resp, d, "default", 5, 10)
		if d.Allowed {
			admitted++
			if resp.body != "ok\n" {
				t.Errorf("request %d: body %q from an admitted request, want the handler's", i, resp.body)
			}
		} else {
			refused++
			if resp.body != "Too Many Requests\n" {
				t.Errorf("request %d: body %q, want the default 429 text", i, resp.body)
			}
			if ct := resp.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("request %d: Content-Type %q, want text/plain", i, ct)
			}
		}
	}
	if admitted != 5 || refused != 5 {
		t.Errorf("admitted %d, refused %d, want 5 and 5 in the first window", admitted, refused)
	}

	// Waiting the advertised Retry-After admits the next request; one
	// second less does not (Retry-After is rounded up, never down).
	resp := s.get(t, "/")
	d := rec.last(t)
	if resp.status != http.StatusTooManyRequests || d.RetryAfter <= time.Second {
		t.Fatalf("want a refusal with RetryAfter > 1s, got %d %+v", resp.status, d)
	}
	ra, _ := strconv.Atoi(resp.header.Get("Retry-After"))
	clk.Advance(time.Duration(ra-1) * time.Second)
	if resp := s.get(t, "/"); resp.status != http.StatusTooManyRequests {
		t.Errorf("after Retry-After − 1s: status %d, want 429", resp.status)
	}
	clk.Advance(time.Second)
	if resp := s.get(t, "/"); resp.status != http.StatusOK {
		t.Errorf("after Retry-After: status %d, want 200", resp.status)
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("the client opened %d connections, want 1 (keep-alive across 200s and 429s)", n)
	}
}

// TestRetryAfterRoundsUp: RetryAfter of 1 ms, 999 ms, 1 s and 1.001 s gives
// Retry-After 1, 1, 1 and 2.
func TestRetryAfterRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		wait time.Duration // the refusal's RetryAfter
		want string
	}{
		{time.Millisecond, "1"},
		{999 * time.Millisecond, "1"},
		{time.Second, "1"},
		{1001 * time.Millisecond, "2"},
		{2500 * time.Millisecond, "3"},
	} {
		t.Run(tc.wait.String(), func(t *testing.T) {
			clk := conformance.NewClock()
			// Window 10 s, bucket 100 ms: the first unit's bucket dies
			// 10.1 s after it opened, so asking at 10.1 s − wait leaves
			// RetryAfter = wait.
			l, err := local.NewAbsolute(limiter.WithWindow(10*time.Second), limiter.WithBucket(100*time.Millisecond), limiter.WithClock(clk.Now))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close(context.Background())
			rec := &recorder{Limiter: l}
			s := serve(t, mustNew(t, rec, limiter.Limit{Rate: limiter.Every(1, 10*time.Second), Window: 10 * time.Second}))
			if resp := s.get(t, "/"); resp.status != http.StatusOK {
				t.Fatalf("first request: %d", resp.status)
			}
			clk.Advance(10100*time.Millisecond - tc.wait)
			resp := s.get(t, "/")
			if d := rec.last(t); d.RetryAfter != tc.wait {
				t.Fatalf("RetryAfter %v, want %v", d.RetryAfter, tc.wait)
			}
			if got := resp.header.Get("Retry-After"); resp.status != 429 || got != tc.want {
				t.Errorf("status %d, Retry-After %q, want 429 and %s", resp.status, got, tc.want)
			}
		})
	}
}

func TestLegacyHeaders(t *testing.T) {
	clk := conformance.NewClock()
	rec := &recorder{Limiter: newLocal(t, clk, time.Minute)}
	s := serve(t, mustNew(t, rec, limiter.Limit{Name: "per-minute", Rate: limiter.PerMinute(2), Window: time.Minute}, httplimit.WithLegacyHeaders()))
	for i := range 3 {
		before := time.Now().Unix()
		resp := s.get(t, "/")
		after := time.Now().Unix()
		d := rec.last(t)
		if got, want := resp.header.Get("X-RateLimit-Limit"), "2"; got != want {
			t.Errorf("request %d: X-RateLimit-Limit %q, want %q", i, got, want)
		}
		if got, want := resp.header.Get("X-RateLimit-Remaining"), strconv.FormatInt(d.Remaining, 10); got != want {
			t.Errorf("request %d: X-RateLimit-Remaining %q, want %q", i, got, want)
		}
		reset, err := strconv.ParseInt(resp.header.Get("X-RateLimit-Reset"), 10, 64)
		if err != nil || reset < before+wantT(d) || reset > after+wantT(d) {
			t.Errorf("request %d: X-RateLimit-Reset %q, want the Unix time %d s from now", i, resp.header.Get("X-RateLimit-Reset"), wantT(d))
		}
		if got, want := resp.header.Get("RateLimit"), fmt.Sprintf(`"per-minute";r=%d;t=%d`, d.Remaining, wantT(d)); got != want {
			t.Errorf("request %d: RateLimit %q, want %q", i, got, want)
		}
		if (resp.status == 429) == d.Allowed {
			t.Errorf("request %d: status %d for %+v", i, resp.status, d)
		}
	}
}

// TestNeverFits: a request larger than the capacity gets 413 without
// Retry-After (no wait makes it fit).
func TestNeverFits(t *testing.T) {
	rec := &recorder{Limiter: newLocal(t, conformance.NewClock(), time.Minute)}
	m := mustNew(t, rec, limiter.Limit{Rate: limiter.PerMinute(10), Window: time.Minute},
		httplimit.WithCost(func(r *http.Request) (int64, error) { return strconv.ParseInt(r.URL.Query().Get("n"), 10, 64) }))
	s := serve(t, m)
	resp := s.get(t, "/?n=11")
	d := rec.last(t)
	if !d.Never {
		t.Fatalf("decision %+v, want Never", d)
	}
	checkResponse(t, 0, resp, d, "default", 10, 60)
	resp = s.get(t, "/?n=10")
	checkResponse(t, 1, resp, rec.last(t), "default", 10, 60)
	if resp.status != 200 {
		t.Errorf("cost 10 of 10: status %d", resp.status)
	}
	resp = s.get(t, "/?n=0") // a peek: refused (no room for one), records nothing
	checkResponse(t, 2, resp, rec.last(t), "default", 10, 60)
	if resp.status != 429 {
		t.Errorf("cost 0 with no room: status %d, want 429", resp.status)
	}
	for _, bad := range []string{"-1", "x"} {
		calls := rec.calls()
		if resp := s.get(t, "/?n="+bad); resp.status != http.StatusServiceUnavailable {
			t.Errorf("cost %q: status %d, want 503 from the error handler", bad, resp.status)
		}
		if rec.calls() != calls {
			t.Errorf("cost %q reached the limiter", bad)
		}
	}
}

func TestSkipAndAllowList(t *testing.T) {
	rec := &recorder{Limiter: newLocal(t, conformance.NewClock(), time.Minute)}
	m := mustNew(t, rec, limiter.Limit{Rate: limiter.PerMinute(1), Window: time.Minute},
		httplimit.WithKey(httplimit.KeyByHeader("X-Client")),
		httplimit.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }),
		httplimit.WithAllowKeys("x-client:monitor"))
	s := serve(t, m)
	for i := range 5 {
		for _, tc := range []struct {
			path string
			hdr  []string
		}{
			{"/healthz", nil}, // skipped before the key: no header needed
			{"/", []string{"X-Client", "monitor"}},
		} {
			resp := s.get(t, tc.path, tc.hdr...)
			if resp.status != 200 {
				t.Errorf("%d: %s %v: status %d, want 200", i, tc.path, tc.hdr, resp.status)
			}
			if v := resp.header.Get("RateLimit"); v != "" {
				t.Errorf("%d: %s %v: RateLimit %q on an exempt request", i, tc.path, tc.hdr, v)
			}
		}
	}
	if n := rec.calls(); n != 0 {
		t.Errorf("exempt requests made %d limiter calls", n)
	}
	if resp := s.get(t, "/", "X-Client", "alice"); resp.status != 200 {
		t.Errorf("alice's first: %d", resp.status)
	}
	if resp := s.get(t, "/", "X-Client", "alice"); resp.status != 429 {
		t.Errorf("alice's second: %d, want 429", resp.status)
	}
	if resp := s.get(t, "/", "X-Client", "bob"); resp.status != 200 {
		t.Errorf("bob's first: %d (his own key)", resp.status)
	}
}

type userKey struct{}

// TestTiersFromContext: the user put in the context by an auth middleware
// is the key, and the user's tier picks the rate.
func TestTiersFromContext(t *testing.T) {
	type user struct{ id, tier string }
	tiers := map[string]limiter.Rate{"free": limiter.PerMinute(2), "pro": limiter.PerMinute(5)}
	rec := &recorder{Limiter: newLocal(t, conformance.NewClock(), time.Minute)}
	m := mustNew(t, rec, limiter.Limit{Window: time.Minute},
		httplimit.WithKey(httplimit.KeyFromContext("user", userKey{})),
		httplimit.WithRateFunc(func(r *http.Request) (limiter.Rate, error) {
			u, _ := r.Context().Value(tierKey{}).(string)
			rate, ok := tiers[u]
			if !ok {
				return limiter.Rate{}, fmt.Errorf("unknown tier %q", u)
			}
			return rate, nil
		}))
	users := map[string]user{"k1": {"alice", "free"}, "k2": {"bob", "pro"}, "k3": {"carol", "gold"}}
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, ok := users[r.Header.Get("Authorization")]; ok {
				ctx := context.WithValue(r.Context(), userKey{}, u.id)
				r = r.WithContext(context.WithValue(ctx, tierKey{}, u.tier))
			}
			next.ServeHTTP(w, r)
		})
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	s := httptest.NewServer(auth(m.Handler(ok)))
	defer s.Close()
	do := func(auth string) *http.Response {
		req, _ := http.NewRequest("GET", s.URL, nil)
		req.Header.Set("Authorization", auth)
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		auth     string
		admitted int
		policy   string
	}{
		{"k1", 2, `"default";q=2;w=60`},
		{"k2", 5, `"default";q=5;w=60`},
	} {
		n := 0
		for range 8 {
			resp := do(tc.auth)
			if resp.StatusCode == 200 {
				n++
			}
			if got := resp.Header.Get("RateLimit-Policy"); got != tc.policy {
				t.Errorf("%s: RateLimit-Policy %q, want %q", tc.auth, got, tc.policy)
			}
		}
		if n != tc.admitted {
			t.Errorf("%s: %d of 8 admitted, want %d", tc.auth, n, tc.admitted)
		}
	}
	if resp := do("nobody"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no user: status %d, want 401", resp.StatusCode)
	}
	if resp := do("k3"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("unknown tier: status %d, want 503", resp.StatusCode)
	}
}

type tierKey struct{}

func TestHandlers(t *testing.T) {
	rec := &recorder{Limiter: newLocal(t, conformance.NewClock(), time.Minute)}
	var gotRes httplimit.Result
	var gotErr error
	m := mustNew(t, rec, limiter.Limit{Name: "burst", Rate: limiter.PerMinute(1), Window: time.Minute},
		httplimit.WithKey(httplimit.KeyByHeader("X-Key")),
		httplimit.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, res *httplimit.Result) {
			gotRes = *res
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"violated-policies":["%s"]}`, res.Limits[0].Name)
		}),
		httplimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			gotErr = err
			w.WriteHeader(http.StatusTeapot)
		}))
	s := serve(t, m)
	s.get(t, "/", "X-Key", "a")
	resp := s.get(t, "/", "X-Key", "a")
	if resp.status != 429 || resp.body != `{"violated-policies":["burst"]}` || resp.header.Get("Retry-After") == "" {
		t.Errorf("custom deny: %d %q Retry-After %q", resp.status, resp.body, resp.header.Get("Retry-After"))
	}
	d := rec.last(t)
	if gotRes.Key != "x-key:a" || gotRes.Cost != 1 || gotRes.Decision != d || len(gotRes.Limits) != 1 ||
		gotRes.Limits[0] != (limiter.LimitDecision{Name: "burst", Limit: 1, Remaining: 0, RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter, Refused: true}) {
		t.Errorf("Result %+v, decision %+v", gotRes, d)
	}
	resp = s.get(t, "/")
	if resp.status != http.StatusTeapot || !errors.Is(gotErr, httplimit.ErrNoKey) {
		t.Errorf("custom error: %d, err %v", resp.status, gotErr)
	}
	var ke *httplimit.KeyError
	if !errors.As(gotErr, &ke) || ke.Status != 400 {
		t.Errorf("error %v, want a *KeyError with status 400", gotErr)
	}
	if v := resp.header.Get("RateLimit"); v != "" {
		t.Errorf("RateLimit %q on an error response", v)
	}
}

// TestKeyLimits: empty and over-long keys never reach the limiter.
func TestKeyLimits(t *testing.T) {
	rec := &recorder{Limiter: newLocal(t, nil, time.Minute)}
	long := strings.Repeat("x", 600)
	for _, tc := range []struct {
		name   string
		key    httplimit.KeyFunc
		status int
	}{
		{"empty", func(*http.Request) (string, error) { return "", nil }, 500},
		{"long", httplimit.KeyByHeader("X-Long"), 400},
		{"static empty", httplimit.Static(""), 500},
		{"rejected 418", func(*http.Request) (string, error) { return "", httplimit.Reject(418, "no") }, 418},
		{"reject bad status", func(*http.Request) (string, error) { return "", httplimit.Reject(200, "no") }, 400},
		{"plain error", func(*http.Request) (string, error) { return "", errors.New("db down") }, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, mustNew(t, rec, limiter.Limit{Rate: limiter.PerSecond(100), Window: time.Minute}, httplimit.WithKey(tc.key)))
			if resp := s.get(t, "/", "X-Long", long); resp.status != tc.status {
				t.Errorf("status %d, want %d", resp.status, tc.status)
			}
		})
	}
	if n := rec.calls(); n != 0 {
		t.Errorf("%d limiter calls for requests with no valid key", n)
	}
}

func TestCompose(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-A", "a|b")
	r.Header.Set("X-B", "c")
	k1, err1 := httplimit.Compose(httplimit.KeyByHeader("X-A"), httplimit.KeyByHeader("X-B"))(r)
	r.Header.Set("X-A", "a")
	r.Header.Set("X-B", "b|c")
	k2, err2 := httplimit.Compose(httplimit.KeyByHeader("X-A"), httplimit.KeyByHeader("X-B"))(r)
	if err1 != nil || err2 != nil || k1 == k2 {
		t.Errorf("Compose: %q (%v) and %q (%v), want two different keys", k1, err1, k2, err2)
	}
	if k, err := httplimit.Compose(httplimit.Static("search"), httplimit.KeyByHeader("X-A"))(r); k != "search|x-a:a" || err != nil {
		t.Errorf("Compose(Static, header) = %q, %v", k, err)
	}
	if _, err := httplimit.Compose(httplimit.Static("search"), httplimit.KeyByHeader("X-None"))(r); !errors.Is(err, httplimit.ErrNoKey) {
		t.Errorf("Compose with a missing part: %v, want ErrNoKey", err)
	}
}

func TestNewErrors(t *testing.T) {
	l := newLocal(t, nil, time.Minute)
	set, err := limiter.NewSet(limiter.Limit{Name: "a", Rate: limiter.PerSecond(1), Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rateFn := httplimit.WithRateFunc(func(*http.Request) (limiter.Rate, error) { return limiter.PerSecond(1), nil })
	setFn := httplimit.WithSetFunc(func(*http.Request) (*limiter.Set, error) { return set, nil })
	for _, tc := range []struct {
		name string
		new  func() error
		want error
	}{
		{"nil limiter", func() error {
			_, err := httplimit.New(nil, limiter.Limit{Rate: limiter.PerSecond(1), Window: time.Minute})
			return err
		}, limiter.ErrInvalidConfig},
		{"bad name", func() error {
			_, err := httplimit.New(l, limiter.Limit{Name: "Bad Name", Rate: limiter.PerSecond(1), Window: time.Minute})
			return err
		}, limiter.ErrInvalidConfig},
		{"window differs", func() error {
			_, err := httplimit.New(l, limiter.Limit{Rate: limiter.PerSecond(1), Window: time.Hour})
			return err
		}, limiter.ErrInvalidConfig},
		{"no rate", func() error { _, err := httplimit.New(l, limiter.Limit{Window: time.Minute}); return err }, limiter.ErrInvalidRate},
		{"tiny rate", func() error {
			_, err := httplimit.New(l, limiter.Limit{Rate: limiter.PerDay(1), Window: time.Minute})
			return err
		}, limiter.ErrCapacityTooSmall},
		{"set func on New", func() error {
			_, err := httplimit.New(l, limiter.Limit{Rate: limiter.PerSecond(1), Window: time.Minute}, setFn)
			return err
		}, limiter.ErrInvalidConfig},
		{"nil option", func() error {
			_, err := httplimit.New(l, limiter.Limit{Rate: limiter.PerSecond(1), Window: time.Minute}, nil)
			return err
		}, limiter.ErrInvalidConfig},
		{"nil set limiter", func() error { _, err := httplimit.NewSet(nil, set); return err }, limiter.ErrInvalidConfig},
		{"nil set", func() error { _, err := httplimit.NewSet(setLimiterStub{}, nil); return err }, limiter.ErrInvalidConfig},
		{"rate func on NewSet", func() error { _, err := httplimit.NewSet(setLimiterStub{}, set, rateFn); return err }, limiter.ErrInvalidConfig},
		{"bad header", func() error {
			_, err := httplimit.NewIPKey(httplimit.TrustProxies("X-Client-IP", "10.0.0.0/8"))
			return err
		}, limiter.ErrInvalidConfig},
		{"no proxies", func() error {
			_, err := httplimit.NewIPKey(httplimit.TrustProxies(httplimit.HeaderXForwardedFor))
			return err
		}, limiter.ErrInvalidConfig},
		{"bad cidr", func() error {
			_, err := httplimit.NewIPKey(httplimit.TrustProxies(httplimit.HeaderXForwardedFor, "10.0.0.0/33"))
			return err
		}, limiter.ErrInvalidConfig},
		{"bad v6 prefix", func() error { _, err := httplimit.NewIPKey(httplimit.IPv6Prefix(0)); return err }, limiter.ErrInvalidConfig},
		{"bad v4 prefix", func() error { _, err := httplimit.NewIPKey(httplimit.IPv4Prefix(33)); return err }, limiter.ErrInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.new(); !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
	// A rate func with no fixed rate is fine.
	if _, err := httplimit.New(l, limiter.Limit{Window: time.Minute}, rateFn); err != nil {
		t.Errorf("New with only a rate func: %v", err)
	}
	if _, err := httplimit.NewSet(setLimiterStub{}, nil, setFn); err != nil {
		t.Errorf("NewSet with only a set func: %v", err)
	}
}

// setLimiterStub satisfies limiter.SetLimiter for constructor tests only:
// it is never called.
type setLimiterStub struct{ limiter.SetLimiter }

// TestConcurrentClients: many clients at once over real HTTP, each keyed
// by its header: each gets exactly its capacity admitted in the window.
func TestConcurrentClients(t *testing.T) {
	rec := &recorder{Limiter: newLocal(t, conformance.NewClock(), time.Minute)}
	s := serve(t, mustNew(t, rec, limiter.Limit{Rate: limiter.PerMinute(20), Window: time.Minute}, httplimit.WithKey(httplimit.KeyByHeader("X-Client"))))
	const clients, each = 8, 50
	var wg sync.WaitGroup
	admitted := make([]atomic.Int64, clients)
	for c := range clients {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each / 4 {
					req, _ := http.NewRequest("GET", s.URL, nil)
					req.Header.Set("X-Client", strconv.Itoa(c))
					resp, err := s.Client().Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 {
						admitted[c].Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	for c := range clients {
		if n := admitted[c].Load(); n != 20 {
			t.Errorf("client %d: %d admitted, want 20", c, n)
		}
	}
}

// headerWriter is a ResponseWriter that keeps the headers and status only.
type headerWriter struct {
	h    http.Header
	code int
}

func (w *headerWriter) Header() http.Header         { return w.h }
func (w *headerWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *headerWriter) WriteHeader(code int)        { w.code = code }

// TestAdmittedAllocs: an admitted request keyed by IP costs at most three
// allocations (the key, the RateLimit value, the header values' slice);
// bench/ compares the middleware's cost with go-chi/httprate's.
func TestAdmittedAllocs(t *testing.T) {
	l := newLocal(t, nil, time.Minute)
	m := mustNew(t, l, limiter.Limit{Rate: limiter.PerSecond(1e9), Window: time.Minute})
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[2001:db8::1]:1234"
	w := &headerWriter{h: http.Header{}}
	allocs := testing.AllocsPerRun(200, func() {
		clear(w.h)
		h.ServeHTTP(w, r)
	})
	if w.code != 200 || allocs > 3 {
		t.Errorf("status %d, %.1f allocs per admitted request, want 200 and at most 3", w.code, allocs)
	}
}

// TestZeroMiddleware: a Middleware not built by New answers 500, no panic.
func TestZeroMiddleware(t *testing.T) {
	var m httplimit.Middleware
	w := httptest.NewRecorder()
	m.Handler(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != http.StatusInternalServerError {
		t.Errorf("zero Middleware: status %d, want 500", w.Code)
	}
}
