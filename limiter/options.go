package limiter

import (
	"fmt"
	"time"

	"github.com/sluice-go/sluice/internal/settings"
)

// Option configures a provider. A provider accepts only the options it
// reads: one it does not read (a Redis option given to local, a suppressed
// one to an absolute limiter, package hybrid's to another provider) is
// ErrInvalidConfig at New, naming the option, the provider and its
// strategy (docs/operations.md, Options across providers, has the table).
// A bad value is ErrInvalidConfig at New too; options never panic. A nil
// Option is ignored.
type Option func(*config)

// config is what options set: the configuration every provider resolves
// with the defaults documented on each option.
type config = settings.Config[Observer, FailurePolicy, StateChange]

// WithWindow sets the sliding window length W. Default 1 minute. It must be
// a whole number of milliseconds between 1 ms and 31 days. Redis providers
// record W and B in each key's state: a limiter with another window (or
// bucket) on the same prefix and strategy gets ErrWindowConflict for a key
// whose state the other keeps alive (docs/algorithms.md, One name, two
// windows).
func WithWindow(d time.Duration) Option {
	return func(c *config) {
		c.Record(settings.OptWindow)
		c.Window = d
	}
}

// WithBucket sets the coalescing granularity B: calls less than B after the
// start of a key's newest bucket are counted in that bucket. Default W/100
// rounded down to whole milliseconds, at least 1 ms. It must satisfy
// 1 ms ≤ B ≤ W and W/B ≤ 500; New returns ErrInvalidConfig beyond. The
// trade-off: a unit counts for between W and W + B, so a larger B admits a
// little less than the rate, while a smaller one keeps more buckets per
// key, which costs memory and the worst case of a Redis call (W/B ≤ 250
// keeps every hash in Redis' compact encoding; docs/data-model.md,
// Choosing B).
func WithBucket(d time.Duration) Option {
	return func(c *config) {
		c.Record(settings.OptBucket)
		if d <= 0 {
			c.Fail(fmt.Errorf("%w: bucket %v must be positive", ErrInvalidConfig, d))
			return
		}
		c.Bucket = d
	}
}

// WithHardLimitFactor sets F for the suppressed strategy: the hard ceiling
// is floor(rate × W × F). Default 1.0 (no room above the soft target). F must
// be finite, at least 1 and at most 2^50 (the largest count: every capacity
// is at least 1, so a larger F gives no rate a hard capacity), else New
// returns ErrInvalidConfig naming the factor. A rate whose H alone passes
// 2^50 is the call's ErrInvalidRate, naming the factor too.
func WithHardLimitFactor(f float64) Option {
	return func(c *config) {
		c.Record(settings.OptHardLimitFactor)
		c.HardLimitFactor = f
	}
}

// WithSuppressionCache sets how long a key's suppression factor is reused
// before it is computed again. Default 100 ms; 0 computes it on every call.
func WithSuppressionCache(d time.Duration) Option {
	return func(c *config) {
		c.Record(settings.OptSuppressionCache)
		c.SuppressionCache = d
	}
}

// WithClock sets the time source: now returns the current time, and must
// be safe for concurrent use. Default: the wall clock, read once at
// start and advanced by the monotonic clock (it never steps backwards when
// the system clock is set; see docs/algorithms.md, Time). The local
// providers read it for every decision. Redis providers
// normally use the Redis server's TIME so every instance shares one clock;
// given WithClock they send this clock's reading to the script instead,
// which is meant for tests and simulations, not for a fleet. Every memory
// a provider keeps (hot-key relief's refusals, a hybrid's leases, cached
// refusals and syncs, the grace after an outage) is dated by this clock
// too, with or without WithClock: a test that moves miniredis' clock
// (SetTime, FastForward) must give the limiter the same clock, or a
// refusal it remembers answers for up to a second of wall time after
// miniredis' window has moved past it (docs/testing-your-code.md).
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		c.Record(settings.OptClock)
		if now == nil {
			c.Fail(fmt.Errorf("%w: nil clock", ErrInvalidConfig))
			return
		}
		c.Clock = now
		c.ClockSet = true
	}
}

// WithRandom sets the source of the suppressed strategy's draws: a function
// returning numbers uniform in [0, 1). It is called exactly once per
// suppressed Inc, possibly from many goroutines at once, so it must be safe
// for concurrent use. Values outside [0, 1) are clamped into it: below 0
// and -Inf to 0, 1 and above and +Inf to the largest float64 below 1; NaN
// to 0, the draw that admits least. Default: math/rand/v2's Float64
// (which the local provider draws only when a factor decides the call).
func WithRandom(r func() float64) Option {
	return func(c *config) {
		c.Record(settings.OptRandom)
		if r == nil {
			c.Fail(fmt.Errorf("%w: nil random source", ErrInvalidConfig))
			return
		}
		c.Random = r
		c.RandomSet = true
	}
}

// WithPrefix sets the first segment of every Redis key the provider
// writes. Default "sluice". It must be 1 to 128 bytes without braces,
// glob characters (* ? [ ] \), whitespace or control characters.
func WithPrefix(p string) Option {
	return func(c *config) {
		c.Record(settings.OptPrefix)
		c.Prefix = p
	}
}
