package limiter

import (
	"fmt"
	"time"

	"github.com/sluice-go/sluice/internal/settings"
)

// Option configures a provider. A provider accepts only the options it
// reads: any other (a Redis option given to local, a suppressed one to an
// absolute limiter) is ErrInvalidConfig at New, naming the option, the
// provider and its strategy (docs/operations.md, Options across
// providers). A bad value is ErrInvalidConfig at New too; options never
// panic. A nil Option is ignored.
type Option func(*config)

// config is what options set.
type config = settings.Config[Observer, FailurePolicy, StateChange]

// option is the Option named name that records its name, then calls set.
func option(name string, set func(*config)) Option {
	return func(c *config) {
		c.Record(name)
		set(c)
	}
}

// WithWindow sets the sliding window W: whole milliseconds from 1 ms to 31
// days. Default 1 minute. Limiters of other windows (or buckets) on one
// prefix and strategy conflict (ErrWindowConflict).
func WithWindow(d time.Duration) Option {
	return option(settings.OptWindow, func(c *config) { c.Window = d })
}

// WithBucket sets the coalescing granularity B: calls within B of a key's
// newest bucket count in it, so a unit counts for W to W + B. Default
// W/100 in whole milliseconds, at least 1 ms; 1 ms ≤ B ≤ W and W/B ≤ 500
// (docs/data-model.md, Choosing B).
func WithBucket(d time.Duration) Option {
	return option(settings.OptBucket, func(c *config) {
		if d <= 0 {
			c.Fail(fmt.Errorf("%w: bucket %v must be positive", ErrInvalidConfig, d))
			return
		}
		c.Bucket = d
	})
}

// WithHardLimitFactor sets F for the suppressed strategy: the hard ceiling
// is floor(rate × W × F). Default 1 (no room above the soft target); F
// must be finite, from 1 to 2^50. A rate whose hard capacity passes 2^50
// is the call's ErrInvalidRate.
func WithHardLimitFactor(f float64) Option {
	return option(settings.OptHardLimitFactor, func(c *config) { c.HardLimitFactor = f })
}

// WithSuppressionCache sets how long a key's suppression factor is reused
// before it is computed again. Default 100 ms; 0 computes it every call.
func WithSuppressionCache(d time.Duration) Option {
	return option(settings.OptSuppressionCache, func(c *config) { c.SuppressionCache = d })
}

// WithClock sets the time source, safe for concurrent use. Default: the
// wall clock at start advanced by the monotonic clock, never stepping
// back. Given it, Redis providers send its reading instead of using Redis
// TIME: for tests, not fleets. It dates every memory a provider keeps, so a
// test that moves miniredis' clock must pass the same clock here
// (docs/testing-your-code.md).
func WithClock(now func() time.Time) Option {
	return option(settings.OptClock, func(c *config) {
		if now == nil {
			c.Fail(fmt.Errorf("%w: nil clock", ErrInvalidConfig))
			return
		}
		c.Clock, c.ClockSet = now, true
	})
}

// WithRandom sets the source of the suppressed strategy's draws, uniform
// in [0, 1); it is called once per suppressed Inc, from any goroutine, so
// it must be safe for concurrent use. Values outside [0, 1) are clamped
// into it (NaN to 0). Default: math/rand/v2's Float64.
func WithRandom(r func() float64) Option {
	return option(settings.OptRandom, func(c *config) {
		if r == nil {
			c.Fail(fmt.Errorf("%w: nil random source", ErrInvalidConfig))
			return
		}
		c.Random, c.RandomSet = r, true
	})
}

// WithPrefix sets the first segment of every Redis key the provider
// writes: 1 to 128 bytes without braces, glob characters (* ? [ ] \),
// whitespace or control characters. Default "sluice".
func WithPrefix(p string) Option {
	return option(settings.OptPrefix, func(c *config) { c.Prefix = p })
}

// WithTimeout bounds every Redis call by d on top of the caller's context.
// Default 250 ms; 0 means the caller's context alone. A call that runs out
// of d while Redis is not known to be down is shed (Decision.Shed), not
// degraded (docs/operations.md, What counts as an outage).
func WithTimeout(d time.Duration) Option {
	return option(settings.OptTimeout, func(c *config) { c.Timeout = d })
}

// WithFailurePolicy sets what a Redis provider answers while Redis is
// unavailable. Default FallbackLocal. Under every policy but FailError,
// Inc and IsAllowed return a Decision with Degraded set and a nil error;
// the cause goes to the observer or the default log. Only wire evidence
// (a refused connection, LOADING, READONLY) or a timeout a probe confirms
// opens the breaker; bad input, ErrClosed and the caller's context never
// do (docs/operations.md, What counts as an outage).
func WithFailurePolicy(p FailurePolicy) Option {
	return option(settings.OptFailurePolicy, func(c *config) {
		if p < FallbackLocal || p > FailError {
			c.Fail(fmt.Errorf("%w: unknown failure policy %s", ErrInvalidConfig, policyName(p)))
			return
		}
		c.Policy = p
	})
}

// WithFallbackInstances scales the FallbackLocal limiter for a fleet of n
// instances: during an outage each admits rate/n (at least one unit per
// window). Default 1, each the full rate; n must be at least 1
// (docs/operations.md, Reconciliation).
func WithFallbackInstances(n int) Option {
	return option(settings.OptFallbackInstances, func(c *config) { c.FallbackInstances = n })
}

// WithProbeInterval sets how often the background probe asks Redis while
// the breaker is open: 1 ms to 1 minute, default 200 ms. One probe is in
// flight at most, bounded by WithTimeout.
func WithProbeInterval(d time.Duration) Option {
	return option(settings.OptProbeInterval, func(c *config) { c.ProbeInterval = d })
}

// WithBatching lets concurrent calls to one Redis node share round trips,
// as pipelines of at most n script calls, each still atomic with its own
// context (go-redis clients and module sluicerueidis). Default 128; 0 or 1
// sends every call alone; at most 1,024 (docs/operations.md, Batching).
func WithBatching(n int) Option {
	return option(settings.OptBatching, func(c *config) { c.Batch = n })
}

// WithHotKeyRelief turns hot-key relief on or off for the Redis and hybrid
// providers. Default on: a refusal from Redis (of at most 65,536 keys) is
// repeated from memory to calls at the same rate for as many units or
// more, until its RetryAfter but at most one second. Relief never admits;
// units freed unseen may stay refused for that second (docs/algorithms.md,
// Staleness).
func WithHotKeyRelief(on bool) Option {
	return option(settings.OptHotKeyRelief, func(c *config) { c.NoRelief = !on })
}

// WithObserver registers o to receive every decision and backend event of
// the provider (Observer). Default none: a Redis provider then logs its
// failed calls, state changes and warnings through slog.Default(), at most
// one outage a minute after the first five. An observer replaces that log:
// WithObserver(NewLogObserver(l)) logs to l, WithObserver(nil) silences
// it; MultiObserver combines several.
func WithObserver(o Observer) Option {
	return option(settings.OptObserver, func(c *config) { c.Observer, c.ObserverSet = o, true })
}
