package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluice-go/sluice/httplimit"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// FuzzClientIP feeds any RemoteAddr and any values of the trusted header
// to each kind of IPKey: never a panic; a key is "ip:" and an address or
// prefix, never empty; an untrusted peer is always keyed by itself.
func FuzzClientIP(f *testing.F) {
	for _, s := range [][3]string{
		{"10.0.0.1:443", "1.2.3.4, 5.6.7.8", ""},
		{"10.0.0.1:443", `for="[2001:db8::1]:80";by=x, for=10.0.0.2`, "for=_x"},
		{"[::ffff:10.0.0.1]:1", "::ffff:1.2.3.4", "unknown"},
		{"203.0.113.9:1", "1.2.3.4", ""},
		{"10.0.0.1:1", `for="\"", for=,,;;=`, `"`},
		{"@", "", ""},
		{"[fe80::1%25eth0]:1", "fe80::2%eth1", "[::1]"},
		{"[64:ff9b::102:304]:1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "::1.2.3.4"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	none := mustIPKey(f)
	keys := []*httplimit.IPKey{none}
	for _, h := range []string{httplimit.HeaderXForwardedFor, httplimit.HeaderForwarded, httplimit.HeaderXRealIP} {
		keys = append(keys, mustIPKey(f, httplimit.TrustProxies(h, "10.0.0.0/8", "::1/128", "fe80::/10")))
	}
	f.Fuzz(func(t *testing.T, remote, v1, v2 string) {
		peerKey, peerErr := none.Key(reqWith(remote, "", v1, v2))
		for i, k := range keys {
			h := []string{"", httplimit.HeaderXForwardedFor, httplimit.HeaderForwarded, httplimit.HeaderXRealIP}[i]
			got, err := k.Key(reqWith(remote, h, v1, v2))
			if (err != nil) != (peerErr != nil) {
				t.Fatalf("%s: Key error %v, but the peer's is %v", h, err, peerErr)
			}
			if err != nil {
				if got != "" {
					t.Fatalf("%s: key %q with error %v", h, got, err)
				}
				continue
			}
			checkIPKey(t, got)
			a, _ := k.ClientAddr(reqWith(remote, h, v1, v2))
			peer, _ := none.ClientAddr(reqWith(remote, "", "", ""))
			trusted := strings.HasPrefix(peer.String(), "10.") || peer == netip.IPv6Loopback() || (peer.Is6() && peer.IsLinkLocalUnicast())
			if !trusted && got != peerKey {
				t.Fatalf("%s: untrusted peer %v keyed %q, want its own key %q", h, peer, got, peerKey)
			}
			if a.Zone() != "" || a.Is4In6() {
				t.Fatalf("%s: client address %v not normalised", h, a)
			}
		}
	})
}

func reqWith(remote, header, v1, v2 string) *http.Request {
	r := &http.Request{Method: "GET", RemoteAddr: remote, Header: http.Header{}}
	if header != "" {
		r.Header[http.CanonicalHeaderKey(header)] = []string{v1, v2}
	}
	return r
}

func checkIPKey(t *testing.T, k string) {
	t.Helper()
	rest, ok := strings.CutPrefix(k, "ip:")
	if !ok || rest == "" || len(k) > key.MaxLen {
		t.Fatalf("key %q: want ip:<address or prefix>", k)
	}
	if _, err := netip.ParseAddr(rest); err == nil {
		return
	}
	if _, err := netip.ParsePrefix(rest); err != nil {
		t.Fatalf("key %q: %q is neither an address nor a prefix", k, rest)
	}
}

// keyGuard fails the test when the middleware hands the limiter an empty
// or over-long key.
type keyGuard struct {
	limiter.Limiter
	t *testing.T
}

func (g keyGuard) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	if k == "" || len(k) > key.MaxLen {
		g.t.Fatalf("the limiter was asked about key %q", k)
	}
	return g.Limiter.Inc(ctx, k, rate, n)
}

// FuzzMiddleware sends requests with any headers through the middleware
// with each key function: never a panic, never an empty key at the
// limiter, and a status from the documented set.
func FuzzMiddleware(f *testing.F) {
	f.Add("10.0.0.1:1", "1.2.3.4", "for=1.2.3.4", "k")
	f.Add("", "", "", "")
	f.Add("[::1]:1", ",,,", `for="`, strings.Repeat("a", 600))
	f.Fuzz(func(t *testing.T, remote, xff, fwd, apiKey string) {
		l := keyGuard{Limiter: newLocal(t, nil, time.Minute), t: t}
		xffKey := mustIPKey(t, httplimit.TrustProxies(httplimit.HeaderXForwardedFor, "10.0.0.0/8", "::1"))
		fwdKey := mustIPKey(t, httplimit.TrustProxies(httplimit.HeaderForwarded, "10.0.0.0/8", "::1"))
		for _, kf := range []httplimit.KeyFunc{httplimit.KeyByIP, xffKey.Key, fwdKey.Key, httplimit.KeyByHeader("X-API-Key"),
			httplimit.Compose(httplimit.Static("r"), httplimit.KeyByHeader("X-API-Key"), xffKey.Key)} {
			m, err := httplimit.New(l, limiter.Limit{Rate: limiter.PerMinute(1), Window: time.Minute}, httplimit.WithKey(kf))
			if err != nil {
				t.Fatal(err)
			}
			h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			r := &http.Request{Method: "GET", RemoteAddr: remote, Header: http.Header{
				"X-Forwarded-For": {xff}, "Forwarded": {fwd}, "X-Api-Key": {apiKey},
			}}
			r = r.WithContext(context.Background())
			for range 2 {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				switch w.Code {
				case 200, 429, 400, 500:
				default:
					t.Fatalf("status %d", w.Code)
				}
			}
		}
	})
}
