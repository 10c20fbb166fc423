// Package settings holds what the options of package limiter set: the
// resolved configuration, its bounds and defaults, and the clock. It sits
// below package limiter, so Config takes limiter's types as type
// parameters; internal/window names the instance providers use.
package settings

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"time"
	"unicode"
)

// Bounds of the configuration and the counts (docs/algorithms.md, Bounds).
const (
	MinWindow = time.Millisecond
	MaxWindow = 31 * 24 * time.Hour
	// MaxBuckets bounds W/B, so the worst Redis call, which reads every
	// live bucket, stays within its time budget.
	MaxBuckets = 500
	// MaxCapacity bounds C and H so every count stays exact in a double.
	MaxCapacity = int64(1) << 50
	// CapacityEpsilon absorbs binary rounding in rate × window (0.7 × 10
	// must give 7).
	CapacityEpsilon = 1e-9
	// MaxHardLimitFactor is the largest factor: beyond, every hard capacity
	// exceeds MaxCapacity.
	MaxHardLimitFactor = MaxCapacity
	MaxPrefix          = 128
	DefaultPrefix      = "sluice"
	// DefaultBatch is the default of limiter.WithBatching, MaxBatch its
	// largest.
	DefaultBatch = 128
	MaxBatch     = 1024
	MaxTimeout   = time.Hour
)

var (
	startWall   = time.Now()
	startWallNs = startWall.UnixNano()
)

// WallNow is the default clock: the wall clock at start advanced by the
// monotonic clock, one clock read that never steps back.
func WallNow() time.Time { return startWall.Add(time.Since(startWall)) }

// Config is the resolved configuration, over package limiter's observer
// type Obs, failure policy Pol and state change SC. Build it with New.
type Config[Obs any, Pol ~int, SC any] struct {
	Window           time.Duration
	Bucket           time.Duration // 0 until resolved: W/100, at least 1 ms
	HardLimitFactor  float64
	SuppressionCache time.Duration
	Clock            func() time.Time
	ClockSet         bool // WithClock was given (Redis providers then stop using TIME)
	Random           func() float64
	RandomSet        bool // WithRandom was given
	Prefix           string
	SweepEvery       time.Duration // the local sweep's interval when > 0 (tests)
	// Package hybrid's: the sync period (0: 50 ms), the most units a lease
	// reserves (0: the capacity), how far ahead a lease's bucket may start
	// (0: W/20; negative: never).
	SyncInterval time.Duration
	MaxLease     int64
	LeaseAhead   time.Duration
	// Given names the options applied, in order: a provider refuses, at
	// New, those it does not read.
	Given []string

	Timeout           time.Duration // per Redis call; 0: the caller's ctx alone
	Policy            Pol
	FallbackInstances int
	ProbeInterval     time.Duration
	// Logger, when LoggerSet, replaces the Redis providers' default log
	// (slog.Default() unless an observer was given); only tests set it.
	Logger      *slog.Logger
	LoggerSet   bool
	Observer    Obs
	ObserverSet bool // WithObserver was given (even nil)
	Batch       int
	NoRelief    bool // limiter.WithHotKeyRelief(false)

	// Window, Bucket and SuppressionCache in whole milliseconds.
	WindowMs, BucketMs int64
	CacheMs            int64

	errs []error
}

// The names of the options, as Given records them and errors name them.
const (
	OptWindow            = "WithWindow"
	OptBucket            = "WithBucket"
	OptClock             = "WithClock"
	OptObserver          = "WithObserver"
	OptHardLimitFactor   = "WithHardLimitFactor"
	OptSuppressionCache  = "WithSuppressionCache"
	OptRandom            = "WithRandom"
	OptPrefix            = "WithPrefix"
	OptTimeout           = "WithTimeout"
	OptFailurePolicy     = "WithFailurePolicy"
	OptFallbackInstances = "WithFallbackInstances"
	OptProbeInterval     = "WithProbeInterval"
	OptBatching          = "WithBatching"
	OptHotKeyRelief      = "WithHotKeyRelief"
	OptSyncInterval      = "hybrid.WithSyncInterval"
	OptMaxLease          = "hybrid.WithMaxLease"
	OptLeaseAhead        = "hybrid.WithLeaseAhead"
)

// Record notes that the option named name was given; every option calls it
// first.
func (c *Config[Obs, Pol, SC]) Record(name string) { c.Given = append(c.Given, name) }

// Fail records an option's error for a bad value, which Resolve reports.
func (c *Config[Obs, Pol, SC]) Fail(err error) { c.errs = append(c.errs, err) }

// New applies opts over the defaults and resolves the result; a value out
// of range is an error wrapping errInvalid (limiter's ErrInvalidConfig).
func New[Obs any, Pol ~int, SC any, O ~func(*Config[Obs, Pol, SC])](errInvalid error, opts ...O) (Config[Obs, Pol, SC], error) {
	c := Apply[Obs, Pol, SC](opts...)
	if err := c.Resolve(errInvalid); err != nil {
		return Config[Obs, Pol, SC]{}, err
	}
	return c, nil
}

