package key

import (
	"errors"
	"fmt"
	"strings"
)

// Strategy names as they appear in Redis keys.
const (
	Absolute   = "abs"
	Suppressed = "sup"
)

// Suffixes of the Redis keys of one limiter key: Hash, the hash of bucket
// start (ms) → count plus meta fields; Aux, a second key beside it.
const (
	Hash = "h"
	Aux  = "a"
)

// Name returns the Redis key <prefix>:{<escaped k>}:<strategy>:<suffix>.
// It validates k and reports ErrInvalid for an empty or oversized key.
func Name(prefix, k, strategy, suffix string) (string, error) {
	if err := Validate(k); err != nil {
		return "", err
	}
	return prefix + ":{" + Escape(k) + "}:" + strategy + ":" + suffix, nil
}

// MaxLimitName is the longest limit name of a set, in bytes.
const MaxLimitName = 64

// ErrInvalidLimitName is returned for a limit name outside the form
// ValidateLimitName accepts.
var ErrInvalidLimitName = errors.New("sluice: invalid limit name")

// ValidateLimitName reports ErrInvalidLimitName unless name is 1 to
// MaxLimitName bytes of lowercase ASCII letters, digits, '_', '-' and '.',
// starting with a letter: an RFC 8941 key without '*', so it is a
// RateLimit-Policy item name as it is and needs no escaping in Redis.
func ValidateLimitName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidLimitName)
	}
	if len(name) > MaxLimitName {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidLimitName, len(name), MaxLimitName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'):
		default:
			return fmt.Errorf("%w: %q (want a lowercase letter, then letters, digits, '_', '-' or '.')", ErrInvalidLimitName, name)
		}
	}
	return nil
}

// LimitName returns the Redis key of one limit of a set on k,
// <prefix>:{<escaped k>}:<strategy>:h:<limit>: the layout and hash tag of
// the single-limit hash. It validates k and the limit name.
func LimitName(prefix, k, strategy, limit string) (string, error) {
	if err := ValidateLimitName(limit); err != nil {
		return "", err
	}
	h, err := Name(prefix, k, strategy, Hash)
	if err != nil {
		return "", err
	}
	return h + ":" + limit, nil
}

// Pattern returns the SCAN MATCH pattern that finds every Redis key written
// under prefix.
func Pattern(prefix string) string { return prefix + ":{*" }

// Parsed is a Redis key of the schema taken apart. Limit is the limit's
// name for the hash of one limit of a set (LimitName), empty otherwise.
type Parsed struct {
	Prefix, Key, Strategy, Suffix, Limit string
}

// Parse takes a Redis key of the schema apart and unescapes the user key.
func Parse(redisKey string) (Parsed, error) {
	open := strings.Index(redisKey, ":{")
	end := strings.LastIndex(redisKey, "}:")
	if open < 1 || end < open+2 {
		return Parsed{}, fmt.Errorf("%w: %q is not a sluice Redis key", ErrInvalid, redisKey)
	}
	rest := strings.Split(redisKey[end+2:], ":")
	if len(rest) < 2 || len(rest) > 3 || rest[0] == "" || rest[1] == "" ||
		len(rest) == 3 && (rest[1] != Hash || ValidateLimitName(rest[2]) != nil) {
		return Parsed{}, fmt.Errorf("%w: %q is not a sluice Redis key", ErrInvalid, redisKey)
	}
	limit := ""
	if len(rest) == 3 {
		limit = rest[2]
	}
	k, err := Unescape(redisKey[open+2 : end])
	if err != nil {
		return Parsed{}, err
	}
	if err := Validate(k); err != nil {
		return Parsed{}, err
	}
	return Parsed{Prefix: redisKey[:open], Key: k, Strategy: rest[0], Suffix: rest[1], Limit: limit}, nil
}
