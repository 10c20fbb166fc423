package window

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// allowedUnknown is IsAllowed's answer for a key with no state.
var allowedUnknown = (&Result{Allowed: true}).Decision()

// LocalAbsolute is the in-process absolute limiter (package local's
// Absolute, and the Redis providers' fallback). It is safe for concurrent
// use; build it with NewLocalAbsolute and Close it to stop its sweep.
type LocalAbsolute struct{ local }

// LocalSuppressed is the in-process suppressed limiter, as LocalAbsolute.
type LocalSuppressed struct{ local }

// local holds what the two strategies share.
type local struct{ s *store }

// NewLocalAbsolute returns an absolute limiter. It reads WithWindow,
// WithBucket, WithClock and WithObserver, and refuses other options
// (ConfigFor); it starts a background sweep that Close stops.
func NewLocalAbsolute(opts ...limiter.Option) (*LocalAbsolute, error) {
	s, err := newStore(StrategyAbsolute, opts)
	if err != nil {
		return nil, err
	}
	return &LocalAbsolute{local{s}}, nil
}

// NewLocalSuppressed returns a suppressed limiter. Beyond the absolute
// options it reads WithHardLimitFactor, WithSuppressionCache and WithRandom.
func NewLocalSuppressed(opts ...limiter.Option) (*LocalSuppressed, error) {
	s, err := newStore(StrategySuppressed, opts)
	if err != nil {
		return nil, err
	}
	return &LocalSuppressed{local{s}}, nil
}

// Inc admits n units of key at rate if they all fit, and records them;
// n = 0 decides for one unit and records nothing.
func (a *LocalAbsolute) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	var d limiter.Decision
	err := a.IncTo(ctx, k, rate, n, &d)
	return d, err
}

// IncTo is Inc writing its decision to d: a face that returns d from its
// own frame copies the Decision through one frame less.
func (a *LocalAbsolute) IncTo(ctx context.Context, k string, rate limiter.Rate, n int64, d *limiter.Decision) error {
	now, c, err := a.s.incArgs(k, rate, n)
	if err != nil {
		return err
	}
	e, now := a.s.lock(k, n > 0, now)
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
	e, now := l.s.lock(k, n > 0, now)
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
	if e, now := a.s.lock(k, false, now); e != nil {
		r := e.st.IsAllowedAbsolute(a.s.p, now)
		e.mu.Unlock()
		*d = r.Decision()
	}
	if a.s.obs != nil {
		*d, err = a.s.observed(ctx, OpIsAllowed, k, 0, *d)
	}
	return err
}

// IsAllowed reports whether one more unit of key would be admitted without
// suppression now. It records and draws nothing.
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
	if e, now := l.s.lock(k, false, now); e != nil {
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
func (l *local) Get(_ context.Context, k string) (limiter.Usage, error) { return l.s.usage(k) }

// Reset forgets key.
func (l *local) Reset(_ context.Context, k string) error { return l.s.reset(k) }

// Close stops the sweep and waits for it until ctx is done. Later calls
// return ErrClosed; closing twice is harmless.
func (l *local) Close(ctx context.Context) error { return l.s.close(ctx) }

// Window returns the window the limiter was built with (WithWindow).
func (l *local) Window() time.Duration { return l.s.cfg.Window }

// IncSet offers n units of key to every limit of set (IncAbsoluteSet,
// IncSuppressedSet); the suppressed strategy draws exactly one number.
func (l *local) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return l.s.incSet(ctx, k, set, n)
}

// GetSet returns key's usage in each limit of set, in the set's order.
func (l *local) GetSet(_ context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return l.s.getSet(k, set)
}

// ResetSet forgets key's state in every limit of set.
func (l *local) ResetSet(_ context.Context, k string, set *limiter.Set) error {
	return l.s.resetSet(k, set)
}

// errorf wraps err as a local error of op.
func errorf(op string, err error) error { return fmt.Errorf("local: %s: %w", op, err) }

// observed reports a single-limit decision and returns it. It is kept out
// of line so that a call with no observer pays only the nil check.
//
//go:noinline
func (s *store) observed(ctx context.Context, op, k string, n int64, d limiter.Decision) (limiter.Decision, error) {
	s.observe(ctx, op, k, n, d, nil)
	return d, nil
}

// observe reports one decision to the observer, which the caller has
// checked is set: a local decision asks no backend.
func (s *store) observe(ctx context.Context, op, k string, n int64, d limiter.Decision, limits []limiter.LimitDecision) {
	s.obs.ObserveDecision(ctx, limiter.DecisionEvent{
		Provider: ProviderLocal,
		Strategy: s.strategy,
		Op:       op,
		Key:      k,
		Cost:     n,
		Decision: d,
		Limits:   limits,
		Source:   SourceLocal,
		Policy:   DecisionPolicy(limits),
	})
}
