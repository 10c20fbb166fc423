package redissup

import (
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/rediscore"
)

// Limiter is the suppressed strategy on Redis. It is safe for concurrent
// use; build it with New (the zero value is not usable). It holds no
// connection of its own: the caller owns and closes the client. It is
// rediscore.Limiter, which package redisabs returns too: its methods are
// documented there, for both strategies.
type Limiter = rediscore.Limiter

// Client is the part of a go-redis client the limiter calls, as for
// package redisabs.
type Client = rediscore.Client

// New returns a suppressed limiter that keeps its state in Redis through
// client. It reads every option: WithWindow, WithBucket,
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
	return rediscore.NewSuppressed(client, opts...)
}
