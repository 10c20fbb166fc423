// The Redis store's plumbing: the narrow client interface, the probe's
// keys, the clock and TTL arguments, and script errors.

package redisprov

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// Client is what the Redis providers call. *redis.Client,
// *redis.ClusterClient, *redis.Ring and the failover clients satisfy it.
type Client interface {
	redis.Scripter
	Unlink(ctx context.Context, keys ...string) *redis.IntCmd
}

// The package's errors. ErrOpened and ErrBehindFailure are those of a call
// that waited for a local resource (a key's token in the hybrid provider,
// a batch slot) and was not sent: neither is evidence against Redis.
var (
	// ErrOpened: the circuit breaker opened while the call waited; the
	// failure policy answers it.
	ErrOpened = errors.New("sluice: the circuit breaker opened while the call waited")
	// ErrBehindFailure: the call waited behind another call of the same
	// key that failed; it is not sent again, so that no caller waits more
	// than about one timeout behind others.
	ErrBehindFailure = errors.New("sluice: the call waited behind one that failed")
	// ErrRemembered is what a Backend's Decide returns, with its decision,
	// for a refusal hot-key relief answered from memory: the guard returns
	// the decision with a nil error, as not asked of Redis and no reply.
	ErrRemembered = errors.New("answered from memory")

	errReply   = errors.New("malformed script reply")
	errNoReply = errors.New("redis: no reply in the pipeline")
	// errAbandoned: a call not sent because too many calls whose callers
	// left still wait for Redis (bounded).
	errAbandoned = fmt.Errorf("redis: too many calls past their deadline still unanswered: %w", context.DeadlineExceeded)
	// errUnanswered: a probe not sent because the previous one is still
	// unanswered (probeBy).
	errUnanswered = fmt.Errorf("redis: the previous probe is still unanswered: %w", context.DeadlineExceeded)
)

// ProbeKey is the Redis hash the failure policy's probe writes for a
// prefix and strategy: "<prefix>:{%probe}:<strategy>:h". No caller's key
// maps to it ("%pr" is not an escape of package key); the cleaner reads it
// as the strategy's hash it is.
func ProbeKey(prefix, strategy string) string {
	return NodeProbeKey(prefix, "%probe", strategy)
}

// NodeProbeKey is the probe key of one master of a cluster (a guard by
// node): tag, "%probe-<n>", in place of ProbeKey's "%probe".
func NodeProbeKey(prefix, tag, strategy string) string {
	return prefix + ":{" + tag + "}:" + strategy + ":" + key.Hash
}

// ParseProbe reports whether redisKey is a probe key of prefix (ProbeKey
// or NodeProbeKey) for a strategy of package key, and returns that
// strategy.
func ParseProbe(redisKey, prefix string) (strategy string, ok bool) {
	rest, ok := strings.CutPrefix(redisKey, prefix+":{%probe")
	if !ok {
		return "", false
	}
	if d, found := strings.CutPrefix(rest, "-"); found {
		if rest = strings.TrimLeft(d, "0123456789"); len(rest) == len(d) {
			return "", false
		}
	}
	if rest, ok = strings.CutPrefix(rest, "}:"); !ok {
		return "", false
	}
	strategy, suffix, ok := strings.Cut(rest, ":")
	return strategy, ok && suffix == key.Hash && (strategy == key.Absolute || strategy == key.Suppressed)
}

// NowArg is the script's clock argument: "" tells the script to read
// Redis TIME; given WithClock, the time in ms to use instead, whatever it
// is (0 and times before 1970 included).
func NowArg(cfg *window.Config) any {
	if cfg.ClockSet {
		return cfg.NowMs()
	}
	return ""
}

// Int64s reads a script reply that is an array of want integers.
func Int64s(v any, want int) ([]int64, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %T", errReply, v)
	}
	if len(arr) != want {
		return nil, fmt.Errorf("%w: %d values, want %d", errReply, len(arr), want)
	}
	out := make([]int64, len(arr))
	for i, x := range arr {
		if out[i], ok = x.(int64); !ok {
			return nil, fmt.Errorf("%w: value %d is %T", errReply, i, x)
		}
	}
	return out, nil
}

// ClockSlackMs is added to the TTL of every write when WithClock replaces
// Redis TIME.
const ClockSlackMs = 60_000

// TTLMs is the PEXPIRE a write that opens a bucket sets: W + B, so that an
// idle key leaves Redis by itself once its newest bucket is dead. Given
// WithClock, every write sets it, plus ClockSlackMs: Redis counts TTLs by
// its own clock, which a test's fake clock does not follow. Decisions
// follow the given clock either way: the scripts ignore dead buckets.
func TTLMs(cfg *window.Config) int64 {
	ttl := cfg.WindowMs + cfg.BucketMs
	if cfg.ClockSet {
		ttl += ClockSlackMs
	}
	return ttl
}

// MaxFields is the most fields a script reads from one hash in one call
// (every script checks HLEN before an HGETALL): a record of this layout
// holds at most 2 (W/B + 2) bucket fields and a few meta fields, W/B at
// most 500 (limiter.WithBucket).
const MaxFields = 4096

// StateErr reads the error replies of a script about a hash's record "v"
// (docs/data-model.md, The record), and returns any other error as it is:
//   - "SLUICEWINDOW <stored> <call's>", a live hash recorded with another
//     window or bucket: limiter.ErrWindowConflict;
//   - "SLUICELAYOUT <stored>", a record of a layout the scripts do not
//     read: limiter.ErrLayout;
//   - "SLUICESTATE <hash> <field> <value>", a count of 2^53 or more, and
//     "SLUICEFIELDS <hash> <n>", a hash of more than MaxFields fields,
//     both written by another client: limiter.ErrLayout naming the hash.
func StateErr(err error) error {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return err
	}
	msg := re.Error()
	switch {
	case strings.HasPrefix(msg, "SLUICEWINDOW "):
		if f := strings.Fields(msg); len(f) == 7 {
			return fmt.Errorf("%w: stored window %s ms, bucket %s ms; the call's window %s ms, bucket %s ms",
				limiter.ErrWindowConflict, f[2], f[3], f[5], f[6])
		}
		return fmt.Errorf("%w: %s", limiter.ErrWindowConflict, msg)
	case strings.HasPrefix(msg, "SLUICELAYOUT "):
		return fmt.Errorf("%w: record %q", limiter.ErrLayout, strings.TrimPrefix(msg, "SLUICELAYOUT "))
	case strings.Contains(msg, "SLUICEFIELDS "):
		// raised with error() inside a function: Redis prefixes where
		if f := strings.Fields(msg[strings.Index(msg, "SLUICEFIELDS "):]); len(f) >= 3 {
			return fmt.Errorf("%w: hash %q holds %s fields, more than any record of this layout (the scripts read at most %d): written by another client; Reset the key",
				limiter.ErrLayout, f[1], f[2], MaxFields)
		}
	case strings.HasPrefix(msg, "SLUICESTATE "):
		if f := strings.SplitN(msg, " ", 4); len(f) == 4 {
			return fmt.Errorf("%w: hash %q: field %q = %q holds a count out of range (2^53 or more), written by another client; Reset the key",
				limiter.ErrLayout, f[1], f[2], f[3])
		}
	default:
		return err
	}
	return fmt.Errorf("%w: %s", limiter.ErrLayout, msg)
}
