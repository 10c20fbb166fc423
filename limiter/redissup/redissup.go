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
// use; build it with New (the zero value is not usable). It holds no
// connection of its own: the caller owns and closes the client.
type Limiter struct {
	p redisprov.Provider
	// The Guard and p as its Backend: Inc and IsAllowed call the Guard
	// directly, one call deep.
	g  *redisprov.Guard
	be redisprov.Backend
}

var (
	_ limiter.Limiter                     = (*Limiter)(nil)
	_ limiter.SetLimiter                  = (*Limiter)(nil)
	_ interface{ Window() time.Duration } = (*Limiter)(nil)
)

// New returns a suppressed limiter that keeps its state in Redis through
// client. It reads every option of package limiter (package hybrid's are
// ErrInvalidConfig): WithWindow, WithBucket,
// WithHardLimitFactor, WithSuppressionCache, WithRandom and WithPrefix shape
// the decisions; WithClock replaces Redis TIME by the given clock, which is
// meant for tests and simulations (every instance of a fleet must share one
// clock, and Redis TIME is that clock). A nil client or a bad option is
// ErrInvalidConfig. WithTimeout, WithFailurePolicy, WithFallbackInstances,
// WithProbeInterval and WithObserver set what happens when
// Redis fails (docs/operations.md, When Redis fails).
// limiter.WithBatching(n) lets concurrent calls share round trips (on by
// default). New starts no goroutine and makes no call to Redis.
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

// Inc offers n units of key at rate, in one script call bounded by
// WithTimeout; n = 0 decides for one unit and records nothing. At or below
// the soft capacity S = C the request is Allowed; beyond the hard capacity
// H it is refused with factor 1; in between it is admitted with
// probability 1 − f. Refused units are recorded as declined: they drive f.
// Every call with valid arguments that asks Redis or the local fallback
// draws exactly one number from the random source (peeks too), before
// Redis is asked, so a failed call still consumes its draw.
//
// A call is never retried. When Redis is unavailable (see
// limiter.WithFailurePolicy) the failure policy answers, with Degraded
// set, and later calls do not ask Redis until the probe finds it back.
func (l *Limiter) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	return l.g.Decide(ctx, l.be, "inc", k, rate, n, false)
}

// IsAllowed reports whether one more unit of key would be admitted now
// without suppression, at the capacities stored by the key's latest Inc;
// above the soft capacity it reports the factor an Inc would apply. It
// writes nothing and draws nothing. A key with no live state is allowed,
// with Limit 0.
func (l *Limiter) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	return l.g.Decide(ctx, l.be, "is allowed", k, limiter.Rate{}, 0, true)
}

// Get returns key's usage in the live window: the units admitted (Used),
// the units declined (Declined) and the stored soft capacity, all 0 for a
// key with no live state. It writes nothing; an unavailable Redis is an
// error under every policy.
func (l *Limiter) Get(ctx context.Context, k string) (limiter.Usage, error) { return l.p.Get(ctx, k) }

// Reset forgets key: it UNLINKs the key's hash and drops what the local
// fallback and hot-key relief hold for it.
func (l *Limiter) Reset(ctx context.Context, k string) error { return l.p.Reset(ctx, k) }

// IncSet offers n units of key to every limit of set in one script call.
// Each limit computes what a single Inc at its rate, window and bucket
// would: Allowed at or below its soft capacity, factor 1 above its hard
// capacity (Never when n exceeds it), else its own factor, cached in its
// own hash. The call is admitted when the draw is at or above the largest
// of the factors, and the offer is recorded in every limit, as declined in
// every limit when refused. Like Inc, it draws exactly one number.
func (l *Limiter) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return l.p.IncSet(ctx, k, set, n)
}

// GetSet returns key's usage in each limit of set, in the set's order, as
// Get reads one key.
func (l *Limiter) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return l.p.GetSet(ctx, k, set)
}

// ResetSet forgets key's state in every limit of set, as Reset does one.
func (l *Limiter) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return l.p.ResetSet(ctx, k, set)
}

// Close marks the limiter closed (later calls return ErrClosed), stops its
// background work and waits for it until ctx is done. It does not close
// the client. Closing twice is harmless.
func (l *Limiter) Close(ctx context.Context) error { return l.p.Close(ctx) }

// Ping checks that Redis answers this limiter with one script call on a
// key of its own, whatever the breaker's state: call it at start-up to
// turn a wrong address or password into an error.
func (l *Limiter) Ping(ctx context.Context) error { return l.p.Ping(ctx) }
