package bench

// The HTTP middleware: its RateLimit headers parsed by a structured-field
// parser (github.com/dunglas/httpsfv, RFC 9651), and its overhead beside
// the bare handler and go-chi/httprate. Both peers live here so they never
// become dependencies of the library.

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/go-chi/httprate"

	"github.com/sluice-go/sluice/httplimit"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
)

// fakeClock moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// lastSet keeps the decision of each IncSet.
type lastSet struct {
	*local.Absolute
	mu sync.Mutex
	d  limiter.SetDecision
}

func (l *lastSet) IncSet(ctx context.Context, k string, s *limiter.Set, n int64) (limiter.SetDecision, error) {
	d, err := l.Absolute.IncSet(ctx, k, s, n)
	l.mu.Lock()
	l.d = d
	l.mu.Unlock()
	return d, err
}

func (l *lastSet) Inc(ctx context.Context, k string, r limiter.Rate, n int64) (limiter.Decision, error) {
	d, err := l.Absolute.Inc(ctx, k, r, n)
	l.mu.Lock()
	l.d = limiter.SetDecision{Decision: d, Limits: []limiter.LimitDecision{{
		Name: "default", Limit: d.Limit, Remaining: d.Remaining, RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter,
	}}}
	l.mu.Unlock()
	return d, err
}

func ceilSeconds(d time.Duration) int64 { return int64(math.Ceil(d.Seconds())) }

