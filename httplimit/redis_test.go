package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/httplimit"
	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

func newRedisAbs(t *testing.T, c redis.UniversalClient, opts ...limiter.Option) *redisabs.Limiter {
	t.Helper()
	l, err := redisabs.New(c, append([]limiter.Option{limiter.WithPrefix(redistest.Prefix(t))}, opts...)...)
	if err != nil {
		t.Fatalf("redisabs.New: %v", err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

// TestRedisOverHTTP: the single-limit checks of TestLocalOverHTTP on real
// Redis, with Redis's own clock: 429 exactly when Redis refuses,
// Retry-After and the RateLimit headers from its decision.
func TestRedisOverHTTP(t *testing.T) {
	srv := redistest.Real(t)
	rec := &recorder{Limiter: newRedisAbs(t, srv.Client(t), limiter.WithWindow(time.Minute))}
	s := serve(t, mustNew(t, rec, limiter.Limit{Name: "per-minute", Rate: limiter.PerMinute(4), Window: time.Minute}))
	var codes []int
	for i := range 7 {
		resp := s.get(t, "/")
		d := rec.last(t)
		checkResponse(t, i, resp, d, "per-minute", 4, 60)
		if !d.Allowed && (d.RetryAfter < 59*time.Second || d.RetryAfter > 61*time.Second) {
			t.Errorf("request %d: RetryAfter %v, want about a minute (W + B after the first request)", i, d.RetryAfter)
		}
		codes = append(codes, resp.status)
	}
	if want := "[200 200 200 200 429 429 429]"; fmt.Sprint(codes) != want {
		t.Errorf("statuses %v, want %s", codes, want)
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestRedisSetOverHTTP: the set checks on real Redis (redisabs), its clock
// given by WithClock so the steps are exact.
func TestRedisSetOverHTTP(t *testing.T) {
	srv := redistest.Real(t)
	clk := conformance.NewClock()
	runSetOverHTTP(t, newRedisAbs(t, srv.Client(t), limiter.WithClock(clk.Now)), clk.Advance)
}

// TestRedisSetOverHTTPMini: the same on miniredis.
func TestRedisSetOverHTTPMini(t *testing.T) {
	_, c := redistest.Mini(t)
	clk := conformance.NewClock()
	runSetOverHTTP(t, newRedisAbs(t, c, limiter.WithClock(clk.Now)), clk.Advance)
}

// TestRedisDownFailError: under FailError, with Redis stopped or paused, for
// a single limit and a set,
// every request gets the error handler's 503, each within the provider's
// timeout (plus scheduling slack), and the handler behind is never run.
func TestRedisDownFailError(t *testing.T) {
	const timeout = 200 * time.Millisecond
	for _, tc := range []struct{ how, kind string }{{"stopped", "single"}, {"paused", "single"}, {"stopped", "set"}, {"paused", "set"}} {
		how := tc.how
		t.Run(tc.how+"/"+tc.kind, func(t *testing.T) {
			srv := redistest.StartServer(t)
			opt := srv.Options()
			opt.MaxRetries = -1
			opt.ContextTimeoutEnabled = true
			c := redis.NewClient(opt)
			defer c.Close()
			l := newRedisAbs(t, c, limiter.WithFailurePolicy(limiter.FailError), limiter.WithTimeout(timeout), limiter.WithProbeInterval(50*time.Millisecond))
			m := mustNew(t, l, limiter.Limit{Rate: limiter.PerSecond(100), Window: time.Minute})
			if tc.kind == "set" {
				var err error
				m, err = httplimit.NewSet(l, mustSet(t,
					limiter.Limit{Name: "per-second", Rate: limiter.PerSecond(100), Window: time.Second},
					limiter.Limit{Name: "per-hour", Rate: limiter.PerHour(10_000), Window: time.Hour}))
				if err != nil {
					t.Fatal(err)
				}
			}
			ran := 0
			hs := serveHandler(t, m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran++ })))
			if resp := hs.get(t, "/"); resp.status != 200 || ran != 1 {
				t.Fatalf("with Redis up: status %d, handler ran %d times", resp.status, ran)
			}
			if how == "stopped" {
				srv.Stop()
			} else {
				if err := srv.Pause(); err != nil {
					t.Fatal(err)
				}
				defer srv.Resume()
			}
			slack := 2 * time.Second // a loaded machine and the race detector
			for i := range 5 {
				start := time.Now()
				resp := hs.get(t, "/")
				took := time.Since(start)
				if resp.status != http.StatusServiceUnavailable || resp.body != "Service Unavailable\n" {
					t.Errorf("request %d: %d %q, want 503 Service Unavailable", i, resp.status, resp.body)
				}
				if took > timeout+slack {
					t.Errorf("request %d took %v, more than the timeout %v + %v", i, took, timeout, slack)
				}
				if resp.header.Get("RateLimit") != "" || resp.header.Get("Retry-After") != "" {
					t.Errorf("request %d: rate-limit headers on an error: %v", i, resp.header)
				}
			}
			if ran != 1 {
				t.Errorf("the handler ran %d times, want only the first request's", ran)
			}
		})
	}
}