// Apply applies opts over the defaults, checking nothing yet.
func Apply[Obs any, Pol ~int, SC any, O ~func(*Config[Obs, Pol, SC])](opts ...O) Config[Obs, Pol, SC] {
	c := Config[Obs, Pol, SC]{
		Window:            time.Minute,
		HardLimitFactor:   1,
		SuppressionCache:  100 * time.Millisecond,
		Clock:             WallNow,
		Random:            rand.Float64,
		Prefix:            DefaultPrefix,
		Timeout:           250 * time.Millisecond,
		FallbackInstances: 1,
		ProbeInterval:     200 * time.Millisecond,
		Batch:             DefaultBatch,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// Resolve reports the errors the options recorded, else validates c and
// fills in the default bucket and the milliseconds; a value out of range
// is an error wrapping errInvalid.
func (c *Config[Obs, Pol, SC]) Resolve(errInvalid error) error {
	if len(c.errs) > 0 {
		return errors.Join(c.errs...)
	}
	w, f, sc := c.Window, c.HardLimitFactor, c.SuppressionCache
	if c.Bucket == 0 {
		c.Bucket = max((w / 100).Truncate(time.Millisecond), time.Millisecond)
	}
	b, prefixErr := c.Bucket, ValidatePrefix(c.Prefix)
	frac := func(d time.Duration) bool { return d%time.Millisecond != 0 } // not whole ms
	for _, v := range []struct {
		bad bool
		err func() error
	}{
		{w < MinWindow || w > MaxWindow, func() error { return fmt.Errorf("window %v outside [1ms, 744h]", w) }},
		{frac(w), func() error { return fmt.Errorf("window %v is not a whole number of milliseconds", w) }},
		{b < time.Millisecond || b > w, func() error { return fmt.Errorf("bucket %v outside [1ms, window %v]", b, w) }},
		{frac(b), func() error { return fmt.Errorf("bucket %v is not a whole number of milliseconds", b) }},
		{w/b > MaxBuckets, func() error {
			return fmt.Errorf("window %v / bucket %v: W/B = %d, above the limit of %d (a Redis call may read every bucket of a window)", w, b, w/b, MaxBuckets)
		}},
		{math.IsNaN(f) || math.IsInf(f, 0) || f < 1, func() error { return fmt.Errorf("hard limit factor %v must be finite and at least 1", f) }},
		{f > float64(MaxHardLimitFactor), func() error {
			return fmt.Errorf("hard limit factor %v above %d (2^50): the hard capacity rate × W × F of every rate would be above the largest count, 2^50", f, MaxHardLimitFactor)
		}},
		{sc < 0 || sc > MaxWindow, func() error { return fmt.Errorf("suppression cache %v outside [0, 744h]", sc) }},
		{frac(sc), func() error { return fmt.Errorf("suppression cache %v is not a whole number of milliseconds", sc) }},
		{prefixErr != nil, func() error { return prefixErr }},
		{c.Timeout < 0 || c.Timeout > MaxTimeout, func() error { return fmt.Errorf("timeout %v outside [0, 1h]", c.Timeout) }},
		{c.FallbackInstances < 1, func() error { return fmt.Errorf("fallback instances %d must be at least 1", c.FallbackInstances) }},
		{c.ProbeInterval < time.Millisecond || c.ProbeInterval > time.Minute, func() error {
			return fmt.Errorf("probe interval %v outside [1ms, 1m]", c.ProbeInterval)
		}},
		{c.Batch < 0 || c.Batch > MaxBatch, func() error { return fmt.Errorf("batch size %d outside [0, %d]", c.Batch, MaxBatch) }},
	} {
		if v.bad {
			return fmt.Errorf("%w: %w", errInvalid, v.err())
		}
	}
	c.WindowMs, c.BucketMs, c.CacheMs = w.Milliseconds(), b.Milliseconds(), sc.Milliseconds()
	return nil
}

// ValidatePrefix reports whether p can start a Redis key of the schema:
// 1 to MaxPrefix bytes, without braces, glob characters, whitespace or
// control characters.
func ValidatePrefix(p string) error {
	if p == "" || len(p) > MaxPrefix {
		return fmt.Errorf("prefix must be 1 to %d bytes, got %d", MaxPrefix, len(p))
	}
	if i := strings.IndexFunc(p, func(r rune) bool {
		return strings.ContainsRune("{}*?[]\\", r) || unicode.IsSpace(r) || unicode.IsControl(r)
	}); i >= 0 {
		return fmt.Errorf("prefix %q has a reserved character at byte %d", p, i)
	}
	return nil
}

// MaxClockMs bounds a WithClock reading, so every time a script computes
// stays exact in a double.
const MaxClockMs = int64(1) << 52

// NowMs reads the clock in whole milliseconds (Unix epoch), clamped to
// ±MaxClockMs.
func (c *Config[Obs, Pol, SC]) NowMs() int64 {
	if !c.ClockSet { // the default clock, without the indirect call
		return WallMs()
	}
	return ClampMs(c.Clock().UnixMilli())
}

// ClampMs clamps a time in ms to ±MaxClockMs.
func ClampMs(ms int64) int64 { return min(max(ms, -MaxClockMs), MaxClockMs) }

// WallMs reads the default clock in whole milliseconds (Unix epoch).
func WallMs() int64 { return (startWallNs + int64(time.Since(startWall))) / int64(time.Millisecond) }

// Rand draws one number from the configured source, clamped into [0, 1)
// (NaN counts as 0).
func (c *Config[Obs, Pol, SC]) Rand() float64 {
	r := c.Random()
	if !(r > 0) { // also NaN
		return 0
	}
	return min(r, math.Nextafter(1, 0))
}
