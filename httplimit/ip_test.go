package httplimit_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-go/sluice/httplimit"
	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/limiter"
)

func mustIPKey(t testing.TB, opts ...httplimit.IPOption) *httplimit.IPKey {
	t.Helper()
	k, err := httplimit.NewIPKey(opts...)
	if err != nil {
		t.Fatalf("NewIPKey: %v", err)
	}
	return k
}

// TestSpoofing: who picks the key, for clients behind no proxy, one
// trusted proxy and a chain of them, with forged headers.
func TestSpoofing(t *testing.T) {
	none := mustIPKey(t)
	xff := mustIPKey(t, httplimit.TrustProxies(httplimit.HeaderXForwardedFor, "10.0.0.0/8", "2001:db8:ffff::/48"))
	fwd := mustIPKey(t, httplimit.TrustProxies(httplimit.HeaderForwarded, "10.0.0.0/8", "2001:db8:ffff::/48"))
	real := mustIPKey(t, httplimit.TrustProxies(httplimit.HeaderXRealIP, "10.0.0.1"))
	type hdr = []string
	for _, tc := range []struct {
		name   string
		key    *httplimit.IPKey
		remote string
		hdr    hdr // name, value pairs, in order (repeats make several lines)
		want   string
	}{
		// No proxy trusted: every header is ignored.
		{"no proxy, forged XFF", none, "203.0.113.9:5000", hdr{"X-Forwarded-For", "1.2.3.4"}, "ip:203.0.113.9"},
		{"no proxy, forged Forwarded", none, "203.0.113.9:5000", hdr{"Forwarded", "for=1.2.3.4"}, "ip:203.0.113.9"},
		{"no proxy, forged X-Real-IP", none, "203.0.113.9:5000", hdr{"X-Real-IP", "1.2.3.4"}, "ip:203.0.113.9"},
		{"XFF trusted, peer not a proxy", xff, "203.0.113.9:5000", hdr{"X-Forwarded-For", "1.2.3.4"}, "ip:203.0.113.9"},

		// One trusted proxy: the right-most untrusted entry.
		{"one proxy", xff, "10.0.0.1:443", hdr{"X-Forwarded-For", "203.0.113.9"}, "ip:203.0.113.9"},
		{"one proxy, client forged two entries", xff, "10.0.0.1:443", hdr{"X-Forwarded-For", "1.2.3.4, 5.6.7.8, 203.0.113.9"}, "ip:203.0.113.9"},
		{"one proxy, forged trusted-looking entry", xff, "10.0.0.1:443", hdr{"X-Forwarded-For", "10.9.9.9, 203.0.113.9"}, "ip:203.0.113.9"},
		{"one proxy, no header", xff, "10.0.0.1:443", nil, "ip:10.0.0.1"},
		{"one proxy, garbage from the proxy", xff, "10.0.0.1:443", hdr{"X-Forwarded-For", "1.2.3.4, unknown"}, "ip:10.0.0.1"},
		{"one proxy, port in entry", xff, "10.0.0.1:443", hdr{"X-Forwarded-For", "203.0.113.9:1234"}, "ip:203.0.113.9"},

		// A chain: the client's forged entries sit left of its real
		// address, which the first proxy appended.
		{"chain of three", xff, "10.0.0.3:443", hdr{"X-Forwarded-For", "6.6.6.6, 7.7.7.7, 198.51.100.4, 10.0.0.1, 10.0.0.2"}, "ip:198.51.100.4"},
		{"chain over two lines", xff, "10.0.0.3:443", hdr{"X-Forwarded-For", "6.6.6.6, 198.51.100.4", "X-Forwarded-For", "10.0.0.1,10.0.0.2"}, "ip:198.51.100.4"},
		{"chain, every hop trusted", xff, "10.0.0.3:443", hdr{"X-Forwarded-For", "10.0.0.1, 10.0.0.2"}, "ip:10.0.0.1"},
		{"chain, IPv6 proxies", xff, "[2001:db8:ffff::1]:443", hdr{"X-Forwarded-For", "6.6.6.6, 2001:db8:aaaa:bbbb:1:2:3:4, 2001:db8:ffff::2"}, "ip:2001:db8:aaaa:bbbb::/64"},

		// RFC 7239 Forwarded.
		{"Forwarded, one proxy", fwd, "10.0.0.1:443", hdr{"Forwarded", "for=203.0.113.9;proto=https"}, "ip:203.0.113.9"},
		{"Forwarded, forged", fwd, "10.0.0.2:443", hdr{"Forwarded", `for=1.2.3.4, for="[2001:db8:cafe::17]:4711";by=10.0.0.1, for=10.0.0.1`}, "ip:2001:db8:cafe::/64"},
		{"Forwarded, quoted comma", fwd, "10.0.0.1:443", hdr{"Forwarded", `for="1.2.3.4, 10.0.0.9";proto=http, for=198.51.100.4`}, "ip:198.51.100.4"},
		{"Forwarded, obfuscated client", fwd, "10.0.0.1:443", hdr{"Forwarded", "for=_hidden"}, "ip:10.0.0.1"},
		{"Forwarded, unknown", fwd, "10.0.0.1:443", hdr{"Forwarded", "for=unknown"}, "ip:10.0.0.1"},
		{"Forwarded, FOR in capitals", fwd, "10.0.0.1:443", hdr{"Forwarded", "By=10.0.0.1;FOR=198.51.100.4"}, "ip:198.51.100.4"},
		{"Forwarded ignored when XFF is the trusted header", xff, "10.0.0.1:443", hdr{"Forwarded", "for=1.2.3.4", "X-Forwarded-For", "198.51.100.4"}, "ip:198.51.100.4"},
		{"XFF ignored when Forwarded is the trusted header", fwd, "10.0.0.1:443", hdr{"X-Forwarded-For", "1.2.3.4", "Forwarded", "for=198.51.100.4"}, "ip:198.51.100.4"},

		// X-Real-IP.
		{"X-Real-IP from the proxy", real, "10.0.0.1:443", hdr{"X-Real-IP", "198.51.100.4"}, "ip:198.51.100.4"},
		{"X-Real-IP from another peer", real, "10.0.0.2:443", hdr{"X-Real-IP", "198.51.100.4"}, "ip:10.0.0.2"},
		{"X-Real-IP twice", real, "10.0.0.1:443", hdr{"X-Real-IP", "1.2.3.4", "X-Real-IP", "198.51.100.4"}, "ip:10.0.0.1"},
		{"X-Real-IP garbage", real, "10.0.0.1:443", hdr{"X-Real-IP", "nope"}, "ip:10.0.0.1"},

		// Normalisation.
		{"IPv4-mapped peer", none, "[::ffff:1.2.3.4]:80", nil, "ip:1.2.3.4"},
		{"IPv4-mapped in XFF", xff, "10.0.0.1:443", hdr{"X-Forwarded-For", "::ffff:1.2.3.4"}, "ip:1.2.3.4"},
		{"IPv4-mapped proxy", xff, "[::ffff:10.0.0.1]:443", hdr{"X-Forwarded-For", "1.2.3.4"}, "ip:1.2.3.4"},
		{"IPv6 grouped by /64", none, "[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:80", nil, "ip:2001:db8:1:2::/64"},
		{"IPv6 with a zone", none, "[fe80::1%eth0]:80", nil, "ip:fe80::/64"},
		{"bare address as RemoteAddr", none, "192.0.2.1", nil, "ip:192.0.2.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				r.Header.Add(tc.hdr[i], tc.hdr[i+1])
			}
			got, err := tc.key.Key(r)
			if err != nil || got != tc.want {
				t.Errorf("Key(RemoteAddr %s, %q) = %q, %v; want %q", tc.remote, tc.hdr, got, err, tc.want)
			}
		})
	}
}

