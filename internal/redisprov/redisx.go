// The Redis store's plumbing: the narrow client interface, the clock
// argument and script reply parsing.

package redisprov

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-go/sluice/internal/window"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// Client is what the Redis providers call. *redis.Client,
// *redis.ClusterClient, *redis.Ring and the failover clients satisfy it.
type Client interface {
	redis.Scripter
	Unlink(ctx context.Context, keys ...string) *redis.IntCmd
}

// Errors of a call that waited for a local resource (a key's token in the
// hybrid provider, a batch slot) and was not sent. The failure policy reads
// them: neither is evidence against Redis.
var (
	// ErrOpened: the circuit breaker opened while the call waited; the
	// failure policy answers it.
	ErrOpened = errors.New("sluice: the circuit breaker opened while the call waited")
	// ErrBehindFailure: the call waited behind another call of the same
	// key that failed; it is not sent again, so that no caller waits more
	// than about one timeout behind others.
	ErrBehindFailure = errors.New("sluice: the call waited behind one that failed")
)

// ProbeKey is the Redis hash the failure policy's probe writes for a
// prefix and strategy: "<prefix>:{%probe}:<strategy>:h", a hash of the
// strategy's layout with its record and TTL. "%pr" is not an escape that
// package key produces, so no caller's key maps to it (key.Parse refuses
// it); the cleaner reads it as the strategy's hash it is.
func ProbeKey(prefix, strategy string) string {
	return prefix + ":{" + probeKeyPart + "}:" + strategy + ":" + key.Hash
}

// probeKeyPart is the part of ProbeKey between the braces.
const probeKeyPart = "%probe"

// NodeProbeKey is the probe key of one master of a cluster (a guard by
// node): tag, "%probe-<n>", in place of ProbeKey's "%probe".
func NodeProbeKey(prefix, tag, strategy string) string {
	return prefix + ":{" + tag + "}:" + strategy + ":" + key.Hash
}

// ParseProbe reports whether redisKey is ProbeKey(prefix, strategy) for
// some strategy of package key, and returns that strategy.
func ParseProbe(redisKey, prefix string) (strategy string, ok bool) {
	rest, ok := strings.CutPrefix(redisKey, prefix+":{"+probeKeyPart)
	if !ok {
		return "", false
	}
	// "%probe}:", or a node's "%probe-<n>}:"
	if d, found := strings.CutPrefix(rest, "-"); found {
		i := 0
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == 0 {
			return "", false
		}
		rest = d[i:]
	}
	if rest, ok = strings.CutPrefix(rest, "}:"); !ok {
		return "", false
	}
	strategy, suffix, ok := strings.Cut(rest, ":")
	return strategy, ok && suffix == key.Hash && (strategy == key.Absolute || strategy == key.Suppressed)
}

// NowArg is the script's clock argument: an empty string tells the script
// to read Redis TIME; an integer (given WithClock) is the time in ms to use
// instead, whatever instant it is (0 and times before 1970 included).
func NowArg(cfg *window.Config) any {
	if cfg.ClockSet {
		return cfg.NowMs()
	}
	return ""
}

// Int64s reads a script reply that is an array of integers.
func Int64s(v any, want int) ([]int64, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected script reply %T", v)
	}
	if want > 0 && len(arr) != want {
		return nil, fmt.Errorf("script reply has %d values, want %d", len(arr), want)
	}
	out := make([]int64, len(arr))
	for i, x := range arr {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("script reply value %d is %T, want an integer", i, x)
		}
		out[i] = n
	}
	return out, nil
}

// ClockSlackMs is added to the TTL of every write when WithClock replaces
// Redis TIME.
const ClockSlackMs = 60_000

