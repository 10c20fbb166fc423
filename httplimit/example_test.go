package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluice-go/sluice/httplimit"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
)

// Per client IP on net/http: 3 requests per minute for each address.
func Example() {
	ctx := context.Background()
	l, err := local.NewAbsolute(limiter.WithWindow(time.Minute))
	if err != nil {
		panic(err)
	}
	defer l.Close(ctx)
	mw, err := httplimit.New(l, limiter.Limit{Rate: limiter.PerMinute(3)})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	handler := mw.Handler(mux) // http.ListenAndServe(":8080", handler)

	for i := range 4 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.7:51234"
		r.Header.Set("X-Forwarded-For", fmt.Sprintf("10.0.0.%d", i)) // ignored: no proxy is trusted
		handler.ServeHTTP(w, r)
		fmt.Printf("%d  RateLimit-Policy: %s  RateLimit: %s  Retry-After: %q\n",
			w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200  RateLimit-Policy: "default";q=3;w=60  RateLimit: "default";r=2;t=61  Retry-After: ""
	// 200  RateLimit-Policy: "default";q=3;w=60  RateLimit: "default";r=1;t=61  Retry-After: ""
	// 200  RateLimit-Policy: "default";q=3;w=60  RateLimit: "default";r=0;t=61  Retry-After: ""
	// 429  RateLimit-Policy: "default";q=3;w=60  RateLimit: "default";r=0;t=61  Retry-After: "61"
}

type ctxKey string

// Per user from the request context, with the rate of the user's tier.
// An authentication middleware in front stores the user; requests without
// one get 401.
func Example_tiers() {
	ctx := context.Background()
	l, err := local.NewAbsolute(limiter.WithWindow(time.Minute))
	if err != nil {
		panic(err)
	}
	defer l.Close(ctx)
	tiers := map[string]limiter.Rate{"free": limiter.PerMinute(1), "pro": limiter.PerMinute(100)}
	mw, err := httplimit.New(l, limiter.Limit{Name: "per-minute"},
		httplimit.WithKey(httplimit.KeyFromContext("user", ctxKey("user"))),
		httplimit.WithRateFunc(func(r *http.Request) (limiter.Rate, error) {
			tier, _ := r.Context().Value(ctxKey("tier")).(string)
			if rate, ok := tiers[tier]; ok {
				return rate, nil
			}
			return tiers["free"], nil
		}))
	if err != nil {
		panic(err)
	}
	auth := func(next http.Handler) http.Handler { // stands in for real authentication
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if user, tier, ok := parseToken(r.Header.Get("Authorization")); ok {
				ctx := context.WithValue(r.Context(), ctxKey("user"), user)
				r = r.WithContext(context.WithValue(ctx, ctxKey("tier"), tier))
			}
			next.ServeHTTP(w, r)
		})
	}
	handler := auth(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))

	for _, token := range []string{"alice/free", "alice/free", "bob/pro", "bob/pro", ""} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", token)
		handler.ServeHTTP(w, r)
		fmt.Printf("%-10s %d %s\n", token, w.Code, w.Header().Get("RateLimit-Policy"))
	}
	// Output:
	// alice/free 200 "per-minute";q=1;w=60
	// alice/free 429 "per-minute";q=1;w=60
	// bob/pro    200 "per-minute";q=100;w=60
	// bob/pro    200 "per-minute";q=100;w=60
	//            401
}

