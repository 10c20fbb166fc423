package cleanup

import (
	"fmt"
	"math"
	"time"

	win "github.com/sluice-go/sluice/internal/window"

	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// Defaults of the options, measured in docs/operations.md (Cleanup).
const (
	// DefaultRate is the budget of a cleaner in keys per second: a pass
	// over a million keys takes about 17 minutes, with little effect on
	// the limiters' latency.
	DefaultRate = 1000.0
	// DefaultPeriod is the pause of the background loop between the end
	// of one pass and the start of the next.
	DefaultPeriod = 5 * time.Minute
	// DefaultLease is how long the lease lock lasts without a renewal.
	DefaultLease = 10 * time.Second
	// DefaultTrimThreshold is the number of dead buckets a live hash may
	// hold before a pass trims them. Fewer are left to the provider, whose
	// next write drops them, or to the key's TTL.
	DefaultTrimThreshold = 64
	// MaxTrimThreshold is the largest threshold accepted: a hash holds at
	// most W/B + 1 buckets, and the providers refuse W/B above 500
	// (limiter.WithBucket).
	MaxTrimThreshold = 501
)

// Internal bounds of one pass.
const (
	// scanCount is the COUNT hint of every SCAN call.
	scanCount = 100
	// step is the most dead buckets one script call follows along the
	// links of a hash larger than the script reads whole (1,024 fields),
	// and the COUNT hint of the HSCAN that trims a large hash whose links
	// are broken.
	step = 128
	// unknownSpan is the W + B assumed for a key whose window is not known:
	// the largest a configuration accepts (W ≤ 31 days, B ≤ W). It is used
	// only to give a hash without a TTL one, never to delete or trim.
	unknownSpan = 2 * settings.MaxWindow
	// examples is the most keys a report names per reason.
	examples = 5
)

// Option configures a Cleaner. A bad value is reported by New as
// limiter.ErrInvalidConfig; options never panic.
type Option func(*options)

// WindowFunc tells the window W and bucket B of the limiter that wrote a
// hash, from its parsed Redis key (key.Parse), or ok false. A bucket of 0
// means W/100 (at least 1 ms), as for limiter.WithBucket. It must be safe
// for concurrent use: one goroutine per Redis master or shard calls it.
type WindowFunc func(p key.Parsed) (window, bucket time.Duration, ok bool)

// options is the resolved configuration; newOptions sets every default.
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

// longer keeps the longer W + B of two windows, and the shorter B: both are
// the safe side (a longer span deletes later; a shorter bucket bounds the
// number of dead buckets from above).
func longer(a, b window) window {
	if a.span == 0 {
		return b
	}
	return window{max(a.span, b.span), min(a.bucket, b.bucket)}
}

func (o *options) fail(format string, args ...any) {
	o.errs = append(o.errs, fmt.Errorf("%w: %s", limiter.ErrInvalidConfig, fmt.Sprintf(format, args...)))
}

// spanMs validates a window and a bucket as the providers do and returns
// W + B and B in ms.
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

// WithPrefix sets the key prefix of the limiters to clean up after: the
// cleaner walks SCAN MATCH <prefix>:{* and takes the lease
// <prefix>:cleanup:lock. Default "sluice", the limiters' default. It must
// be a valid limiter.WithPrefix.
func WithPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithWindow gives a window W and bucket B (0: W/100, at least 1 ms, as
// limiter.WithBucket) for every hash whose window no WithWindowFunc or
// WithSet tells. It is optional: a hash is judged by the longer of the
// W + B it records and this one, so a window given here only makes the
// cleaner more careful (it deletes later, and gives longer TTLs), never
// deleting what a hash's own record says is live. Given twice, the longer
// W + B wins.
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

// WithSet gives the windows of the limits of s: the hash of each limit of a
// set (<prefix>:{k}:<strategy>:h:<name>, either strategy) is judged by the
// longer of its own recorded W + B and that of the limit of that name, as
// WithWindow. A name in several sets takes the longest W + B.
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
// it answers ok, it overrides WithSet and WithWindow (and, like them, only
// lengthens the W + B the hash records). An answer the providers would
// refuse (a window outside 1 ms to 31 days, a bad bucket) counts as
// unknown.
func WithWindowFunc(f WindowFunc) Option {
	return func(o *options) {
		if f == nil {
			o.fail("nil WindowFunc")
			return
		}
		o.fn = f
	}
}

// WithRate sets the budget in keys per second. Each key a pass handles
// costs one unit, and so does each SCAN call and each further step of a
// large trim. Default DefaultRate; math.Inf(1) turns pacing off. It must be
// positive.
func WithRate(keysPerSecond float64) Option {
	return func(o *options) {
		if math.IsNaN(keysPerSecond) || keysPerSecond <= 0 {
			o.fail("rate %v keys/s must be positive", keysPerSecond)
			return
		}
		o.rate = keysPerSecond
	}
}

// WithPeriod sets the pause of the background loop (Start) between the
// end of a pass and the start of the next. Default DefaultPeriod; 0 starts
// the next pass at once. It must not be negative.
func WithPeriod(d time.Duration) Option {
	return func(o *options) {
		if d < 0 {
			o.fail("period %v must not be negative", d)
			return
		}
		o.period = d
	}
}

// WithLease sets how long the lease lock lasts without a renewal. The
// holder renews it every third of that while it works, and a cleaner
// waiting for it retries every tenth, so another cleaner takes over at most
// about 1.1 leases after the holder stopped renewing (a crash, a frozen
// process) and within a tenth of a lease after it stopped cleanly. Default
// DefaultLease; at least 10 ms, whole milliseconds.
func WithLease(d time.Duration) Option {
	return func(o *options) {
		if d < 10*time.Millisecond || d%time.Millisecond != 0 {
			o.fail("lease %v must be at least 10ms, in whole milliseconds", d)
			return
		}
		o.lease = d
	}
}

// WithTrimThreshold sets how many dead buckets a live hash may hold before
// a pass removes them. Default DefaultTrimThreshold; 0 trims any dead
// bucket. It must be between 0 and MaxTrimThreshold. A hash of more than
// 1,024 fields, which no limiter within its bounds writes, is trimmed
// whatever the threshold.
func WithTrimThreshold(n int) Option {
	return func(o *options) {
		if n < 0 || n > MaxTrimThreshold {
			o.fail("trim threshold %d outside [0, %d]", n, MaxTrimThreshold)
			return
		}
		o.threshold = n
	}
}

// WithDryRun makes every pass write nothing: the report says what a pass
// would have deleted, trimmed and given a TTL. (A trim of a large hash
// that takes several steps reports its first step only.)
func WithDryRun() Option { return func(o *options) { o.dryRun = true } }

// WithClock makes the cleaner judge buckets by the time now returns
// instead of Redis TIME, for keys written by limiters given
// limiter.WithClock (tests and simulations); the TTLs it gives then carry
// the same 60 s of slack as the providers' writes. Default: Redis TIME.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now == nil {
			o.fail("nil clock")
			return
		}
		o.clock = now
	}
}