// TestSameSlash64 shares one limit between two addresses of one /64 and
// gives a neighbouring /64 its own; a mapped address equals its IPv4 form.
func TestSameSlash64(t *testing.T) {
	key := func(remote string, opts ...httplimit.IPOption) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		k, err := mustIPKey(t, opts...).Key(r)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a, b, c := key("[2001:db8:0:1::1]:1"), key("[2001:db8:0:1:ffff:ffff:ffff:ffff]:2"), key("[2001:db8:0:2::1]:1")
	if a != b || a == c {
		t.Errorf("keys %q, %q, %q: want the first two equal and the third different", a, b, c)
	}
	if k1, k2 := key("[::ffff:1.2.3.4]:1"), key("1.2.3.4:2"); k1 != k2 {
		t.Errorf("::ffff:1.2.3.4 keyed %q, 1.2.3.4 keyed %q", k1, k2)
	}
	if k := key("[2001:db8::1]:1", httplimit.IPv6Prefix(128)); k != "ip:2001:db8::1" {
		t.Errorf("IPv6Prefix(128): %q", k)
	}
	if k := key("[2001:db8:1:2:3::1]:1", httplimit.IPv6Prefix(48)); k != "ip:2001:db8:1::/48" {
		t.Errorf("IPv6Prefix(48): %q", k)
	}
	if k := key("192.0.2.77:1", httplimit.IPv4Prefix(24)); k != "ip:192.0.2.0/24" {
		t.Errorf("IPv4Prefix(24): %q", k)
	}

	// Over the middleware: two addresses of one /64 share one limit of 2.
	rec := &recorder{Limiter: newLocal(t, conformance.NewClock(), time.Minute)}
	m := mustNew(t, rec, limiter.Limit{Rate: limiter.PerMinute(2), Window: time.Minute})
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	h := m.Handler(ok)
	var codes []int
	for _, remote := range []string{"[2001:db8:0:1::1]:1", "[2001:db8:0:1::2]:1", "[2001:db8:0:1::3]:1", "[2001:db8:0:2::1]:1"} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		h.ServeHTTP(w, r)
		codes = append(codes, w.Code)
	}
	if fmt.Sprint(codes) != "[200 200 429 200]" {
		t.Errorf("statuses %v, want [200 200 429 200]", codes)
	}
}

