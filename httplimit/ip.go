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

// The headers a trusted proxy may name the client in (TrustProxies).
const (
	// HeaderXForwardedFor is "X-Forwarded-For: client, proxy1, proxy2":
	// each proxy appends the address it received the request from.
	HeaderXForwardedFor = "X-Forwarded-For"
	// HeaderForwarded is RFC 7239's "Forwarded: for=client, for=proxy1";
	// only the for= parameter is read.
	HeaderForwarded = "Forwarded"
	// HeaderXRealIP is "X-Real-IP: client", one address set (overwritten)
	// by the proxy.
	HeaderXRealIP = "X-Real-IP"
)

// IPOption configures an IPKey.
type IPOption func(*ipConfig)

type ipConfig struct {
	header  string
	proxies []string
	nat64   []string
	v4, v6  int
}

// TrustProxies says that requests whose immediate peer (RemoteAddr) is in
// one of cidrs ("10.0.0.0/8", "2001:db8::/32", or a single address)
// come through proxies that set header, one of HeaderXForwardedFor,
// HeaderForwarded and HeaderXRealIP. Name the one header your proxies
// overwrite or append to: any other is the client's to forge. Default:
// no proxy is trusted and every header is ignored.
func TrustProxies(header string, cidrs ...string) IPOption {
	return func(c *ipConfig) { c.header, c.proxies = header, append(c.proxies[:0:0], cidrs...) }
}

// IPv6Prefix sets how many leading bits of an IPv6 address make its key.
// Default 64: one ISP customer usually gets a whole /64 (or more) and can
// pick any address in it, so keying by the full address would hand each
// client 2^64 limits. 1 to 128.
func IPv6Prefix(bits int) IPOption { return func(c *ipConfig) { c.v6 = bits } }

// IPv4Prefix sets how many leading bits of an IPv4 address make its key.
// Default 32, the address. 1 to 32.
func IPv4Prefix(bits int) IPOption { return func(c *ipConfig) { c.v4 = bits } }

// NAT64Prefixes names the network's own NAT64 (or SIIT) prefixes, IPv6
// prefixes of 32, 40, 48, 56, 64 or 96 bits ("2001:db8:64::/96"): an
// address in one is keyed by the IPv4 address it embeds where RFC 6052
// puts it for that length, as the well-known 64:ff9b::/96 always is.
// Without it, an address in the local-use 64:ff9b:1::/48 (RFC 8215), whose
// embedding depends on the length the network chose, is keyed in full.
// Default: none.
func NAT64Prefixes(cidrs ...string) IPOption {
	return func(c *ipConfig) { c.nat64 = append(c.nat64[:0:0], cidrs...) }
}

// IPKey finds a request's client address and keys the request by it. Build
// one with NewIPKey; it is immutable and safe for concurrent use. The zero
// IPKey trusts no proxy and groups IPv6 addresses by /64, as KeyByIP does.
type IPKey struct {
	header  string // canonical; "" trusts no header
	kind    int
	proxies []netip.Prefix
	nat64   []netip.Prefix // NAT64Prefixes
	v4, v6  int
}

const (
	kindXFF = iota + 1
	kindForwarded
	kindRealIP
)

// NewIPKey returns an IPKey. It reports limiter.ErrInvalidConfig for an
// unknown header, a CIDR that does not parse, or a prefix length out of
// range.
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
	switch k.header {
	case textproto.CanonicalMIMEHeaderKey(HeaderXForwardedFor):
		k.kind = kindXFF
	case textproto.CanonicalMIMEHeaderKey(HeaderForwarded):
		k.kind = kindForwarded
	case textproto.CanonicalMIMEHeaderKey(HeaderXRealIP):
		k.kind = kindRealIP
	default:
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

// defaultIPKey is KeyByIP's.
var defaultIPKey = &IPKey{v4: 32, v6: 64}

// KeyByIP, the middleware's default KeyFunc, keys a request by its
// immediate peer's address (RemoteAddr), trusting no header, as the zero
// IPKey's Key: "ip:192.0.2.7", "ip:2001:db8:1:2::/64". Behind a proxy
// every request comes from the proxy: use NewIPKey with TrustProxies.
func KeyByIP(r *http.Request) (string, error) { return defaultIPKey.Key(r) }

// Key is a KeyFunc: "ip:" and the client address (ClientAddr) masked to
// the configured prefix, the address alone for a full-length prefix.
//
// An IPv6 address that stands for an IPv4 client (a /64 of them holds
// every client of a translator or relay) is keyed as that IPv4 address,
// masked by IPv4Prefix: under the NAT64 well-known 64:ff9b::/96
// (64:ff9b::192.0.2.7 is "ip:192.0.2.7") or a NAT64Prefixes prefix, Teredo
// 2001::/32 (the client's public address, its last 32 bits inverted) and
// IPv4-compatible ::a.b.c.d (not ::/104: :: and ::1 stay IPv6). The
// local-use 64:ff9b:1::/48 not covered by NAT64Prefixes is keyed in full.
func (k *IPKey) Key(r *http.Request) (string, error) { return k.key(k.ClientAddr(r)) }

// key is Key of the client address a, or err when a could not be found.
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

// The IPv6 prefixes that embed an IPv4 client (IPKey.Key).
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052
	nat64LocalUse  = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215
	teredo         = netip.MustParsePrefix("2001::/32")      // RFC 4380
)

// embedded returns the IPv4 client an IPv6 address a stands for, else a,
// with full true when a must be keyed in full (local-use NAT64).
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

// rfc6052 extracts the IPv4 address embedded after a NAT64 prefix of bits
// (32 to 96, a multiple of 8; RFC 6052 §2.2): the 4 bytes from the end of
// the prefix on, skipping byte 8 (bits 64 to 71, always zero).
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
// is a trusted proxy; then, walking the trusted header from the right
// (the hop nearest the server), each hop that is itself a trusted proxy
// is skipped and the first address that is not is the client. A header
// entry that is not an address ("unknown", an obfuscated identifier,
// garbage) stops the walk at the trusted hop that wrote it; so do the
// left end of the header, when every hop is trusted, and the 32nd hop. A
// hop longer than 128 bytes (a Forwarded element longer than 512) is not
// an address. Entries left of the client are never read, not even to
// split the header into hops: a client can write anything there, but can
// neither choose its key nor make the walk cost more. The address has no
// zone, and IPv4-mapped IPv6 is returned as IPv4. A RemoteAddr that is
// not an address gives a *KeyError with status 500.
func (k *IPKey) ClientAddr(r *http.Request) (netip.Addr, error) {
	var vs []string
	if k.kind != 0 {
		vs = r.Header[k.header]
	}
	return k.clientAddr(r.RemoteAddr, vs)
}

// Header returns the canonical name of the header k trusts
// (TrustProxies), "" when it trusts none: the header whose values
// KeyAddr reads.
func (k *IPKey) Header() string { return k.header }

// KeyAddr is Key for a request that is not an *http.Request, such as a
// gRPC call (package grpclimit): remoteAddr is the peer's address as
// RemoteAddr holds it ("192.0.2.7:443", "[2001:db8::1]:443" or an address
// alone), and values are the trusted header's (Header) in the order
// received, read by the rules of ClientAddr. The key and errors are Key's.
func (k *IPKey) KeyAddr(remoteAddr string, values []string) (string, error) {
	return k.key(k.clientAddr(remoteAddr, values))
}
