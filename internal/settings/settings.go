// Package settings holds what the options of package limiter set: the
// resolved configuration, its limits and defaults, and the clock. It sits
// below package limiter, so Config takes limiter's types as type
// parameters; internal/window names the one instance providers use.
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

// Limits of the configuration and the counts (docs/algorithms.md, Bounds).
const (
	MinWindow = time.Millisecond
	MaxWindow = 31 * 24 * time.Hour
	// MaxBuckets bounds W/B, so the worst Redis call, which reads every
	// live bucket once, stays within its time budget (docs/algorithms.md,
	// Bounded work).
	MaxBuckets = 500
	// MaxCapacity bounds C and H so every count stays an exact integer in a
	// Lua double.
	MaxCapacity = int64(1) << 50
	// MaxHardLimitFactor is the largest hard-limit factor: beyond it every
	// hard capacity exceeds MaxCapacity.
	MaxHardLimitFactor = MaxCapacity
	// MaxPrefix is the longest Redis key prefix accepted.
	MaxPrefix = 128
)

// Defaults.
const (
	DefaultWindow           = time.Minute
	DefaultHardLimitFactor  = 1.0
	DefaultSuppressionCache = 100 * time.Millisecond
	DefaultPrefix           = "sluice"
	DefaultTimeout          = 250 * time.Millisecond
	DefaultProbeInterval    = 200 * time.Millisecond
	// DefaultBatch is the largest pipeline of concurrent script calls
	// (limiter.WithBatching; docs/operations.md, Batching).
	DefaultBatch = 128
	// MaxBatch is the largest batch limiter.WithBatching accepts.
	MaxBatch   = 1024
	MaxTimeout = time.Hour
)

var (
	startWall   = time.Now()
	startWallNs = startWall.UnixNano()
)

// WallNow is the default clock: the wall clock at process start advanced
// by the monotonic clock, which costs one clock read instead of two and
// never steps back when the system clock is set.
func WallNow() time.Time { return startWall.Add(time.Since(startWall)) }

// Config is the resolved configuration, over the observer type Obs, the
// failure policy Pol and the state change SC of package limiter. The zero
// value is not valid: build it with New.
type Config[Obs any, Pol ~int, SC any] struct {
	Window           time.Duration
	Bucket           time.Duration // 0 until resolved: W/100, at least 1 ms
	HardLimitFactor  float64
	SuppressionCache time.Duration
	Clock            func() time.Time // limiter.WithClock's
	ClockSet         bool             // WithClock was given (Redis providers then stop using TIME)
	Random           func() float64
	RandomSet        bool // WithRandom was given (else Random is math/rand/v2's Float64)
	Prefix           string
	// SweepEvery replaces the local sweep interval when > 0; only tests
	// set it.
	SweepEvery time.Duration
	// Package hybrid's options: the lease sync period (0: 50 ms), the most
	// units one lease reserves (0: the capacity), and how far ahead a
	// lease's bucket may start (0: W/20; negative: never).
	SyncInterval time.Duration
	MaxLease     int64
	LeaseAhead   time.Duration
	// Given names the options applied, in order (one given twice is
	// named twice): a provider refuses, at New, those it does not read.
	Given []string

	// The Redis providers' failure handling.
	Timeout           time.Duration // per Redis call; 0 = the caller's ctx alone
	Policy            Pol
	FallbackInstances int // the fallback admits C / FallbackInstances; ≥ 1
	ProbeInterval     time.Duration
	// Logger, when LoggerSet, replaces the Redis providers' default log
	// (nil: silent). No public option sets it: the observer is the one
	// channel (limiter.WithObserver); internal/window's WithLogger is for
	// the tests of that log. Without it the providers log through
	// slog.Default(), unless an observer was given (ObserverSet).
	Logger    *slog.Logger
	LoggerSet bool
	// Observer is the limiter.Observer of WithObserver, nil for none;
	// ObserverSet reports that WithObserver was given (even nil).
	Observer    Obs
	ObserverSet bool
	// Batch is the largest number of concurrent script calls to one Redis
	// node sent as one pipeline; 0 or 1 sends every call alone.
	Batch int
	// NoRelief turns hot-key relief off (limiter.WithHotKeyRelief(false)).
	NoRelief bool

	// Window, Bucket and SuppressionCache in whole milliseconds.
	WindowMs, BucketMs int64
	CacheMs            int64

	errs []error
}

// The names of the options, as Given records them and errors name them:
// package limiter's and package hybrid's.
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

// Record notes that the option named name was given. Every option of
// package limiter and package hybrid calls it first, before it checks its
// value.
func (c *Config[Obs, Pol, SC]) Record(name string) { c.Given = append(c.Given, name) }

// Fail records a configuration error found while applying an option.
// Options that receive bad values record one, which New reports, so a chain
// of options never panics.
func (c *Config[Obs, Pol, SC]) Fail(err error) { c.errs = append(c.errs, err) }

