package redisprov

import (
	"strconv"
	"strings"
)

// The packed layouts the scripts write and the Go code reads, each written
// once here and checked against the scripts by TestLayoutsMatchScripts
// (docs/data-model.md describes the fields).

// A FieldLayout is a hash field holding decimals separated by single
// spaces, in the order of Names.
type FieldLayout struct {
	Field string   // the hash field, "m" or "k"
	Names []string // the values in order, as docs/data-model.md names them
}

// The packed fields of a limiter hash.
var (
	// AbsMeta is an absolute hash's "m": capacity of the latest call, units
	// used in the window, oldest and newest bucket starts (ms), units in
	// the newest bucket.
	AbsMeta = FieldLayout{"m", []string{"c", "u", "o", "n", "nc"}}
	// AbsMetaZero is AbsMeta with the zero mark z, kept by a single hash
	// while an empty closed bucket may be stored: the start of the newest
	// one.
	AbsMetaZero = FieldLayout{"m", []string{"c", "u", "o", "n", "nc", "z"}}
	// AbsSetMeta is AbsMeta of a set's limit, with t, the largest W + B of
	// its writes: the TTL span.
	AbsSetMeta = FieldLayout{"m", []string{"c", "u", "o", "n", "nc", "t"}}
	// SupMeta is a suppressed hash's "m": units observed (offered) in the
	// window, units declined, oldest and newest bucket starts, units
	// offered and declined in the newest bucket.
	SupMeta = FieldLayout{"m", []string{"u", "x", "o", "n", "nc", "nd"}}
	// SupRate is a suppressed hash's "k": soft and hard capacities of the
	// latest call, the cached factor in ppm and when it was computed (ms;
	// 0: none). On a single hash it may be followed by SupCursor.
	SupRate = FieldLayout{"k", []string{"c", "hc", "f", "ft"}}
	// SupCursor is the RetryAfter cursor that may follow SupRate in "k": a
	// live bucket's start less o, the accepted units of the buckets before
	// it, its own accepted units and its link.
	SupCursor = FieldLayout{"k", []string{"rd", "rb", "ra", "rl"}}
	// SupSetRate is SupRate of a set's limit, with the TTL span t.
	SupSetRate = FieldLayout{"k", []string{"c", "hc", "f", "ft", "t"}}
)

// Parse reads s as the layout's decimals, by name; ok is false unless s
// holds exactly len(l.Names) integers separated by single spaces.
func (l FieldLayout) Parse(s string) (map[string]int64, bool) {
	parts := strings.Split(s, " ")
	if len(parts) != len(l.Names) {
		return nil, false
	}
	out := make(map[string]int64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, false
		}
		out[l.Names[i]] = n
	}
	return out, true
}

// A closed bucket's value in a limiter hash is count × LinkUnit + link,
// link (1 ≤ link < 2^32) the distance in ms to the next bucket's start,
// while count < LinkMaxCount, else −count: the sum must stay an integer a
// Lua double holds exactly (below 2^53).
const (
	LinkUnit     = int64(1) << 32
	LinkMaxCount = int64(1) << 21
)

// BucketValue splits a closed bucket's value into its count and its link
// (0 when it has none: −count, or a plain count of an earlier layout).
func BucketValue(v int64) (count, link int64) {
	switch {
	case v >= LinkUnit:
		return v / LinkUnit, v % LinkUnit
	case v < 0:
		return -v, 0
	}
	return v, 0
}

// WriteBack is the mode argument, the last of a script's arguments
// (abs_inc.lua ARGV[11], abs_set.lua ARGV[3 + 4k], sup_inc.lua ARGV[15],
// sup_set.lua ARGV[4 + 6k]), that makes a call the failover's write-back:
// units a local fallback admitted, recorded whatever the key holds.
const WriteBack = "writeback"

// The one-integer replies of abs_inc.lua, sup_inc.lua and abs_set.lua
// (Decision and absReadSet read them).
const (
	// An admission r ≥ 0 is remaining × 2^ShortShift + reset ms, with
	// remaining < ShortMaxRemaining and reset < 2^ShortShift.
	ShortShift        = 32
	ShortMaxRemaining = int64(1) << 21

	// An absolute refusal r < 0 is −v − 1 with v = retry ms ×
	// 2^AbsRetryShift + reset ms, both below 2^AbsRetryShift.
	AbsRetryShift = 26

	// A suppressed decision r < 0 is −v − 1 with v = ((factor ppm × 2 +
	// allowed) × 2^SupFieldBits + retry ms) × 2^SupFieldBits + reset ms,
	// retry and reset below 2^SupFieldBits.
	SupFieldBits   = 16
	SupAllowedBit  = 2 * SupFieldBits
	SupFactorShift = SupAllowedBit + 1
)

// mask returns 2^bits − 1.
func mask(bits uint) int64 { return int64(1)<<bits - 1 }