func parseToken(s string) (user, tier string, ok bool) {
	for i := range len(s) {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

// Behind trusted proxies: the client is the right-most X-Forwarded-For
// entry that is not one of the proxies, so entries the client wrote
// itself cannot pick its key.
func ExampleNewIPKey() {
	ipKey, err := httplimit.NewIPKey(
		httplimit.TrustProxies(httplimit.HeaderXForwardedFor, "10.0.0.0/8", "fd00::/8"),
	)
	if err != nil {
		panic(err)
	}
	for _, tc := range []struct{ peer, xff string }{
		{"10.0.0.2:443", "198.51.100.4"},                          // one proxy
		{"10.0.0.2:443", "1.2.3.4, 198.51.100.4, 10.0.0.1"},       // forged entry, two proxies
		{"203.0.113.9:5000", "1.2.3.4"},                           // not from a proxy: header ignored
		{"10.0.0.2:443", "2001:db8:1:2::7"},                       // IPv6 client: its /64
		{"10.0.0.2:443", "::ffff:198.51.100.4"},                   // IPv4-mapped: the IPv4 address
		{"[fd00::1]:443", "2001:db8:1:2::8, 10.0.0.1, fd00::9:1"}, // mixed chain
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		r.Header.Set("X-Forwarded-For", tc.xff)
		k, err := ipKey.Key(r)
		fmt.Println(k, err)
	}
	// mw, err := httplimit.New(l, limit, httplimit.WithKey(ipKey.Key))

	// Output:
	// ip:198.51.100.4 <nil>
	// ip:198.51.100.4 <nil>
	// ip:203.0.113.9 <nil>
	// ip:2001:db8:1:2::/64 <nil>
	// ip:198.51.100.4 <nil>
	// ip:2001:db8:1:2::/64 <nil>
}

// Exempt requests by method and by path: OPTIONS (CORS preflights) is
// exempt by default; here HEAD is exempt too, and so is the health check.
// Exempt requests get no RateLimit header.
func ExampleWithSkipMethods() {
	ctx := context.Background()
	l, err := local.NewAbsolute(limiter.WithWindow(time.Minute))
	if err != nil {
		panic(err)
	}
	defer l.Close(ctx)
	mw, err := httplimit.New(l, limiter.Limit{Rate: limiter.PerMinute(1)},
		httplimit.WithSkipMethods(http.MethodOptions, http.MethodHead),
		httplimit.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }))
	if err != nil {
		panic(err)
	}
	handler := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	for _, req := range []struct{ method, path string }{
		{"OPTIONS", "/api"}, {"HEAD", "/api"}, {"GET", "/healthz"}, {"GET", "/api"}, {"GET", "/api"}, {"OPTIONS", "/api"},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(req.method, req.path, nil)
		handler.ServeHTTP(w, r)
		fmt.Printf("%-7s %-8s %d %q\n", req.method, req.path, w.Code, w.Header().Get("RateLimit"))
	}
	// Output:
	// OPTIONS /api     200 ""
	// HEAD    /api     200 ""
	// GET     /healthz 200 ""
	// GET     /api     200 "\"default\";r=0;t=61"
	// GET     /api     429 "\"default\";r=0;t=61"
	// OPTIONS /api     200 ""
}

// A set of limits per client IP: 2 per second and 100 per hour, decided
// as one. The headers carry one item per limit, each with its own window
// (taken from the set, not from the limiter).
func ExampleNewSet() {
	ctx := context.Background()
	// A stopped clock keeps the output exact; leave WithClock out in code.
	l, err := local.NewAbsolute(limiter.WithClock(stoppedClock{}.Now))
	if err != nil {
		panic(err)
	}
	defer l.Close(ctx)
	set, err := limiter.NewSet(
		limiter.Limit{Name: "per-second", Rate: limiter.PerSecond(2), Window: time.Second},
		limiter.Limit{Name: "per-hour", Rate: limiter.PerHour(100), Window: time.Hour},
	)
	if err != nil {
		panic(err)
	}
	mw, err := httplimit.NewSet(l, set)
	if err != nil {
		panic(err)
	}
	handler := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	for range 3 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.7:51234"
		handler.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("RateLimit-Policy"))
		fmt.Println("   ", w.Header().Get("RateLimit"))
	}
	// Output:
	// 200 "per-second";q=2;w=1, "per-hour";q=100;w=3600
	//     "per-second";r=1;t=2, "per-hour";r=99;t=3636
	// 200 "per-second";q=2;w=1, "per-hour";q=100;w=3600
	//     "per-second";r=0;t=2, "per-hour";r=98;t=3636
	// 429 "per-second";q=2;w=1, "per-hour";q=100;w=3600
	//     "per-second";r=0;t=2, "per-hour";r=98;t=3636
}

// stoppedClock always reads the same instant; limiter.WithClock takes its Now.
type stoppedClock struct{}

func (stoppedClock) Now() time.Time { return time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC) }