// New applies opts over the defaults and validates the result; a value out
// of range is an error wrapping errInvalid (limiter's ErrInvalidConfig).
func New[Obs any, Pol ~int, SC any, O ~func(*Config[Obs, Pol, SC])](errInvalid error, opts ...O) (Config[Obs, Pol, SC], error) {
	c := Apply[Obs, Pol, SC](opts...)
	if err := c.Resolve(errInvalid); err != nil {
		return Config[Obs, Pol, SC]{}, err
	}
	return c, nil
}

// Apply applies opts over the defaults, checking nothing yet: Given names
// the options applied, and Resolve reports their errors and validates.
func Apply[Obs any, Pol ~int, SC any, O ~func(*Config[Obs, Pol, SC])](opts ...O) Config[Obs, Pol, SC] {
	c := Config[Obs, Pol, SC]{
		Window:            DefaultWindow,
		HardLimitFactor:   DefaultHardLimitFactor,
		SuppressionCache:  DefaultSuppressionCache,
		Clock:             WallNow,
		Random:            rand.Float64,
		Prefix:            DefaultPrefix,
		Timeout:           DefaultTimeout,
		FallbackInstances: 1,
		ProbeInterval:     DefaultProbeInterval,
		Batch:             DefaultBatch,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// Resolve reports the errors the options recorded (Fail), else validates
// c and fills in what it derives (the default bucket, the milliseconds);
// a value out of range is an error wrapping errInvalid.
func (c *Config[Obs, Pol, SC]) Resolve(errInvalid error) error {
	if len(c.errs) > 0 {
		return errors.Join(c.errs...)
	}
	if err := c.validate(); err != nil {
		return fmt.Errorf("%w: %w", errInvalid, err)
	}
	return nil
}

func wholeMs(d time.Duration) bool { return d%time.Millisecond == 0 }

func (c *Config[Obs, Pol, SC]) validate() error {
	w := c.Window
	switch {
	case w < MinWindow || w > MaxWindow:
		return fmt.Errorf("window %v outside [1ms, 744h]", w)
	case !wholeMs(w):
		return fmt.Errorf("window %v is not a whole number of milliseconds", w)
	}
	if c.Bucket == 0 {
		c.Bucket = (w / 100).Truncate(time.Millisecond)
		if c.Bucket < time.Millisecond {
			c.Bucket = time.Millisecond
		}
	}
	b := c.Bucket
	switch {
	case b < time.Millisecond || b > w:
		return fmt.Errorf("bucket %v outside [1ms, window %v]", b, w)
	case !wholeMs(b):
		return fmt.Errorf("bucket %v is not a whole number of milliseconds", b)
	case w/b > MaxBuckets:
		return fmt.Errorf("window %v / bucket %v: W/B = %d, above the limit of %d (a Redis call may read every bucket of a window)", w, b, w/b, MaxBuckets)
	}
	f := c.HardLimitFactor
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0) || f < 1:
		return fmt.Errorf("hard limit factor %v must be finite and at least 1", f)
	case f > float64(MaxHardLimitFactor):
		return fmt.Errorf(
			"hard limit factor %v above %d (2^50): the hard capacity rate × W × F of every rate would be above the largest count, 2^50", f, MaxHardLimitFactor)
	}
	sc := c.SuppressionCache
	switch {
	case sc < 0 || sc > MaxWindow:
		return fmt.Errorf("suppression cache %v outside [0, 744h]", sc)
	case !wholeMs(sc):
		return fmt.Errorf("suppression cache %v is not a whole number of milliseconds", sc)
	}
	if c.Clock == nil {
		return fmt.Errorf("nil clock")
	}
	if c.Random == nil {
		return fmt.Errorf("nil random source")
	}
	if err := ValidatePrefix(c.Prefix); err != nil {
		return err
	}
	if c.Timeout < 0 || c.Timeout > MaxTimeout {
		return fmt.Errorf("timeout %v outside [0, 1h]", c.Timeout)
	}
	if c.FallbackInstances < 1 {
		return fmt.Errorf("fallback instances %d must be at least 1", c.FallbackInstances)
	}
	if c.ProbeInterval < time.Millisecond || c.ProbeInterval > time.Minute {
		return fmt.Errorf("probe interval %v outside [1ms, 1m]", c.ProbeInterval)
	}
	if c.Batch < 0 || c.Batch > MaxBatch {
		return fmt.Errorf("batch size %d outside [0, %d]", c.Batch, MaxBatch)
	}
	c.WindowMs = w.Milliseconds()
	c.BucketMs = b.Milliseconds()
	c.CacheMs = sc.Milliseconds()
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
		return r == '{' || r == '}' || r == '*' || r == '?' || r == '[' || r == ']' || r == '\\' ||
			unicode.IsSpace(r) || unicode.IsControl(r)
	}); i >= 0 {
		return fmt.Errorf("prefix %q has a reserved character at byte %d", p, i)
	}
	return nil
}

// MaxClockMs bounds a WithClock reading (clamped), so every time a script
// computes stays an exact integer in a double.
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
	if r >= 1 {
		return math.Nextafter(1, 0)
	}
	return r
}
