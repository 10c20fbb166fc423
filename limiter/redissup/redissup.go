package redissup

import (
	"context"

	"github.com/sluice-go/sluice/internal/config"
	"github.com/sluice-go/sluice/internal/redisx"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

// Client is what the limiter calls: script evaluation and UNLINK.
// *redis.Client, *redis.ClusterClient, *redis.Ring and the failover clients
// of go-redis v9 satisfy it.
type Client = redisx.Client

// Limiter is the suppressed strategy on Redis. It is safe for concurrent
// use; build it with New (the zero value is not usable). It holds no
// connection of its own and starts no goroutine: Close only makes later
// calls fail with ErrClosed, and the caller still owns and closes the
// client.
type Limiter struct{ b redisx.Base }

var _ limiter.Limiter = (*Limiter)(nil)

// New returns a suppressed limiter that keeps its state in Redis through
// client. It reads every option: WithWindow, WithBucket,
// WithHardLimitFactor, WithSuppressionCache, WithRandom and WithPrefix shape
// the decisions; WithClock replaces Redis TIME by the given clock, which is
// meant for tests and simulations (every instance of a fleet must share one
// clock, and Redis TIME is that clock). A nil client or a bad option is
// ErrInvalidConfig. New starts no goroutine and makes no call to Redis.
func New(client Client, opts ...limiter.Option) (*Limiter, error) {
	l := &Limiter{}
	if err := l.b.Init("redissup", key.Suppressed, client, opts); err != nil {
		return nil, err
	}
	return l, nil
}

// usageLen is the length of sup_get.lua's reply.
const usageLen = 3

// Inc offers n units of key at rate, in one script call. At or below the
// soft capacity S = C the request is Allowed; beyond the hard capacity H it
// is refused with factor 1; in between it is admitted with probability
// 1 − f. n = 0 is a peek for one unit that records nothing. Every call with
// valid arguments draws exactly one number from the random source (peeks
// too), before Redis is asked, so a failed call still consumes its draw.
func (l *Limiter) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	h, err := l.b.Check("inc", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	if err := config.CheckCost(n); err != nil {
		return limiter.Decision{}, l.b.Errorf("inc", err)
	}
	soft, err := limiter.Capacity(rate, l.b.Cfg.Window)
	if err != nil {
		return limiter.Decision{}, l.b.Errorf("inc", err)
	}
	hard, err := limiter.HardCapacity(rate, l.b.Cfg.Window, l.b.Cfg.HardLimitFactor)
	if err != nil {
		return limiter.Decision{}, l.b.Errorf("inc", err)
	}
	draw := window.DrawPPM(l.b.Cfg.Rand())
	v, err := scripts.SupInc.Run(ctx, l.b.Client, []string{h},
		redisx.NowArg(&l.b.Cfg), l.b.W, l.b.B, soft, hard, n, l.b.Cache, draw, l.b.TTL).Result()
	if err != nil {
		return limiter.Decision{}, l.b.Errorf("inc", err)
	}
	r, err := redisx.Decision(v, soft, window.OutcomeAllowed, window.OutcomeSuppressed)
	if err != nil {
		return limiter.Decision{}, l.b.Errorf("inc", err)
	}
	return r.Decision(), nil
}

// IsAllowed reports whether one more unit of key would be admitted without
// suppression now, at the capacities stored by the key's latest Inc. Above
// the soft capacity it reports the factor an Inc would apply. It writes
// nothing and draws nothing. A key with no live state is allowed with
// Limit 0.
func (l *Limiter) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	h, err := l.b.Check("is allowed", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	v, err := scripts.SupAllowed.Run(ctx, l.b.Client, []string{h},
		redisx.NowArg(&l.b.Cfg), l.b.W, l.b.Cache).Result()
	if err != nil {
		return limiter.Decision{}, l.b.Errorf("is allowed", err)
	}
	r, err := redisx.Decision(v, 0, window.OutcomeAllowed, window.OutcomeSuppressed)
	if err != nil {
		return limiter.Decision{}, l.b.Errorf("is allowed", err)
	}
	return r.Decision(), nil
}

// Get returns key's accepted (Used) and declined units in the live window
// and its stored soft capacity. It writes nothing.
func (l *Limiter) Get(ctx context.Context, k string) (limiter.Usage, error) {
	h, err := l.b.Check("get", k)
	if err != nil {
		return limiter.Usage{}, err
	}
	v, err := scripts.SupGet.Run(ctx, l.b.Client, []string{h}, redisx.NowArg(&l.b.Cfg), l.b.W).Result()
	if err != nil {
		return limiter.Usage{}, l.b.Errorf("get", err)
	}
	x, err := redisx.Int64s(v, usageLen)
	if err != nil {
		return limiter.Usage{}, l.b.Errorf("get", err)
	}
	return limiter.Usage{Used: x[0], Declined: x[1], Limit: x[2]}, nil
}

// Reset forgets key: it UNLINKs the key's hash.
func (l *Limiter) Reset(ctx context.Context, k string) error { return l.b.Reset(ctx, k) }

// Close makes later calls return ErrClosed. It does not close the client.
// Closing twice is harmless; ctx is not consulted.
func (l *Limiter) Close(context.Context) error {
	l.b.Close()
	return nil
}
