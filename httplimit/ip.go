package httplimit

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/textproto"
	"slices"
	"strings"

	"github.com/sluice-go/sluice/limiter"
)

// The headers a trusted proxy may name the client in (TrustProxies):
// "X-Forwarded-For: client, proxy1", to which each proxy appends its peer;
// RFC 7239's "Forwarded: for=client, for=proxy1", of which only for= is
// read; "X-Real-IP: client", which the proxy overwrites.
const (
	HeaderXForwardedFor = "X-Forwarded-For"
	HeaderForwarded     = "Forwarded"
	HeaderXRealIP       = "X-Real-IP"
)

// IPOption configures an IPKey.
type IPOption func(*ipConfig)

type ipConfig struct {
	header  string
	proxies []string
	nat64   []string
	v4, v6  int
}

// TrustProxies says that requests whose immediate peer is in one of cidrs
// ("10.0.0.0/8", or a single address) come through proxies that set
// header, one of the Header constants: name the one your proxies write,
// as any other is the client's to forge. Default: no proxy is trusted and
// every header is ignored.
func TrustProxies(header string, cidrs ...string) IPOption {
	return func(c *ipConfig) { c.header, c.proxies = header, append(c.proxies[:0:0], cidrs...) }
}

// IPv6Prefix sets how many leading bits of an IPv6 address make its key,
// 1 to 128. Default 64: a customer usually gets a whole /64 and can pick
// any address in it.
func IPv6Prefix(bits int) IPOption { return func(c *ipConfig) { c.v6 = bits } }

// IPv4Prefix sets how many leading bits of an IPv4 address make its key,
// 1 to 32. Default 32, the address.
func IPv4Prefix(bits int) IPOption { return func(c *ipConfig) { c.v4 = bits } }

// NAT64Prefixes names the network's own NAT64 (or SIIT) prefixes, of 32,
// 40, 48, 56, 64 or 96 bits ("2001:db8:64::/96"): an address in one is
// keyed by the IPv4 address it embeds (RFC 6052), as in the well-known
// 64:ff9b::/96 always. Default: none, and an address in the local-use
// 64:ff9b:1::/48 (RFC 8215) is keyed in full.
func NAT64Prefixes(cidrs ...string) IPOption {
	return func(c *ipConfig) { c.nat64 = append(c.nat64[:0:0], cidrs...) }
}

// IPKey keys a request by its client address. Build one with NewIPKey; it
// is immutable and safe for concurrent use. The zero IPKey is KeyByIP's:
// it trusts no proxy and groups IPv6 addresses by /64.
type IPKey struct {
	header  string // canonical; "" trusts no header
	kind    int    // an index of trustable + 1; 0: none
	proxies []netip.Prefix
	nat64   []netip.Prefix
	v4, v6  int
}

var trustable = []string{HeaderXForwardedFor, HeaderForwarded, HeaderXRealIP}

const (
	kindXFF = iota + 1
	kindForwarded
	kindRealIP
)

// NewIPKey returns an IPKey, or limiter.ErrInvalidConfig for an unknown
// header, a CIDR that does not parse, or a prefix length out of range.
func NewIPKey(opts ...IPOption) (*IPKey, error) {
	c := ipConfig{v4: 32, v6: 64}
	for _, o := range opts {
		o(&c)
	}
	k := &IPKey{v4: c.v4, v6: c.v6}
	if c.v4 < 1 || c.v4 > 32 {
		return nil, fmt.Errorf("%w: IPv4 prefix /%d (want 1 to 32)", limiter.ErrInvalidConfig, c.v4)
	}
	if c.v6 < 1 || c.v6 > 128 {
		return nil, fmt.Errorf("%w: IPv6 prefix /%d (want 1 to 128)", limiter.ErrInvalidConfig, c.v6)
	}
	for _, s := range c.nat64 {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		switch {
		case err != nil:
			return nil, fmt.Errorf("%w: NAT64 prefix %q: %v", limiter.ErrInvalidConfig, s, err)
		case !p.Addr().Is6() || p.Addr().Is4In6() || !slices.Contains([]int{32, 40, 48, 56, 64, 96}, p.Bits()):
			return nil, fmt.Errorf("%w: NAT64 prefix %q (want an IPv6 prefix of 32, 40, 48, 56, 64 or 96 bits)", limiter.ErrInvalidConfig, s)
		}
		k.nat64 = append(k.nat64, p.Masked())
	}
	if c.header == "" && len(c.proxies) == 0 {
		return k, nil
	}
	k.header = textproto.CanonicalMIMEHeaderKey(c.header)
	for i, h := range trustable {
		if k.header == textproto.CanonicalMIMEHeaderKey(h) {
			k.kind = i + 1
		}
	}
	if k.kind == 0 {
		return nil, fmt.Errorf("%w: trusted header %q (want %s, %s or %s)", limiter.ErrInvalidConfig, c.header, HeaderXForwardedFor, HeaderForwarded, HeaderXRealIP)
	}
	if len(c.proxies) == 0 {
		return nil, fmt.Errorf("%w: %s trusted with no proxy addresses", limiter.ErrInvalidConfig, c.header)
	}
	for _, s := range c.proxies {
		p, err := parsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%w: trusted proxy %q: %v", limiter.ErrInvalidConfig, s, err)
		}
		k.proxies = append(k.proxies, p)
	}
	return k, nil
}

