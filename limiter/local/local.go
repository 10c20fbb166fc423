package local

import (
	"context"
	"time"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

// Absolute is the in-process absolute limiter: a request is admitted while
// the key's window has room for all of it. It is safe for concurrent use;
// build it with NewAbsolute (the zero value is not usable) and Close it to
// stop its sweep.
type Absolute struct{ w window.LocalAbsolute }

// NewAbsolute returns an absolute limiter. It reads WithWindow, WithBucket,
// WithClock and WithObserver; any other option is ErrInvalidConfig.
func NewAbsolute(opts ...limiter.Option) (*Absolute, error) {
	w, err := window.NewLocalAbsolute(opts...)
	if err != nil {
		return nil, err
	}
	return &Absolute{*w}, nil
}

// Inc admits n units of key at rate if they all fit, and records them;
// n = 0 decides for one unit and records nothing. It never blocks.
func (a *Absolute) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	var d limiter.Decision
	err := a.w.IncTo(ctx, k, rate, n, &d)
	return d, err
}

// IsAllowed reports whether one more unit of key would be admitted now at
// its stored capacity. It records nothing.
func (a *Absolute) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	var d limiter.Decision
	err := a.w.IsAllowedTo(ctx, k, &d)
	return d, err
}

// Get returns key's usage in the live window.
func (a *Absolute) Get(ctx context.Context, k string) (limiter.Usage, error) { return a.w.Get(ctx, k) }

// Reset forgets key.
func (a *Absolute) Reset(ctx context.Context, k string) error { return a.w.Reset(ctx, k) }

// IncSet admits n units of key if every limit of set has room for them,
// and records them in every limit; n = 0 records nothing.
func (a *Absolute) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return a.w.IncSet(ctx, k, set, n)
}

// GetSet returns key's usage in each limit of set, in the set's order.
func (a *Absolute) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return a.w.GetSet(ctx, k, set)
}

// ResetSet forgets key's state in every limit of set.
func (a *Absolute) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return a.w.ResetSet(ctx, k, set)
}

// Close stops the sweep, waiting for it until ctx is done. Later calls
// return ErrClosed; closing twice is harmless.
func (a *Absolute) Close(ctx context.Context) error { return a.w.Close(ctx) }

// Window returns the window the limiter was built with (WithWindow).
func (a *Absolute) Window() time.Duration { return a.w.Window() }

// Suppressed is the in-process suppressed limiter: above the soft capacity
// it admits with a probability that falls as traffic rises, up to the hard
// capacity. It is safe for concurrent use; build it with NewSuppressed and
// Close it to stop its sweep.
type Suppressed struct{ w window.LocalSuppressed }

// NewSuppressed returns a suppressed limiter. Beyond the absolute options
// it reads WithHardLimitFactor, WithSuppressionCache and WithRandom.
func NewSuppressed(opts ...limiter.Option) (*Suppressed, error) {
	w, err := window.NewLocalSuppressed(opts...)
	if err != nil {
		return nil, err
	}
	return &Suppressed{*w}, nil
}

// Inc offers n units of key at rate. A call with valid arguments draws one
// number from WithRandom's source; the default source is drawn only when
// a suppression factor decides.
func (l *Suppressed) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	var d limiter.Decision
	err := l.w.IncTo(ctx, k, rate, n, &d)
	return d, err
}

// IsAllowed reports whether one more unit of key would be admitted without
// suppression now. It records and draws nothing.
func (l *Suppressed) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	var d limiter.Decision
	err := l.w.IsAllowedTo(ctx, k, &d)
	return d, err
}

// Get returns key's accepted and declined units in the live window.
func (l *Suppressed) Get(ctx context.Context, k string) (limiter.Usage, error) {
	return l.w.Get(ctx, k)
}

// Reset forgets key.
func (l *Suppressed) Reset(ctx context.Context, k string) error { return l.w.Reset(ctx, k) }

// IncSet offers n units of key to every limit of set: admitted when the
// draw (one per call) is at or above every limit's factor, and recorded in
// every limit, as declined when refused.
func (l *Suppressed) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return l.w.IncSet(ctx, k, set, n)
}

// GetSet returns key's accepted and declined units in each limit of set.
func (l *Suppressed) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return l.w.GetSet(ctx, k, set)
}

// ResetSet forgets key's state in every limit of set.
func (l *Suppressed) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return l.w.ResetSet(ctx, k, set)
}

// Close stops the sweep, waiting for it until ctx is done.
func (l *Suppressed) Close(ctx context.Context) error { return l.w.Close(ctx) }

// Window returns the window the limiter was built with (WithWindow).
func (l *Suppressed) Window() time.Duration { return l.w.Window() }
