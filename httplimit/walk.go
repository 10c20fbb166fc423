package httplimit

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Caps of the walk of a trusted header (IPKey.ClientAddr), so that a
// client's 100 KB header costs what a short one does; a member longer than
// its cap is not an address.
const (
	maxWalkHops = 32  // list members read, right to left
	maxHopLen   = 128 // one address (parseHop), an X-Forwarded-For hop
	maxElemLen  = 512 // a Forwarded element ("for=…;by=…;host=…;proto=…")
)

func (k *IPKey) clientAddr(remoteAddr string, vs []string) (netip.Addr, error) {
	peer, ok := parseHop(remoteAddr)
	if !ok {
		if len(remoteAddr) > 64 {
			remoteAddr = remoteAddr[:64] + "…"
		}
		return netip.Addr{}, &KeyError{Status: http.StatusInternalServerError, Reason: fmt.Sprintf("the client address is unknown (RemoteAddr %q)", remoteAddr)}
	}
	if k.kind == 0 || !k.trusted(peer) {
		return peer, nil
	}
	if k.kind == kindRealIP {
		if len(vs) == 1 { // two values: not one set by the proxy
			if a, ok := parseHop(vs[0]); ok {
				return a, nil
			}
		}
		return peer, nil
	}
	cur, hops := peer, 0
	for i := len(vs) - 1; i >= 0; i-- {
		for line := vs[i]; ; {
			if hops == maxWalkHops {
				return cur, nil
			}
			hops++
			var j int
			var ok bool
			if k.kind == kindXFF {
				j, ok = lastHop(line)
			} else {
				j, ok = lastElement(line)
			}
			if !ok {
				return cur, nil
			}
			hop := line[j+1:]
			if k.kind == kindForwarded {
				elem := hop
				if hop = forwardedFor(elem); hop == "" && strings.TrimSpace(elem) == "" {
					if j < 0 { // an empty list member, allowed and ignored
						break
					}
					line = line[:j]
					continue
				}
			}
			a, ok := parseHop(hop)
			if !ok {
				return cur, nil
			}
			if cur = a; !k.trusted(cur) {
				return cur, nil
			}
			if j < 0 {
				break
			}
			line = line[:j]
		}
	}
	return cur, nil
}

// lastHop finds the comma before the right-most hop of an X-Forwarded-For
// line (-1: the hop is the whole line); ok is false for a hop longer than
// maxHopLen.
func lastHop(line string) (comma int, ok bool) {
	from := max(0, len(line)-maxHopLen-1)
	if j := strings.LastIndexByte(line[from:], ','); j >= 0 {
		return from + j, true
	}
	return -1, len(line) <= maxHopLen
}

// lastElement finds the comma before the right-most element of a
// Forwarded value, the last outside a quoted string (-1: the element is
// the whole value); ok is false for an element longer than maxElemLen.
// Quoted strings are found from the right: a quote preceded by an odd run
// of backslashes is escaped.
func lastElement(v string) (comma int, ok bool) {
	from := max(0, len(v)-maxElemLen-1)
	quoted := false
	for i := len(v) - 1; i >= from; i-- {
		switch v[i] {
		case '"':
			n := 0
			for n < i-from && v[i-1-n] == '\\' {
				n++
			}
			if n%2 == 0 {
				quoted = !quoted
			}
		case ',':
			if !quoted {
				return i, true
			}
		}
	}
	return -1, len(v) <= maxElemLen
}

func (k *IPKey) trusted(a netip.Addr) bool {
	for _, p := range k.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHop reads one hop: an address, optionally in brackets, optionally
// with a port ("192.0.2.7", "192.0.2.7:443", "[2001:db8::1]:443",
// "2001:db8::1"), surrounded by optional whitespace. It unmaps IPv4-mapped
// addresses and drops zones.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxHopLen {
		return netip.Addr{}, false
	}
	var a netip.Addr
	ok := false
	// Only "[v6]:port" and "v4:port" can carry a port; a failed
	// ParseAddrPort allocates an error.
	if s[0] == '[' || strings.Count(s, ":") == 1 {
		if ap, err := netip.ParseAddrPort(s); err == nil {
			a, ok = ap.Addr(), true
		}
	}
	if !ok {
		if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
			s = s[1 : len(s)-1]
		}
		var err error
		if a, err = netip.ParseAddr(s); err != nil {
			return netip.Addr{}, false
		}
	}
	a = a.Unmap().WithZone("")
	return a, a.IsValid()
}

// forwardedFor returns the for= value of an RFC 7239 Forwarded element
// (the last, if several), "" without one. Semicolons inside quoted strings
// do not split.
func forwardedFor(elem string) string {
	val := ""
	for elem != "" {
		var pair string
		pair, elem = cutUnquoted(elem, ';')
		name, value, ok := strings.Cut(pair, "=")
		if ok && strings.EqualFold(strings.TrimSpace(name), "for") {
			val = unquote(strings.TrimSpace(value))
		}
	}
	return val
}

// cutUnquoted splits s at the first sep outside a quoted string.
func cutUnquoted(s string, sep byte) (before, after string) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// unquote removes the quotes and backslash escapes of an RFC 7230 quoted
// string; a token is returned as it is, and a malformed quoted string as
// "" (not an address).
func unquote(s string) string {
	if len(s) == 0 || s[0] != '"' {
		return s
	}
	if len(s) < 2 || s[len(s)-1] != '"' {
		return ""
	}
	s = s[1 : len(s)-1]
	if !strings.ContainsRune(s, '\\') {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