// TestUnparseableRemoteAddr: no client address is a 500 from the error
// handler, never a panic or an empty key.
func TestUnparseableRemoteAddr(t *testing.T) {
	for _, remote := range []string{"", "@", "pipe", "[::1", "1.2.3.4:x:y"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		k, err := httplimit.KeyByIP(r)
		var ke *httplimit.KeyError
		if k != "" || !errors.As(err, &ke) || ke.Status != 500 {
			t.Errorf("KeyByIP(RemoteAddr %q) = %q, %v; want a *KeyError with status 500", remote, k, err)
		}
	}
}

// TestSpoofingOverHTTP: a real client on loopback with no trusted proxy
// rotates a forged X-Forwarded-For on every request and is still limited
// by its own address.
func TestSpoofingOverHTTP(t *testing.T) {
	rec := &recorder{Limiter: newLocal(t, conformance.NewClock(), time.Minute)}
	var keys []string
	m := mustNew(t, rec, limiter.Limit{Rate: limiter.PerMinute(3), Window: time.Minute},
		httplimit.WithKey(func(r *http.Request) (string, error) {
			k, err := httplimit.KeyByIP(r)
			keys = append(keys, k) // one client, requests in sequence
			return k, err
		}))
	s := serve(t, m)
	var codes []int
	for i := range 5 {
		codes = append(codes, s.get(t, "/", "X-Forwarded-For", fmt.Sprintf("1.2.3.%d", i), "X-Real-IP", fmt.Sprintf("5.6.7.%d", i)).status)
	}
	if fmt.Sprint(codes) != "[200 200 200 429 429]" {
		t.Errorf("statuses %v, want [200 200 200 429 429]", codes)
	}
	for _, k := range keys {
		if k != "ip:127.0.0.1" {
			t.Errorf("key %q, want ip:127.0.0.1 (the real peer)", k)
		}
	}
}

