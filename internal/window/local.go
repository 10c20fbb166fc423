package window

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// allowedUnknown is IsAllowed's answer for a key with no state.
var allowedUnknown = (&Result{Allowed: true}).Decision()

// LocalAbsolute is the in-process absolute limiter: a request is admitted while
// the key's sliding window has room for all of it. It is safe for concurrent
// use; build it with NewLocalAbsolute (the zero value is not usable) and Close it
// to stop its sweep.
type LocalAbsolute struct{ s *store }

var (
	_ limiter.Limiter                     = (*LocalAbsolute)(nil)
	_ interface{ Window() time.Duration } = (*LocalAbsolute)(nil)
)

// NewLocalAbsolute returns an absolute limiter. It reads WithWindow, WithBucket,
// WithClock and WithObserver, and refuses other options (ConfigFor); it
// starts a background sweep that Close stops.
func NewLocalAbsolute(opts ...limiter.Option) (*LocalAbsolute, error) {
	s, err := newStore(StrategyAbsolute, opts)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	return &LocalAbsolute{s: s}, nil
}

// Inc admits n units of key at rate if they all fit, and records them.
// n = 0 decides for one unit and records nothing. ctx is not consulted:
// local decisions never block.
func (a *LocalAbsolute) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	var d limiter.Decision
	err := a.IncTo(ctx, k, rate, n, &d)
	return d, err
}

// IncTo is Inc writing its decision to d: a face that calls it returns
// the decision from its own frame, where a face returning Inc's result
// copies a Decision through one more frame of registers (about 20 % of an
// admission, measured by limiter/local's benchmarks).
func (a *LocalAbsolute) IncTo(ctx context.Context, k string, rate limiter.Rate, n int64, d *limiter.Decision) error {
	now, c, err := a.s.incArgs(k, rate, n)
	if err != nil {
		return err
	}
	e := a.s.lock(k, n > 0)
	var r Result
	if e == nil { // a peek at an unknown key
		var peek State
		peek.IncAbsolute(a.s.p, now, c, n, &r)
	} else {
		e.st.IncAbsolute(a.s.p, now, c, n, &r)
		e.mu.Unlock()
	}
	if a.s.obs != nil {
		*d, err = a.s.observed(ctx, OpInc, k, n, r.Decision())
		return err
	}
	*d = r.Decision()
	return nil
}

// IsAllowed reports whether one more unit of key would be admitted now at
// its stored capacity. It records nothing.
func (a *LocalAbsolute) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	var d limiter.Decision
	err := a.IsAllowedTo(ctx, k, &d)
	return d, err
}

// IsAllowedTo is IsAllowed writing its decision to d.
func (a *LocalAbsolute) IsAllowedTo(ctx context.Context, k string, d *limiter.Decision) error {
	now, err := a.s.check("is allowed", k)
	if err != nil {
		return err
	}
	*d = allowedUnknown
	if e := a.s.lock(k, false); e != nil {
		r := e.st.IsAllowedAbsolute(a.s.p, now)
		e.mu.Unlock()
		*d = r.Decision()
	}
	if a.s.obs != nil {
		*d, err = a.s.observed(ctx, OpIsAllowed, k, 0, *d)
	}
	return err
}

// Get returns key's usage in the live window.
func (a *LocalAbsolute) Get(_ context.Context, k string) (limiter.Usage, error) { return a.s.usage(k) }

// Reset forgets key.
func (a *LocalAbsolute) Reset(_ context.Context, k string) error { return a.s.reset(k) }

// Close stops the sweep and waits for it until ctx is done. Later calls
// return ErrClosed; closing twice is harmless.
func (a *LocalAbsolute) Close(ctx context.Context) error { return a.s.close(ctx) }

// Window returns the window the limiter was built with (WithWindow).
func (a *LocalAbsolute) Window() time.Duration { return a.s.cfg.Window }

// LocalSuppressed is the in-process suppressed limiter: above the soft capacity
// it admits with a probability that falls as traffic rises, up to the hard
// capacity. It is safe for concurrent use; build it with NewLocalSuppressed and
// Close it to stop its sweep.
type LocalSuppressed struct{ s *store }

var (
	_ limiter.Limiter                     = (*LocalSuppressed)(nil)
	_ interface{ Window() time.Duration } = (*LocalSuppressed)(nil)
)

// NewLocalSuppressed returns a suppressed limiter. Beyond the absolute options it
// reads WithHardLimitFactor, WithSuppressionCache and WithRandom, and
// refuses other options (ConfigFor).
func NewLocalSuppressed(opts ...limiter.Option) (*LocalSuppressed, error) {
	s, err := newStore(StrategySuppressed, opts)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	return &LocalSuppressed{s: s}, nil
}

// Inc offers n units of key at rate. Every call with valid arguments draws
// exactly one number from the source of WithRandom; the default source is
// drawn only by the calls a suppression factor decides.
func (l *LocalSuppressed) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	var d limiter.Decision
	err := l.IncTo(ctx, k, rate, n, &d)
	return d, err
}

// IncTo is Inc writing its decision to d (LocalAbsolute.IncTo).
func (l *LocalSuppressed) IncTo(ctx context.Context, k string, rate limiter.Rate, n int64, d *limiter.Decision) error {
	now, soft, hard, err := l.s.supArgs(k, rate, n)
	if err != nil {
		return err
	}
	in := Suppressed{Soft: soft, Hard: hard, CacheMs: l.s.cacheMs, RandPPM: l.s.drawPPM()}
	e := l.s.lock(k, n > 0)
	var r Result
	if e == nil { // a peek at an unknown key
		var peek State
		peek.IncSuppressed(l.s.p, now, n, &in, &r)
	} else {
		e.st.IncSuppressed(l.s.p, now, n, &in, &r)
		e.mu.Unlock()
	}
	if l.s.obs != nil {
		*d, err = l.s.observed(ctx, OpInc, k, n, r.Decision())
		return err
	}
	*d = r.Decision()
	return nil
}

// IsAllowed reports whether one more unit of key would be admitted without
// suppression now. It records nothing and draws nothing.
func (l *LocalSuppressed) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	var d limiter.Decision
	err := l.IsAllowedTo(ctx, k, &d)
	return d, err
}

// IsAllowedTo is IsAllowed writing its decision to d.
func (l *LocalSuppressed) IsAllowedTo(ctx context.Context, k string, d *limiter.Decision) error {
	now, err := l.s.check("is allowed", k)
	if err != nil {
		return err
	}
	*d = allowedUnknown
	if e := l.s.lock(k, false); e != nil {
		r := e.st.IsAllowedSuppressed(l.s.p, now, l.s.cacheMs)
		e.mu.Unlock()
		*d = r.Decision()
	}
	if l.s.obs != nil {
		*d, err = l.s.observed(ctx, OpIsAllowed, k, 0, *d)
	}
	return err
}

// Get returns key's accepted and declined units in the live window.
func (l *LocalSuppressed) Get(_ context.Context, k string) (limiter.Usage, error) {
	return l.s.usage(k)
}

// Reset forgets key.
func (l *LocalSuppressed) Reset(_ context.Context, k string) error { return l.s.reset(k) }

// Close stops the sweep and waits for it until ctx is done.
func (l *LocalSuppressed) Close(ctx context.Context) error { return l.s.close(ctx) }

// Window returns the window the limiter was built with (WithWindow).
func (l *LocalSuppressed) Window() time.Duration { return l.s.cfg.Window }
