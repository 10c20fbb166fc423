package cleanup

import (
	"fmt"
	"time"

	win "github.com/sluice-go/sluice/internal/window"

	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// Defaults of the options (docs/operations.md, Cleanup).
const (
	// DefaultRate is the budget in keys per second (WithRate).
	DefaultRate = 1000.0
	// DefaultPeriod is the background loop's pause between passes.
	DefaultPeriod = 5 * time.Minute
	// DefaultLease is how long the lease lock lasts without a renewal.
	DefaultLease = 10 * time.Second
	// DefaultTrimThreshold is how many dead buckets a live hash may hold
	// before a pass trims them; fewer are left to the provider's next
	// write or to the key's TTL.
	DefaultTrimThreshold = 64
	// MaxTrimThreshold is the largest threshold, W/B + 1 for the largest
	// W/B the providers accept.
	MaxTrimThreshold = 501
)

const (
	scanCount = 100 // the COUNT hint of every SCAN
	// step is the most dead buckets one script call follows along the
	// links of a hash too large to read whole, and the COUNT of the HSCAN
	// that trims one whose links are broken.
	step = 128
	// unknownSpan is the W + B assumed for a key whose window is not
	// known, the largest accepted: it only gives a TTL, never deletes.
	unknownSpan = 2 * settings.MaxWindow
	examples    = 5 // the most keys a report names per reason
)

// Option configures a Cleaner; New reports a bad value as
// limiter.ErrInvalidConfig.
type Option func(*options)

// WindowFunc tells the window W and bucket B (0: W/100, as
// limiter.WithBucket) of the limiter that wrote a hash, from its parsed
// key, or ok false. It must be safe for concurrent use.
type WindowFunc func(p key.Parsed) (window, bucket time.Duration, ok bool)

type options struct {
	prefix    string
	rate      float64 // keys per second; +Inf: no pacing
	period    time.Duration
	lease     time.Duration
	threshold int
	dryRun    bool
	clock     func() time.Time // nil: Redis TIME
	all       window           // for every key not otherwise known; span 0: none
	limits    map[string]window
	fn        WindowFunc
	unknown   func(redisKey string) bool
	reports   func(Report, error)
	observer  limiter.Observer
	errs      []error
}

func newOptions(opts []Option) (options, error) {
	o := options{
		prefix:    settings.DefaultPrefix,
		rate:      DefaultRate,
		period:    DefaultPeriod,
		lease:     DefaultLease,
		threshold: DefaultTrimThreshold,
	}
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if len(o.errs) > 0 {
		return options{}, o.errs[0]
	}
	if err := win.ValidatePrefix(o.prefix); err != nil {
		return options{}, err
	}
	return o, nil
}

// window is a W + B and a B in ms.
type window struct{ span, bucket int64 }

// longer keeps the longer W + B and the shorter B, both the safe side.
func longer(a, b window) window {
	if a.span == 0 {
		return b
	}
	return window{max(a.span, b.span), min(a.bucket, b.bucket)}
}

// valid records an ErrInvalidConfig unless ok, and returns ok.
func (o *options) valid(ok bool, format string, args ...any) bool {
	if !ok {
		o.errs = append(o.errs, fmt.Errorf("%w: %s", limiter.ErrInvalidConfig, fmt.Sprintf(format, args...)))
	}
	return ok
}

// spanMs validates a window and a bucket as the providers do.
func spanMs(w, b time.Duration) (int64, int64, error) {
	if b < 0 {
		return 0, 0, fmt.Errorf("%w: bucket %v must be positive, or 0 for the default", limiter.ErrInvalidConfig, b)
	}
	cfg, err := win.NewConfig(limiter.WithWindow(w), func(c *win.Config) { c.Bucket = b })
	if err != nil {
		return 0, 0, err
	}
	return cfg.WindowMs + cfg.BucketMs, cfg.BucketMs, nil
}

// WithPrefix sets the limiters' key prefix: the cleaner walks
// <prefix>:{* and takes the lease <prefix>:cleanup:lock. Default "sluice";
// it must be a valid limiter.WithPrefix.
func WithPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithWindow gives a window W and bucket B (0: W/100) for every hash
// whose window no WithWindowFunc or WithSet tells. A hash is judged by the
// longer of the W + B it records and this one, so it can only make the
// cleaner more careful. Given twice, the longer W + B wins. Default: none.
func WithWindow(w, b time.Duration) Option {
	return func(o *options) {
		sp, bms, err := spanMs(w, b)
		if err != nil {
			o.errs = append(o.errs, fmt.Errorf("cleanup: WithWindow(%v, %v): %w", w, b, err))
			return
		}
		o.all = longer(o.all, window{sp, bms})
	}
}

// WithSet gives the windows of the limits of s, as WithWindow does, for
// the hashes of the limits of that name. A name in several sets takes the
// longest W + B.
func WithSet(s *limiter.Set) Option {
	return func(o *options) {
		if err := win.CheckSet(s); err != nil {
			o.errs = append(o.errs, fmt.Errorf("cleanup: WithSet: %w", err))
			return
		}
		if o.limits == nil {
			o.limits = make(map[string]window)
		}
		for i := 0; i < s.Len(); i++ {
			l := s.At(i)
			b := l.Bucket.Milliseconds()
			o.limits[l.Name] = longer(o.limits[l.Name], window{l.Window.Milliseconds() + b, b})
		}
	}
}

// WithWindowFunc sets a function that tells a window for any hash; where
// it answers ok, it overrides WithSet and WithWindow. An answer the
// providers would refuse counts as unknown. A nil f is an error.
func WithWindowFunc(f WindowFunc) Option {
	return func(o *options) {
		if o.valid(f != nil, "nil WindowFunc") {
			o.fn = f
		}
	}
}

// WithRate sets the budget in keys per second; each key, SCAN call and
// further step of a large trim costs one unit. Default DefaultRate;
// math.Inf(1) turns pacing off. It must be positive.
func WithRate(keysPerSecond float64) Option {
	return func(o *options) {
		if o.valid(keysPerSecond > 0, "rate %v keys/s must be positive", keysPerSecond) {
			o.rate = keysPerSecond
		}
	}
}

// WithPeriod sets the background loop's pause between passes. Default
// DefaultPeriod; it must not be negative.
func WithPeriod(d time.Duration) Option {
	return func(o *options) {
		if o.valid(d >= 0, "period %v must not be negative", d) {
			o.period = d
		}
	}
}

// WithLease sets how long the lease lock lasts without a renewal. The
// holder renews it every third of that, and a waiting cleaner retries
// every tenth, so another takes over about 1.1 leases after the holder
// stopped renewing. Default DefaultLease; at least 10 ms, whole
// milliseconds.
func WithLease(d time.Duration) Option {
	return func(o *options) {
		if o.valid(d >= 10*time.Millisecond && d%time.Millisecond == 0, "lease %v must be at least 10ms, in whole milliseconds", d) {
			o.lease = d
		}
	}
}

// WithTrimThreshold sets how many dead buckets a live hash may hold before
// a pass removes them, 0 to MaxTrimThreshold. Default
// DefaultTrimThreshold. A hash of more than 1,024 fields is trimmed
// whatever the threshold.
func WithTrimThreshold(n int) Option {
	return func(o *options) {
		if o.valid(n >= 0 && n <= MaxTrimThreshold, "trim threshold %d outside [0, %d]", n, MaxTrimThreshold) {
			o.threshold = n
		}
	}
}

// WithDryRun makes every pass write nothing: the report says what it
// would have done (of a large trim, its first step). Default off.
func WithDryRun() Option { return func(o *options) { o.dryRun = true } }

// WithClock makes the cleaner judge buckets by now instead of Redis TIME,
// for keys written by limiters given limiter.WithClock; its TTLs then
// carry the providers' 60 s of slack. Default: Redis TIME.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if o.valid(now != nil, "nil clock") {
			o.clock = now
		}
	}
}

// WithDeleteUnknown UNLINKs the keys left alone for their name or content
// (Foreign, UnknownStrategy, UnknownLayout) for which del returns true; it
// is called concurrently. Default: they are only reported.
func WithDeleteUnknown(del func(redisKey string) bool) Option {
	return func(o *options) {
		if o.valid(del != nil, "nil WithDeleteUnknown function") {
			o.unknown = del
		}
	}
}

// WithReports sets a function called on the loop's goroutine with the
// report and error of every pass of the background loop, and with an
// empty report when the loop starts failing to take the lease. Default:
// none.
func WithReports(f func(Report, error)) Option {
	return func(o *options) { o.reports = f }
}

// WithObserver sends a "cleanup" limiter.Event to o after every pass (a
// Run refused with ErrLocked did none) and at the first of a series of
// failed attempts of the loop to take the lease, with an empty report.
// Its ErrorClass is a limiter's for a Redis error, "" for ErrLeaseLost.
// nil removes one given earlier. Default: none.
func WithObserver(o limiter.Observer) Option {
	return func(opts *options) { opts.observer = o }
}