// parsePrefix reads a CIDR or a single address; an IPv4-mapped IPv6
// prefix becomes the IPv4 prefix it maps.
func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return p, err
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return p, err
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if a := p.Addr(); a.Is4In6() {
		bits := p.Bits() - 96
		if bits < 0 {
			return p, fmt.Errorf("an IPv4-mapped prefix shorter than /96")
		}
		p = netip.PrefixFrom(a.Unmap(), bits)
	}
	return p.Masked(), nil
}

var defaultIPKey = &IPKey{v4: 32, v6: 64}

// KeyByIP, the middleware's default KeyFunc, keys a request by its
// immediate peer's address, trusting no header: "ip:192.0.2.7",
// "ip:2001:db8:1:2::/64". Behind a proxy, use NewIPKey with TrustProxies.
func KeyByIP(r *http.Request) (string, error) { return defaultIPKey.Key(r) }

// Key is a KeyFunc: "ip:" and the client address (ClientAddr) masked to
// the configured prefix. An IPv6 address that stands for an IPv4 client is
// keyed as that IPv4 address: under 64:ff9b::/96 or a NAT64Prefixes
// prefix, Teredo 2001::/32 and IPv4-compatible ::a.b.c.d (not ::/104).
func (k *IPKey) Key(r *http.Request) (string, error) { return k.key(k.ClientAddr(r)) }

func (k *IPKey) key(a netip.Addr, err error) (string, error) {
	if err != nil {
		return "", err
	}
	full := false
	if a.Is6() {
		a, full = k.embedded(a)
	}
	bits, zero := k.v4, 32
	if a.Is6() {
		bits, zero = k.v6, 64
	}
	if bits == 0 { // the zero IPKey
		bits = zero
	}
	if full {
		bits = 128
	}
	var buf [64]byte
	b := append(buf[:0], "ip:"...)
	if bits >= a.BitLen() {
		b = a.AppendTo(b)
	} else {
		p, _ := a.Prefix(bits) // bits is in range, a has no zone
		b = p.AppendTo(b)
	}
	return string(b), nil
}

var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052
	nat64LocalUse  = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215
	teredo         = netip.MustParsePrefix("2001::/32")      // RFC 4380
)

// embedded returns the IPv4 client that a stands for, else a; full: key a
// in full (local-use NAT64).
func (k *IPKey) embedded(a netip.Addr) (_ netip.Addr, full bool) {
	b := a.As16()
	for _, p := range k.nat64 {
		if p.Contains(a) {
			return rfc6052(&b, p.Bits()), false
		}
	}
	switch {
	case nat64WellKnown.Contains(a):
		return rfc6052(&b, 96), false
	case teredo.Contains(a):
		return netip.AddrFrom4([4]byte{b[12] ^ 0xff, b[13] ^ 0xff, b[14] ^ 0xff, b[15] ^ 0xff}), false
	case nat64LocalUse.Contains(a):
		return a, true
	case [12]byte(b[:12]) == [12]byte{} && b[12] != 0: // IPv4-compatible, not ::/104
		return netip.AddrFrom4([4]byte(b[12:])), false
	}
	return a, false
}

// rfc6052 extracts the IPv4 address after a NAT64 prefix of bits (RFC
// 6052 §2.2): the 4 bytes from the prefix's end on, skipping byte 8.
func rfc6052(b *[16]byte, bits int) netip.Addr {
	var v [4]byte
	j := bits / 8
	for i := range v {
		if j == 8 {
			j++
		}
		v[i] = b[j]
		j++
	}
	return netip.AddrFrom4(v)
}

// ClientAddr returns the client's address: the immediate peer's unless it
// is a trusted proxy; then the trusted header is walked from the right,
// skipping each hop that is itself a trusted proxy, and the first that is
// not is the client. An entry that is not an address ("unknown", garbage,
// a hop over 128 bytes or a Forwarded element over 512) stops the walk at
// the trusted hop that wrote it, as do the header's left end and the 32nd
// hop. Entries left of the client are never read: a client can neither
// choose its key nor make the walk cost more. The address has no zone,
// IPv4-mapped IPv6 is IPv4. A RemoteAddr that is not an address gives a
// *KeyError with status 500.
func (k *IPKey) ClientAddr(r *http.Request) (netip.Addr, error) {
	var vs []string
	if k.kind != 0 {
		vs = r.Header[k.header]
	}
	return k.clientAddr(r.RemoteAddr, vs)
}

// Header returns the canonical name of the header k trusts, "" for none.
func (k *IPKey) Header() string { return k.header }

// KeyAddr is Key for a request that is not an *http.Request (a gRPC
// call): remoteAddr is the peer's address as RemoteAddr holds it, values
// the trusted header's (Header) in the order received. The key and errors
// are Key's.
func (k *IPKey) KeyAddr(remoteAddr string, values []string) (string, error) {
	return k.key(k.clientAddr(remoteAddr, values))
}
