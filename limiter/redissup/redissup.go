package redissup

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/limiter"
)

// Client is the part of a go-redis client the limiter calls, as for
// package redisabs: script execution and UNLINK.
type Client interface {
	redis.Scripter
	Unlink(ctx context.Context, keys ...string) *redis.IntCmd
}

// Limiter is the suppressed strategy on Redis. It is safe for concurrent
// use; build it with New (the zero value is not usable). The caller owns
// and closes the client.
type Limiter struct {
	p  redisprov.Provider
	g  *redisprov.Guard  // p's Guard, called directly by Inc and IsAllowed
	be redisprov.Backend // p as the Guard's Backend
}

// New returns a suppressed limiter on client. It reads every option of
// package limiter (WithClock, for tests, replaces Redis TIME); package
// hybrid's options, a bad option or a nil client are ErrInvalidConfig. It
// starts no goroutine and makes no call to Redis.
func New(client Client, opts ...limiter.Option) (*Limiter, error) {
	l := &Limiter{}
	if err := l.p.Init(redisprov.Suppressed, client, opts); err != nil {
		return nil, err
	}
	l.g, l.be = l.p.Decider()
	return l, nil
}

// Window returns the window the limiter was built with (WithWindow).
func (l *Limiter) Window() time.Duration { return l.p.Window() }

// Inc offers n units of key at rate in one script call bounded by
// WithTimeout; n = 0 decides for one unit and records nothing. At or below
// the soft capacity C it is allowed, above the hard capacity H refused
// with factor 1, in between admitted with probability 1 − f; refused
// units are recorded as declined. A call with valid arguments draws one
// number before Redis is asked (a failed call too). It is never retried;
// while Redis is unavailable the failure policy answers (Degraded).
func (l *Limiter) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	return l.g.Decide(ctx, l.be, "inc", k, rate, n, false)
}

// IsAllowed reports whether one more unit of key would be admitted now
// without suppression, at the capacities its latest Inc stored; above the
// soft capacity it reports the factor an Inc would apply. It writes and
// draws nothing; a key with no live state is allowed, with Limit 0.
func (l *Limiter) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	return l.g.Decide(ctx, l.be, "is allowed", k, limiter.Rate{}, 0, true)
}

// Get returns key's admitted and declined units and stored soft capacity
// in the live window. An unavailable Redis is an error under every policy.
func (l *Limiter) Get(ctx context.Context, k string) (limiter.Usage, error) { return l.p.Get(ctx, k) }

// Reset forgets key: it UNLINKs its hash and drops what the fallback and
// hot-key relief hold for it.
func (l *Limiter) Reset(ctx context.Context, k string) error { return l.p.Reset(ctx, k) }

// IncSet offers n units of key to every limit of set in one script call:
// admitted when the draw (one per call) is at or above every limit's
// factor, each computed as a single Inc's, and recorded in every limit, as
// declined when refused.
func (l *Limiter) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return l.p.IncSet(ctx, k, set, n)
}

// GetSet returns key's usage in each limit of set, in the set's order.
func (l *Limiter) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return l.p.GetSet(ctx, k, set)
}

// ResetSet forgets key's state in every limit of set.
func (l *Limiter) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return l.p.ResetSet(ctx, k, set)
}

// Close marks the limiter closed (later calls return ErrClosed), stops its
// background work and waits for it until ctx is done. It does not close
// the client; closing twice is harmless.
func (l *Limiter) Close(ctx context.Context) error { return l.p.Close(ctx) }

// Ping checks at start-up that Redis answers this limiter, with one script
// call on a key of its own, whatever the breaker's state.
func (l *Limiter) Ping(ctx context.Context) error { return l.p.Ping(ctx) }
