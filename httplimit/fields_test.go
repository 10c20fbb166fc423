package httplimit_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-go/sluice/httplimit"
	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/limiter"
)

// TestFieldsMatchHeaders: Fields and SetFields return the bytes the
// middleware writes in RateLimit-Policy and RateLimit for the same
// decision, admitted and refused, over a single limit, a named limit and
// a set.
func TestFieldsMatchHeaders(t *testing.T) {
	for _, name := range []string{"", "api"} {
		clk := conformance.NewClock()
		rec := &recorder{Limiter: newLocal(t, clk, 10*time.Second)}
		s := serve(t, mustNew(t, rec, limiter.Limit{Name: name, Rate: limiter.Every(2, 10*time.Second), Window: 10 * time.Second}))
		for i, step := range []time.Duration{0, 0, 300 * time.Millisecond, 10 * time.Second} {
			clk.Advance(step)
			resp := s.get(t, "/")
			pol, rl := httplimit.Fields(name, 10*time.Second, rec.last(t))
			if got := resp.header.Get("RateLimit-Policy"); got != pol {
				t.Errorf("limit %q, request %d: RateLimit-Policy %q, Fields %q", name, i, got, pol)
			}
			if got := resp.header.Get("RateLimit"); got != rl {
				t.Errorf("limit %q, request %d: RateLimit %q, Fields %q", name, i, got, rl)
			}
		}
	}

	clk := conformance.NewClock()
	set := mustSet(t,
		limiter.Limit{Name: "per-second", Rate: limiter.PerSecond(2), Window: time.Second},
		limiter.Limit{Name: "per-minute", Rate: limiter.PerMinute(3), Window: time.Minute})
	l := newLocal(t, clk, time.Minute).(setProvider)
	rec := &setRecorder{setProvider: l}
	m, err := httplimit.NewSet(rec, set)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, m)
	for i, step := range []time.Duration{0, 0, 0, 1500 * time.Millisecond, 0} {
		clk.Advance(step)
		resp := s.get(t, "/")
		pol, rl := httplimit.SetFields(set, rec.last(t))
		if got := resp.header.Get("RateLimit-Policy"); got != pol {
			t.Errorf("set, request %d: RateLimit-Policy %q, SetFields %q", i, got, pol)
		}
		if got := resp.header.Get("RateLimit"); got != rl {
			t.Errorf("set, request %d: RateLimit %q, SetFields %q", i, got, rl)
		}
	}
}

// TestKeyAddrMatchesKey: KeyAddr, given a request's RemoteAddr and the
// values of the trusted header, keys every case of TestSpoofing's kind as
// Key keys the request, and refuses an unparseable address as Key does.
func TestKeyAddrMatchesKey(t *testing.T) {
	none := mustIPKey(t)
	xff := mustIPKey(t, httplimit.TrustProxies(httplimit.HeaderXForwardedFor, "10.0.0.0/8"))
	fwd := mustIPKey(t, httplimit.TrustProxies(httplimit.HeaderForwarded, "10.0.0.0/8"))
	real := mustIPKey(t, httplimit.TrustProxies(httplimit.HeaderXRealIP, "10.0.0.1"))
	if h := none.Header(); h != "" {
		t.Errorf("Header() of an IPKey trusting no proxy = %q, want \"\"", h)
	}
	if h := (&httplimit.IPKey{}).Header(); h != "" {
		t.Errorf("Header() of the zero IPKey = %q, want \"\"", h)
	}
	for _, tc := range []struct {
		key    *httplimit.IPKey
		header string
		remote string
		values []string
	}{
		{none, "", "203.0.113.9:5000", nil},
		{xff, "X-Forwarded-For", "203.0.113.9:5000", []string{"1.2.3.4"}},
		{xff, "X-Forwarded-For", "10.0.0.1:443", []string{"1.2.3.4, 203.0.113.9"}},
		{xff, "X-Forwarded-For", "10.0.0.3:443", []string{"6.6.6.6, 198.51.100.4", "10.0.0.1,10.0.0.2"}},
		{xff, "X-Forwarded-For", "[::ffff:10.0.0.1]:443", []string{"2001:db8:aaaa:bbbb:1:2:3:4"}},
		{fwd, "Forwarded", "10.0.0.1:443", []string{`for="[64:ff9b::198.51.100.4]:80";proto=https`}},
		{real, "X-Real-Ip", "10.0.0.1:443", []string{"198.51.100.4"}},
		{real, "X-Real-Ip", "10.0.0.1:443", []string{"1.2.3.4", "198.51.100.4"}},
		{none, "", "[2001:0:4136:e378:8000:63bf:3fff:fdd2]:80", nil},
		{none, "", "pipe", nil},
		{xff, "X-Forwarded-For", "", []string{"1.2.3.4"}},
	} {
		if got := tc.key.Header(); got != tc.header {
			t.Errorf("Header() = %q, want %q", got, tc.header)
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.values {
			r.Header.Add(tc.header+"x", v) // never read: not the trusted header
			if tc.header != "" {
				r.Header.Add(tc.header, v)
			}
		}
		want, wantErr := tc.key.Key(r)
		got, err := tc.key.KeyAddr(tc.remote, tc.values)
		if got != want || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("KeyAddr(%q, %q) = %q, %v; Key = %q, %v", tc.remote, tc.values, got, err, want, wantErr)
		}
	}
}
