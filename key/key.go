// Package key validates user keys and builds sluice's Redis key schema,
//
//	<prefix>:{<escaped key>}:<strategy>:<suffix>
//
// whose braces are a Redis Cluster hash tag: every Redis key of one limiter
// key lands in one slot, so one script can touch them all. Any key of 1 to
// MaxLen bytes is accepted; the bytes that would break the schema or a SCAN
// pattern (':', '{', '}', '%', whitespace, control and glob characters) are
// percent-escaped, so two keys never share an escaped form.
package key

import (
	"errors"
	"fmt"
	"strings"
)

// MaxLen is the longest key accepted, in bytes.
const MaxLen = 512

// ErrInvalid is returned for an empty or oversized key.
var ErrInvalid = errors.New("sluice: invalid key")

// Validate reports ErrInvalid unless k is 1 to MaxLen bytes long.
func Validate(k string) error {
	if k == "" {
		return fmt.Errorf("%w: empty", ErrInvalid)
	}
	if len(k) > MaxLen {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalid, len(k), MaxLen)
	}
	return nil
}

// reserved[b] is true for the bytes Escape rewrites.
var reserved = func() (t [256]bool) {
	for b := 0; b <= ' '; b++ {
		t[b] = true
	}
	t[0x7f] = true
	for _, b := range []byte(":{}%*?[]\\") {
		t[b] = true
	}
	return t
}()

const hexDigits = "0123456789ABCDEF"

// Escape returns k with every reserved byte replaced by %XX; a key with
// nothing to escape is returned as it is, without allocating.
func Escape(k string) string {
	extra := 0
	for i := 0; i < len(k); i++ {
		if reserved[k[i]] {
			extra += 2
		}
	}
	if extra == 0 {
		return k
	}
	var b strings.Builder
	b.Grow(len(k) + extra)
	for i := 0; i < len(k); i++ {
		if c := k[i]; reserved[c] {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Unescape reverses Escape. It returns ErrInvalid for a string Escape
// cannot have produced.
func Unescape(s string) (string, error) {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if reserved[c] {
				return "", fmt.Errorf("%w: unescaped %q in %q", ErrInvalid, c, s)
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("%w: truncated escape in %q", ErrInvalid, s)
		}
		hi, lo := unhex(s[i+1]), unhex(s[i+2])
		if hi < 0 || lo < 0 || !reserved[hi<<4|lo] {
			return "", fmt.Errorf("%w: bad escape %q in %q", ErrInvalid, s[i:i+3], s)
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), nil
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}