// TTLMs is the PEXPIRE a write that opens a bucket sets: W + B, so that an
// idle key leaves Redis by itself as soon as its newest bucket is dead (a
// join of the newest bucket keeps the TTL set when it opened). Given
// WithClock, every write sets it, with a minute of slack: the script's
// clock is not the one Redis counts TTLs by, a test's fake clock may stand
// still while real time runs, and a TTL of W + B real milliseconds would
// delete state the given clock still calls live. Decisions follow the
// given clock either way, since the scripts ignore dead buckets whatever
// the TTL.
func TTLMs(cfg *window.Config) int64 {
	ttl := cfg.WindowMs + cfg.BucketMs
	if cfg.ClockSet {
		ttl += ClockSlackMs
	}
	return ttl
}

// LinkUnit is 2^32: a closed bucket's value in a limiter hash is
// count × LinkUnit + link, where link (1 ≤ link < 2^32) is the distance in
// ms to the next bucket's start, or −count when count ≥ LinkMaxCount, 2^21
// (the sum would not fit a double exactly) (docs/data-model.md).
const LinkUnit = int64(1) << 32

// BucketValue splits a closed bucket's value into its count and its link
// (0 when it has none: −count, or a plain count written by an earlier
// layout).
func BucketValue(v int64) (count, link int64) {
	switch {
	case v >= LinkUnit:
		return v / LinkUnit, v % LinkUnit
	case v < 0:
		return -v, 0
	}
	return v, 0
}

// MaxFields is the most fields a script reads from one hash in one call
// (every script checks HLEN before an HGETALL): a record of this layout
// holds at most 2 (W/B + 2) bucket fields and a few meta fields, W/B at
// most 500 (limiter.WithBucket).
const MaxFields = 4096

// StateErr reads the error replies a script gives for a hash's record "v"
// (docs/data-model.md, The record): "SLUICEWINDOW <stored> <call's>", a
// live hash recorded with another window or bucket, is
// limiter.ErrWindowConflict, "SLUICELAYOUT <stored>", a record of a
// layout these scripts do not read, limiter.ErrLayout, and "SLUICESTATE
// <hash> <field> <value>", a live hash holding a count no write of this
// layout makes (2^53 or more, set by another client), limiter.ErrLayout
// naming the hash and the field. "SLUICEFIELDS <hash> <n>", raised before
// a script would read a hash whole that holds more than MaxFields fields
// (another client's: no record of this layout holds a quarter of that),
// is limiter.ErrLayout naming the hash: a padded hash fails its own calls
// at once instead of holding Redis for every key. Any other error is
// returned as it is.
func StateErr(err error) error {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return err
	}
	msg := re.Error()
	switch {
	case strings.HasPrefix(msg, "SLUICEWINDOW "):
		f := strings.Fields(msg)
		if len(f) == 7 {
			return fmt.Errorf("%w: stored window %s ms, bucket %s ms; the call's window %s ms, bucket %s ms",
				limiter.ErrWindowConflict, f[2], f[3], f[5], f[6])
		}
		return fmt.Errorf("%w: %s", limiter.ErrWindowConflict, msg)
	case strings.HasPrefix(msg, "SLUICELAYOUT "):
		return fmt.Errorf("%w: record %q", limiter.ErrLayout, strings.TrimPrefix(msg, "SLUICELAYOUT "))
	case strings.Contains(msg, "SLUICEFIELDS "):
		// raised with error() inside a function: Redis appends where
		if f := strings.Fields(msg[strings.Index(msg, "SLUICEFIELDS "):]); len(f) >= 3 {
			return fmt.Errorf("%w: hash %q holds %s fields, more than any record of this layout (the scripts read at most %d): written by another client; Reset the key",
				limiter.ErrLayout, f[1], f[2], MaxFields)
		}
		return fmt.Errorf("%w: %s", limiter.ErrLayout, msg)
	case strings.HasPrefix(msg, "SLUICESTATE "):
		if f := strings.SplitN(msg, " ", 4); len(f) == 4 {
			return fmt.Errorf("%w: hash %q: field %q = %q holds a count out of range (2^53 or more), written by another client; Reset the key",
				limiter.ErrLayout, f[1], f[2], f[3])
		}
		return fmt.Errorf("%w: %s", limiter.ErrLayout, msg)
	}
	return err
}
