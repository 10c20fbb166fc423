package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-go/sluice/httplimit"
	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
)

// setProvider is what the set tests need of a provider.
type setProvider interface {
	limiter.Limiter
	limiter.SetLimiter
}

// setRecorder keeps each IncSet's decision.
type setRecorder struct {
	setProvider
	decisionLog[limiter.SetDecision]
}

func (r *setRecorder) IncSet(ctx context.Context, k string, s *limiter.Set, n int64) (limiter.SetDecision, error) {
	return r.keep(r.setProvider.IncSet(ctx, k, s, n))
}

func mustSet(t *testing.T, limits ...limiter.Limit) *limiter.Set {
	t.Helper()
	s, err := limiter.NewSet(limits...)
	if err != nil {
		t.Fatalf("NewSet: %v", err)
	}
	return s
}

func ceilT(retry, reset time.Duration) int64 {
	if retry > 0 {
		return ceilSec(retry)
	}
	return ceilSec(reset)
}

// checkSetResponse compares a response with the set decision made for it:
// one policy item and one RateLimit item per limit, in the set's order.
func checkSetResponse(t *testing.T, i int, resp response, d limiter.SetDecision, set *limiter.Set) {
	t.Helper()
	checkStatus(t, i, resp, d.Decision)
	var pol, rl []string
	for j := 0; j < set.Len(); j++ {
		l := set.At(j)
		pol = append(pol, fmt.Sprintf("%q;q=%d;w=%d", l.Name, capacityAt(set, j), int64(l.Window/time.Second)))
		ld := d.Limits[j]
		if ld.Name != l.Name {
			t.Fatalf("decision limit %d is %q, want %q", j, ld.Name, l.Name)
		}
		rl = append(rl, fmt.Sprintf("%q;r=%d;t=%d", ld.Name, ld.Remaining, ceilT(ld.RetryAfter, ld.ResetAfter)))
	}
	if got, want := resp.header.Get("RateLimit-Policy"), strings.Join(pol, ", "); got != want {
		t.Errorf("request %d: RateLimit-Policy %q, want %q", i, got, want)
	}
	if got, want := resp.header.Get("RateLimit"), strings.Join(rl, ", "); got != want {
		t.Errorf("request %d: RateLimit %q, want %q", i, got, want)
	}
	checkRetryAfter(t, i, resp, d.Decision)
}

// runSetOverHTTP: a set of 3 per second and 5 per minute over real HTTP on
// a keep-alive connection. The clock moves only when advance says so; for
// a Redis provider on real Redis it is the server's.
func runSetOverHTTP(t *testing.T, p setProvider, advance func(time.Duration)) {
	set := mustSet(t,
		limiter.Limit{Name: "per-second", Rate: limiter.PerSecond(3), Window: time.Second},
		limiter.Limit{Name: "per-minute", Rate: limiter.PerMinute(5), Window: time.Minute})
	rec := &setRecorder{setProvider: p}
	m, err := httplimit.NewSet(rec, set, httplimit.WithLegacyHeaders())
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, m)
	var codes []int
	refusedBy := map[string]int{}
	for i, step := range []time.Duration{0, 0, 0, 0, 1200 * time.Millisecond, 0, 0, 0} {
		advance(step)
		resp := s.get(t, "/")
		d := rec.last(t)
		checkSetResponse(t, i, resp, d, set)
		codes = append(codes, resp.status)
		for _, ld := range d.Limits {
			if ld.Refused {
				refusedBy[ld.Name]++
			}
		}
		// The legacy headers describe the limit with the fewest units left.
		if got := resp.header.Get("X-RateLimit-Remaining"); got != strconv.FormatInt(d.Remaining, 10) {
			t.Errorf("request %d: X-RateLimit-Remaining %q, want %d", i, got, d.Remaining)
		}
	}
	// 3 in the first second, the 4th refused by per-second; after 1.2 s two
	// more (5 per minute), then per-minute refuses.
	if want := "[200 200 200 429 200 200 429 429]"; fmt.Sprint(codes) != want {
		t.Errorf("statuses %v, want %s", codes, want)
	}
	if refusedBy["per-second"] != 1 || refusedBy["per-minute"] != 2 {
		t.Errorf("refusals by limit %v, want per-second 1, per-minute 2", refusedBy)
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

func TestSetOverHTTPLocal(t *testing.T) {
	clk := conformance.NewClock()
	l, err := local.NewAbsolute(limiter.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	runSetOverHTTP(t, l, clk.Advance)
}

// TestSetTiers: the set func picks a tier's set per request; the headers
// follow the set used.
func TestSetTiers(t *testing.T) {
	free := mustSet(t, limiter.Limit{Name: "burst", Rate: limiter.PerSecond(1), Window: time.Second},
		limiter.Limit{Name: "daily", Rate: limiter.PerDay(100), Window: 24 * time.Hour})
	pro := mustSet(t, limiter.Limit{Name: "burst", Rate: limiter.PerSecond(10), Window: time.Second},
		limiter.Limit{Name: "daily", Rate: limiter.PerDay(10_000), Window: 24 * time.Hour})
	l, err := local.NewAbsolute(limiter.WithClock(conformance.NewClock().Now))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	m, err := httplimit.NewSet(l, free,
		httplimit.WithKey(httplimit.KeyByHeader("X-User")),
		httplimit.WithSetFunc(func(r *http.Request) (*limiter.Set, error) {
			if strings.HasPrefix(r.Header.Get("X-User"), "pro-") {
				return pro, nil
			}
			return free, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, m)
	for _, tc := range []struct {
		user, policy string
		admitted     int
	}{
		{"alice", `"burst";q=1;w=1, "daily";q=100;w=86400`, 1},
		{"pro-bob", `"burst";q=10;w=1, "daily";q=10000;w=86400`, 10},
	} {
		n := 0
		for range 12 {
			resp := s.get(t, "/", "X-User", tc.user)
			if resp.status == 200 {
				n++
			}
			if got := resp.header.Get("RateLimit-Policy"); got != tc.policy {
				t.Errorf("%s: RateLimit-Policy %q, want %q", tc.user, got, tc.policy)
			}
		}
		if n != tc.admitted {
			t.Errorf("%s: %d of 12 admitted, want %d", tc.user, n, tc.admitted)
		}
	}
}

// TestSetDenyResult: the deny handler sees every limit, the refusing ones
// marked.
func TestSetDenyResult(t *testing.T) {
	set := mustSet(t, limiter.Limit{Name: "a", Rate: limiter.PerSecond(1), Window: time.Second},
		limiter.Limit{Name: "b", Rate: limiter.PerMinute(10), Window: time.Minute})
	l, err := local.NewAbsolute(limiter.WithClock(conformance.NewClock().Now))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	var names []string
	m, err := httplimit.NewSet(l, set, httplimit.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, res *httplimit.Result) {
		for _, ld := range res.Limits {
			if ld.Refused {
				names = append(names, ld.Name)
			}
		}
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, m)
	s.get(t, "/")
	if resp := s.get(t, "/"); resp.status != 429 || fmt.Sprint(names) != "[a]" {
		t.Errorf("status %d, refused by %v; want 429 by [a]", resp.status, names)
	}
}

// capacityAt is the capacity of set's i-th limit (Set.CapacityAt was).
func capacityAt(set *limiter.Set, i int) int64 {
	c, _ := limiter.Capacity(set.At(i).Rate, set.At(i).Window)
	return c
}
