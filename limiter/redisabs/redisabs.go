package redisabs

import (
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/rediscore"
)

// Limiter is the absolute limiter on Redis: a request is admitted while the
// key's sliding window, shared by every process that uses the same Redis
// and prefix, has room for all of it. It is safe for concurrent use. Build
// it with New; the zero value is not usable. It is rediscore.Limiter,
// which package redissup returns too: its methods are documented there,
// for both strategies.
type Limiter = rediscore.Limiter

// Client is the part of a go-redis client the limiter calls: script
// execution and UNLINK. *redis.Client, *redis.ClusterClient, *redis.Ring
// and the failover clients of go-redis v9 satisfy it.
type Client = rediscore.Client

// New returns an absolute limiter that keeps its state in Redis through
// client. It reads WithWindow, WithBucket, WithPrefix and WithClock (given
// WithClock, the clock's reading replaces Redis TIME: for tests only, since
// key expiry still runs on the Redis server's clock). WithTimeout,
// WithFailurePolicy, WithFallbackInstances, WithProbeInterval,
// and WithObserver set what happens when Redis fails, and who hears of it
// (docs/operations.md, When Redis fails). limiter.WithBatching(n) lets
// concurrent calls share round trips (on by default). It starts no
// goroutine and makes no call to Redis. A nil client is ErrInvalidConfig.
func New(client Client, opts ...limiter.Option) (*Limiter, error) {
	return rediscore.NewAbsolute(client, opts...)
}
