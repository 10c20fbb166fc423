package key

import (
	"fmt"
	"strings"
)

// Strategy names as they appear in Redis keys.
const (
	Absolute   = "abs"
	Suppressed = "sup"
)

// Suffixes of the Redis keys of one limiter key.
const (
	// Hash is the hash of bucket start (ms) → count plus meta fields.
	Hash = "h"
	// Aux is the second key a strategy may keep beside its hash.
	Aux = "a"
)

// Name returns the Redis key <prefix>:{<escaped k>}:<strategy>:<suffix>.
// It validates k and reports ErrInvalid for an empty or oversized key.
func Name(prefix, k, strategy, suffix string) (string, error) {
	if err := Validate(k); err != nil {
		return "", err
	}
	e := Escape(k)
	var b strings.Builder
	b.Grow(len(prefix) + len(e) + len(strategy) + len(suffix) + 5)
	b.WriteString(prefix)
	b.WriteString(":{")
	b.WriteString(e)
	b.WriteString("}:")
	b.WriteString(strategy)
	b.WriteByte(':')
	b.WriteString(suffix)
	return b.String(), nil
}

// Pattern returns the SCAN MATCH pattern that finds every Redis key written
// under prefix.
func Pattern(prefix string) string { return prefix + ":{*" }

// Parsed is a Redis key of the schema taken apart.
type Parsed struct {
	Prefix, Key, Strategy, Suffix string
}

// Parse takes a Redis key of the schema apart and unescapes the user key.
func Parse(redisKey string) (Parsed, error) {
	open := strings.Index(redisKey, ":{")
	end := strings.LastIndex(redisKey, "}:")
	if open < 1 || end < open+2 {
		return Parsed{}, fmt.Errorf("%w: %q is not a sluice Redis key", ErrInvalid, redisKey)
	}
	rest := strings.Split(redisKey[end+2:], ":")
	if len(rest) != 2 || rest[0] == "" || rest[1] == "" {
		return Parsed{}, fmt.Errorf("%w: %q is not a sluice Redis key", ErrInvalid, redisKey)
	}
	k, err := Unescape(redisKey[open+2 : end])
	if err != nil {
		return Parsed{}, err
	}
	if err := Validate(k); err != nil {
		return Parsed{}, err
	}
	return Parsed{Prefix: redisKey[:open], Key: k, Strategy: rest[0], Suffix: rest[1]}, nil
}