// WithDeleteUnknown names keys to delete among those a pass leaves alone
// for their name or content (Foreign, UnknownStrategy, UnknownLayout):
// keys for which del returns true are UNLINKed. By default they are only
// reported. del is called from several goroutines at once.
func WithDeleteUnknown(del func(redisKey string) bool) Option {
	return func(o *options) {
		if del == nil {
			o.fail("nil WithDeleteUnknown function")
			return
		}
		o.unknown = del
	}
}

// WithReports sets a function called with the report and error of every
// pass of the background loop (Start), and with an empty report and the
// error when the loop starts failing to reach Redis for the lease. It runs
// on the loop's goroutine: a slow one delays the next pass. Default: none.
func WithReports(f func(Report, error)) Option {
	return func(o *options) { o.reports = f }
}

// WithObserver sends a config.EventCleanup, with Provider
// config.ProviderCleanup, to o after every pass: each Run and each pass
// of the background loop, and the first of a series of failed attempts of
// the loop to take the lease (an event whose report is empty and whose Err
// says why). A Run refused with ErrLocked did no pass and sends nothing. The
// event's ErrorClass is that of a limiter's "backend_error" Event for a Redis
// error (config.ErrorTimeout, …) and "" for ErrLeaseLost, which is not
// the backend's fault. The same observer can serve the limiters (see
// limiter.WithObserver); nil removes one given earlier. Default: none.
func WithObserver(o limiter.Observer) Option {
	return func(opts *options) { opts.observer = o }
}