// TestEmbeddedIPv4Keys: IPv6 addresses that stand for an IPv4 client are
// keyed by it, so the clients behind one translator or relay never share
// a /64 key; other IPv6 addresses keep their /64.
func TestEmbeddedIPv4Keys(t *testing.T) {
	def := mustIPKey(t)
	own := mustIPKey(t, httplimit.NAT64Prefixes("2001:db8:64::/96", "2001:db8:100::/40", "2001:db8:200::/48", "3fff:64::/32"),
		httplimit.IPv4Prefix(24))
	for _, tt := range []struct {
		name string
		k    *httplimit.IPKey
		addr string
		want string
	}{
		{"NAT64 well-known", def, "64:ff9b::1.2.3.4", "ip:1.2.3.4"},
		{"NAT64 well-known, another client", def, "64:ff9b::5.6.7.8", "ip:5.6.7.8"},
		{"NAT64 well-known, hex", def, "64:ff9b::c000:207", "ip:192.0.2.7"},
		{"NAT64 local-use, in full", def, "64:ff9b:1:2:3:4:102:304", "ip:64:ff9b:1:2:3:4:102:304"},
		{"NAT64 local-use, another client", def, "64:ff9b:1:2:3:4:506:708", "ip:64:ff9b:1:2:3:4:506:708"},
		{"Teredo", def, "2001:0:4136:e378:8000:63bf:3fff:fdd2", "ip:192.0.2.45"},
		{"Teredo, another client", def, "2001:0:4136:e378:8000:63bf:f6ff:fdd2", "ip:9.0.2.45"},
		{"IPv4-compatible", def, "::1.2.3.4", "ip:1.2.3.4"},
		{"IPv4-compatible, another client", def, "::5.6.7.8", "ip:5.6.7.8"},
		{"loopback stays IPv6", def, "::1", "ip:::/64"},
		{"::/104 stays IPv6", def, "::0.2.3.4", "ip:::/64"},
		{"IPv4-mapped", def, "::ffff:1.2.3.4", "ip:1.2.3.4"},
		{"native IPv6", def, "2001:db8:1:2::1", "ip:2001:db8:1:2::/64"},
		{"next to Teredo", def, "2001:1::1.2.3.4", "ip:2001:1::/64"},
		{"next to NAT64", def, "64:ff9b:0:0:1::1.2.3.4", "ip:64:ff9b::/64"},
		{"own /96", own, "2001:db8:64::192.0.2.7", "ip:192.0.2.0/24"},
		{"own /40", own, "2001:db8:1c0:2:7::", "ip:192.0.2.0/24"},
		{"own /48", own, "2001:db8:200:c000:2:700::", "ip:192.0.2.0/24"},
		{"own /32", own, "3fff:64:c000:207::", "ip:192.0.2.0/24"},
		{"own prefixes keep the defaults", own, "64:ff9b::1.2.3.4", "ip:1.2.3.0/24"},
		{"own key, native IPv6", own, "2001:db8:1:2::1", "ip:2001:db8:1:2::/64"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "[" + tt.addr + "]:1"
		got, err := tt.k.Key(r)
		if err != nil || got != tt.want {
			t.Errorf("%s: Key(%s) = %q, %v; want %q", tt.name, tt.addr, got, err, tt.want)
		}
	}
	for _, bad := range []string{"64:ff9b::/97", "2001:db8::/36", "2001:db8::/72", "192.0.2.0/24", "::ffff:0:0/96", "nope"} {
		if _, err := httplimit.NewIPKey(httplimit.NAT64Prefixes(bad)); !errors.Is(err, limiter.ErrInvalidConfig) {
			t.Errorf("NAT64Prefixes(%q): error %v, want ErrInvalidConfig", bad, err)
		}
	}
}

// TestWalkCaps: the walk of a trusted header reads at most 32 hops from
// the right, a hop of at most 128 bytes (a Forwarded element of at most
// 512), and finds quoted strings from the right; the client's bytes left
// of its own entry, however many, change nothing.
func TestWalkCaps(t *testing.T) {
	xff := mustIPKey(t, httplimit.TrustProxies(httplimit.HeaderXForwardedFor, "10.0.0.0/8"))
	fwd := mustIPKey(t, httplimit.TrustProxies(httplimit.HeaderForwarded, "10.0.0.0/8"))
	junk := strings.Repeat("a", 100_000)
	chain := func(sep string, n int) string { // n trusted hops, 10.0.0.1 the right-most
		hops := make([]string, n)
		for i := range hops {
			hops[n-1-i] = fmt.Sprintf("%s10.0.%d.%d", sep, i/250, i%250+1)
		}
		return strings.Join(hops, ", ")
	}
	for _, tc := range []struct {
		name  string
		key   *httplimit.IPKey
		value string
		want  string
	}{
		{"XFF, 100 KB left of the client", xff, junk + ", 198.51.100.4, 10.0.0.2", "ip:198.51.100.4"},
		{"Forwarded, 100 KB left of the client", fwd, "for=" + junk + ", for=198.51.100.4, for=10.0.0.2", "ip:198.51.100.4"},
		{"Forwarded, 100 KB quoted left of the client", fwd, `for="` + junk + `", for=198.51.100.4`, "ip:198.51.100.4"},
		{"Forwarded, unterminated quote left of the client", fwd, `for="` + junk + `, for=198.51.100.4`, "ip:198.51.100.4"},
		{"XFF, a 100 KB hop", xff, junk, "ip:10.0.0.1"},
		{"Forwarded, a 100 KB element", fwd, "for=198.51.100.4;host=" + junk, "ip:10.0.0.1"},
		{"XFF, a 128-byte hop", xff, strings.Repeat(" ", 128-len("198.51.100.4")) + "198.51.100.4", "ip:198.51.100.4"},
		{"XFF, a 129-byte hop", xff, strings.Repeat(" ", 129-len("198.51.100.4")) + "198.51.100.4", "ip:10.0.0.1"},
		{"Forwarded, a 512-byte element", fwd, "for=198.51.100.4;host=" + strings.Repeat("h", 512-len("for=198.51.100.4;host=")), "ip:198.51.100.4"},
		{"Forwarded, a 513-byte element", fwd, "for=198.51.100.4;host=" + strings.Repeat("h", 513-len("for=198.51.100.4;host=")), "ip:10.0.0.1"},
		{"XFF, 31 trusted hops then the client", xff, "198.51.100.4, " + chain("", 31), "ip:198.51.100.4"},
		{"XFF, 32 trusted hops then the client", xff, "198.51.100.4, " + chain("", 32), "ip:10.0.0.32"},
		{"XFF, 4,000 trusted hops", xff, chain("", 4000), "ip:10.0.0.32"},
		{"Forwarded, 31 trusted hops then the client", fwd, "for=198.51.100.4, " + chain("for=", 31), "ip:198.51.100.4"},
		{"Forwarded, 32 trusted hops then the client", fwd, "for=198.51.100.4, " + chain("for=", 32), "ip:10.0.0.32"},
		{"Forwarded, empty members", fwd, "for=198.51.100.4,, ,for=10.0.0.2,", "ip:198.51.100.4"},
		{"Forwarded, escaped quote and comma in a quoted string", fwd, `for=198.51.100.4, for=10.0.0.2;host="a\",b"`, "ip:198.51.100.4"},
		{"Forwarded, escaped backslash before a closing quote", fwd, `for=198.51.100.4, for=10.0.0.2;host="a\\,b\\"`, "ip:198.51.100.4"},
		{"Forwarded, quoted semicolon", fwd, `for=10.0.0.2;host="x;for=1.2.3.4", for=198.51.100.4`, "ip:198.51.100.4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := httplimit.HeaderXForwardedFor
			if tc.key == fwd {
				h = httplimit.HeaderForwarded
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "10.0.0.1:443"
			r.Header.Set(h, tc.value)
			got, err := tc.key.Key(r)
			if err != nil || got != tc.want {
				t.Errorf("Key = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// BenchmarkClientIP100KB walks 100 KB headers of each shape through
// X-Forwarded-For and Forwarded (docs/benchmarks.md, HTTP middleware): the
// walk's work is capped, so each costs what a short header costs, and
// Forwarded at most about twice X-Forwarded-For.
func BenchmarkClientIP100KB(b *testing.B) {
	const size = 100_000
	fill := func(unit, last string) string {
		return strings.Repeat(unit, (size-len(last))/len(unit)) + last
	}
	xff := mustIPKey(b, httplimit.TrustProxies(httplimit.HeaderXForwardedFor, "10.0.0.0/8"))
	fwd := mustIPKey(b, httplimit.TrustProxies(httplimit.HeaderForwarded, "10.0.0.0/8"))
	for _, shape := range []struct{ name, xff, fwd string }{
		{"ClientLeftJunk", fill("1.2.3.4, ", "198.51.100.4, 10.0.0.2"), fill("for=1.2.3.4, ", "for=198.51.100.4, for=10.0.0.2")},
		{"TrustedChain", fill("10.0.0.9, ", "10.0.0.2"), fill("for=10.0.0.9, ", "for=10.0.0.2")},
		{"OneLongHop", fill("a", ""), "for=" + fill("a", "")},
		{"QuotedIPv6", fill("[2001:db8::1]:80, ", "[2001:db8:cafe::17]:4711"), fill(`for="[2001:db8::1]:80", `, `for="[2001:db8:cafe::17]:4711"`)},
	} {
		for _, h := range []struct {
			name, header, value string
			k                   *httplimit.IPKey
		}{
			{"XForwardedFor", httplimit.HeaderXForwardedFor, shape.xff, xff},
			{"Forwarded", httplimit.HeaderForwarded, shape.fwd, fwd},
		} {
			b.Run(shape.name+"/"+h.name, func(b *testing.B) {
				r := httptest.NewRequest("GET", "/", nil)
				r.RemoteAddr = "10.0.0.1:443"
				r.Header.Set(h.header, h.value)
				b.ReportAllocs()
				for range b.N {
					if _, err := h.k.ClientAddr(r); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