// TestRateLimitHeadersParse: over real HTTP, for a single limit and for a
// set, RateLimit-Policy and RateLimit parse as structured-field Lists whose
// items are Strings (the policy names) with Integer parameters q, w, r and
// t equal to the limiter's decision, one item per limit in order.
func TestRateLimitHeadersParse(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	abs, err := local.NewAbsolute(limiter.WithClock(clk.Now), limiter.WithWindow(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer abs.Close(context.Background())
	l := &lastSet{Absolute: abs}
	set, err := limiter.NewSet(
		limiter.Limit{Name: "per-second", Rate: limiter.PerSecond(2), Window: time.Second},
		limiter.Limit{Name: "per-hour", Rate: limiter.PerHour(5), Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	single, err := httplimit.New(l, limiter.Limit{Rate: limiter.Every(3, 10*time.Second), Window: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	multi, err := httplimit.NewSet(l, set)
	if err != nil {
		t.Fatal(err)
	}
	type policy struct {
		name string
		q, w int64
	}
	for _, tc := range []struct {
		name     string
		mw       *httplimit.Middleware
		policies []policy
	}{
		{"single", single, []policy{{"default", 3, 10}}},
		{"set", multi, []policy{{"per-second", 2, 1}, {"per-hour", 5, 3600}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := httptest.NewServer(tc.mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
			defer s.Close()
			statuses := map[int]int{}
			for i := range 9 {
				clk.Advance(300 * time.Millisecond)
				resp, err := s.Client().Get(s.URL)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				l.mu.Lock()
				d := l.d
				l.mu.Unlock()
				statuses[resp.StatusCode]++
				if want := map[bool]int{true: 200, false: 429}[d.Allowed]; resp.StatusCode != want {
					t.Fatalf("request %d: status %d, want %d", i, resp.StatusCode, want)
				}

				pol, err := httpsfv.UnmarshalList(resp.Header.Values("RateLimit-Policy"))
				if err != nil {
					t.Fatalf("request %d: RateLimit-Policy %q: %v", i, resp.Header.Values("RateLimit-Policy"), err)
				}
				rl, err := httpsfv.UnmarshalList(resp.Header.Values("RateLimit"))
				if err != nil {
					t.Fatalf("request %d: RateLimit %q: %v", i, resp.Header.Values("RateLimit"), err)
				}
				if len(pol) != len(tc.policies) || len(rl) != len(tc.policies) {
					t.Fatalf("request %d: %d policy and %d RateLimit items, want %d", i, len(pol), len(rl), len(tc.policies))
				}
				for j, want := range tc.policies {
					p := item(t, pol[j], want.name)
					if q := intParam(t, p, "q"); q != want.q {
						t.Errorf("request %d, %s: q=%d, want %d", i, want.name, q, want.q)
					}
					if w := intParam(t, p, "w"); w != want.w {
						t.Errorf("request %d, %s: w=%d, want %d", i, want.name, w, want.w)
					}
					ld := d.Limits[j]
					r := item(t, rl[j], want.name)
					if got := intParam(t, r, "r"); got != ld.Remaining {
						t.Errorf("request %d, %s: r=%d, want %d", i, want.name, got, ld.Remaining)
					}
					wantT := ceilSeconds(ld.ResetAfter)
					if ld.RetryAfter > 0 {
						wantT = ceilSeconds(ld.RetryAfter)
					}
					if got := intParam(t, r, "t"); got != wantT {
						t.Errorf("request %d, %s: t=%d, want %d", i, want.name, got, wantT)
					}
				}
				if !d.Allowed {
					ra, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
					if err != nil || ra != ceilSeconds(d.RetryAfter) {
						t.Errorf("request %d: Retry-After %q, want %d", i, resp.Header.Get("Retry-After"), ceilSeconds(d.RetryAfter))
					}
				}
			}
			if statuses[200] == 0 || statuses[429] == 0 {
				t.Errorf("statuses %v: want both 200s and 429s", statuses)
			}
		})
	}
}

func item(t *testing.T, m httpsfv.Member, name string) httpsfv.Item {
	t.Helper()
	it, ok := m.(httpsfv.Item)
	if !ok {
		t.Fatalf("member %#v is not an Item", m)
	}
	if s, ok := it.Value.(string); !ok || s != name {
		t.Fatalf("item value %#v, want the String %q", it.Value, name)
	}
	return it
}

func intParam(t *testing.T, it httpsfv.Item, name string) int64 {
	t.Helper()
	v, ok := it.Params.Get(name)
	if !ok {
		t.Fatalf("item %v: no parameter %s", it.Value, name)
	}
	n, ok := v.(int64)
	if !ok {
		t.Fatalf("item %v: parameter %s = %#v, want an Integer", it.Value, name, v)
	}
	return n
}

// discardWriter is a ResponseWriter that keeps nothing but the status; the
// benchmarks clear its header map between requests, as a server does with
// a fresh one, without counting a new map against either middleware.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// httpClients is the number of distinct client addresses the benchmark
// requests come from.
const httpClients = 1024

func clientRequests() []*http.Request {
	rs := make([]*http.Request, httpClients)
	for i := range rs {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = fmt.Sprintf("198.51.%d.%d:%d", i/256, i%256, 40000+i)
		rs[i] = r
	}
	return rs
}

// BenchmarkHTTPMiddleware: one admitted request through the bare handler,
// sluice's middleware on the local provider and go-chi/httprate's
// LimitByIP (its in-memory counter), keyed by client IP over 1,024 clients,
// every request admitted (a limit far above the traffic). Both middlewares
// set their default headers: sluice RateLimit-Policy and RateLimit,
// httprate X-RateLimit-Limit, -Remaining and -Reset. Added cost = the
// middleware's ns/op and allocs/op minus bare's, from the same run.
func BenchmarkHTTPMiddleware(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	l, err := local.NewAbsolute(limiter.WithWindow(time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close(context.Background())
	mw, err := httplimit.New(l, limiter.Limit{Rate: limiter.PerSecond(1e9), Window: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	handlers := []struct {
		name string
		h    http.Handler
	}{
		{"bare", ok},
		{"sluice", mw.Handler(ok)},
		{"httprate", httprate.LimitByIP(1<<40, time.Minute)(ok)},
	}
	reqs := clientRequests()
	for _, par := range []bool{false, true} {
		for _, hc := range handlers {
			name := "serial/" + hc.name
			if par {
				name = "parallel/" + hc.name
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				if !par {
					w := &discardWriter{h: http.Header{}}
					for i := 0; i < b.N; i++ {
						clear(w.h)
						w.code = 0
						hc.h.ServeHTTP(w, reqs[i%httpClients])
						if w.code != http.StatusOK {
							b.Fatalf("%s: status %d, want every request admitted", hc.name, w.code)
						}
					}
					return
				}
				var seq sync.Mutex
				next := 0
				b.RunParallel(func(pb *testing.PB) {
					seq.Lock()
					i := next * 7919 // each goroutine starts at another client
					next++
					seq.Unlock()
					w := &discardWriter{h: http.Header{}}
					for pb.Next() {
						clear(w.h)
						w.code = 0
						hc.h.ServeHTTP(w, reqs[i%httpClients])
						i++
						if w.code != http.StatusOK {
							b.Errorf("%s: status %d, want every request admitted", hc.name, w.code)
							return
						}
					}
				})
			})
		}
	}
}

// TestRateLimitHeadersClampedIntegers: q and r are structured-field
// Integers, at most 15 digits; a capacity at or above 10^15 is written as
// 10^15 − 1 so a conforming parser still reads both headers.
func TestRateLimitHeadersClampedIntegers(t *testing.T) {
	// The parser is the judge: it must refuse a 16-digit Integer.
	if _, err := httpsfv.UnmarshalList([]string{`"default";q=1000000000000000`}); err == nil {
		t.Fatal("httpsfv accepts a 16-digit Integer; the test below proves nothing")
	}
	const maxInt = 999_999_999_999_999
	for _, tc := range []struct {
		name  string
		c     float64
		q, r  int64
		limit int64 // Decision.Limit, unclamped
	}{
		{"1e15-1", 999_999_999_999_999, maxInt, maxInt - 1, maxInt},
		{"1e15", 1e15, maxInt, maxInt, 1e15},
		{"2^50", 1 << 50, maxInt, maxInt, 1 << 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			abs, err := local.NewAbsolute(limiter.WithWindow(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer abs.Close(context.Background())
			mw, err := httplimit.New(abs, limiter.Limit{Rate: limiter.PerSecond(tc.c), Window: time.Second},
				httplimit.WithLegacyHeaders())
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).
				ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d (%s), want 200", rec.Code, rec.Body)
			}
			pol, err := httpsfv.UnmarshalList(rec.Header().Values("RateLimit-Policy"))
			if err != nil {
				t.Fatalf("RateLimit-Policy %q: %v", rec.Header().Values("RateLimit-Policy"), err)
			}
			rl, err := httpsfv.UnmarshalList(rec.Header().Values("RateLimit"))
			if err != nil {
				t.Fatalf("RateLimit %q: %v", rec.Header().Values("RateLimit"), err)
			}
			if q := intParam(t, item(t, pol[0], "default"), "q"); q != tc.q {
				t.Errorf("q=%d, want %d", q, tc.q)
			}
			if r := intParam(t, item(t, rl[0], "default"), "r"); r != tc.r {
				t.Errorf("r=%d, want %d", r, tc.r)
			}
			// The legacy header is a plain integer: exact.
			if got, want := rec.Header().Get("X-RateLimit-Limit"), strconv.FormatInt(tc.limit, 10); got != want {
				t.Errorf("X-RateLimit-Limit %s, want %s", got, want)
			}
		})
	}
}
