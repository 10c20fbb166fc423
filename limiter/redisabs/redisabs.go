package redisabs

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/limiter"
)

// Client is the part of a go-redis client the limiter calls: script
// execution (EVALSHA, EVAL, SCRIPT LOAD, SCRIPT EXISTS) and UNLINK.
// *redis.Client, *redis.ClusterClient, *redis.Ring and the failover clients
// of go-redis v9 satisfy it, and so does the rueidis adapter of module
// sluicerueidis. A client that is not go-redis' may also have
// ScriptPipelined(ctx, fn func(pipe redis.Scripter)) error, which queues
// the script calls fn makes on pipe and sends them in one round trip: the
// failure policy's write-back then batches its calls, as it does with a
// go-redis client's Pipeline.
type Client interface {
	redis.Scripter
	Unlink(ctx context.Context, keys ...string) *redis.IntCmd
}

// Limiter is the absolute limiter on Redis: a request is admitted while the
// key's sliding window, shared by every process that uses the same Redis
// and prefix, has room for all of it. It is safe for concurrent use. Build
// it with New; the zero value is not usable. It holds no connection of its
// own: the caller owns and closes the client.
type Limiter struct {
	p redisprov.Provider
	// g and be are p's Guard and p as its Backend, so that Inc and
	// IsAllowed call the Guard directly (one call deep: inlined at the
	// caller's site).
	g  *redisprov.Guard
	be redisprov.Backend
}

var (
	_ limiter.Limiter                     = (*Limiter)(nil)
	_ limiter.SetLimiter                  = (*Limiter)(nil)
	_ interface{ Window() time.Duration } = (*Limiter)(nil)
)

// New returns an absolute limiter that keeps its state in Redis through
// client. It reads WithWindow, WithBucket, WithPrefix and WithClock (given
// WithClock, the clock's reading replaces Redis TIME: for tests only, since
// key expiry still runs on the Redis server's clock). WithTimeout,
// WithFailurePolicy, WithFallbackInstances, WithProbeInterval,
// and WithObserver set what happens when Redis fails, and who hears of it
// (docs/operations.md, When Redis fails). limiter.WithBatching(n) lets
// concurrent calls share round trips (on by default), and
// WithHotKeyRelief turns hot-key relief off or on. Any other option (the
// suppressed strategy's, package hybrid's) is ErrInvalidConfig, as is a
// nil client. It starts no goroutine and makes no call to Redis.
func New(client Client, opts ...limiter.Option) (*Limiter, error) {
	l := &Limiter{}
	if err := l.p.Init(redisprov.Absolute, client, opts); err != nil {
		return nil, err
	}
	l.g, l.be = l.p.Decider()
	return l, nil
}

// Window returns the window the limiter was built with (WithWindow).
func (l *Limiter) Window() time.Duration { return l.p.Window() }

// Inc offers n units of key at rate, in one script call bounded by
// WithTimeout; n = 0 decides for one unit and records nothing. The units
// are admitted if they all fit in the window, and recorded; a refusal
// records nothing.
//
// A call is never retried: one that timed out may or may not have counted.
// When Redis is unavailable (see limiter.WithFailurePolicy) the failure
// policy answers, with Degraded set, and later calls do not ask Redis until
// the background probe finds it back.
func (l *Limiter) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	return l.g.Decide(ctx, l.be, "inc", k, rate, n, false)
}

// IsAllowed reports whether one more unit of key would be admitted now, at
// the capacity stored by the key's latest Inc. It writes nothing. A key
// with no live state is allowed, with Limit 0. Redis failures are handled
// as for Inc.
func (l *Limiter) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	return l.g.Decide(ctx, l.be, "is allowed", k, limiter.Rate{}, 0, true)
}

// Get returns key's usage in the live window: the units admitted (Used)
// and the stored capacity, both 0 for a key with no live state. It writes
// nothing. It has no Decision to mark as degraded, so under every policy
// an unavailable Redis is an error: Redis's own, or ErrUnavailable while
// the breaker is open.
func (l *Limiter) Get(ctx context.Context, k string) (limiter.Usage, error) { return l.p.Get(ctx, k) }

// Reset forgets key: it UNLINKs the key's hash, and drops what the local
// fallback and hot-key relief hold for it. Redis failures are errors, as
// for Get.
func (l *Limiter) Reset(ctx context.Context, k string) error { return l.p.Reset(ctx, k) }

// IncSet offers n units of key to every limit of set, in one script call
// over one hash per limit (all in the key's hash slot: docs/data-model.md),
// bounded by WithTimeout; n = 0 is a peek for one unit that records
// nothing. The units are admitted if every limit has room for them, and
// then recorded in every limit; a refusal records nothing. Redis failures
// are handled as for Inc: the local fallback decides sets too, and what it
// admits is written back to every limit of the set when Redis returns.
func (l *Limiter) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return l.p.IncSet(ctx, k, set, n)
}

// GetSet returns key's usage in the live window of each limit of set, in
// the set's order, as Get reads one key. Redis failures are errors, as
// for Get.
func (l *Limiter) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return l.p.GetSet(ctx, k, set)
}

// ResetSet forgets key's state in every limit of set: one UNLINK of their
// hashes, and what the local fallback holds for them. The key's
// single-limit hash and the hashes of limits of other names stay.
func (l *Limiter) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return l.p.ResetSet(ctx, k, set)
}

// Close marks the limiter closed: later calls return ErrClosed. It stops
// the background probe and the local fallback, and waits for them and for
// the batching goroutines (which end once the calls made before Close are
// answered) until ctx is done (then it returns ctx's error). It does not
// close the client. Closing twice is harmless.
func (l *Limiter) Close(ctx context.Context) error { return l.p.Close(ctx) }

// Ping checks that Redis answers this limiter: one script call that
// writes a unit to a key of the limiter's own (never a caller's key),
// bounded by WithTimeout on top of ctx, whatever the state of the circuit
// breaker. Call it at start-up: a wrong address, a refused password or a
// Redis that refuses writes is an error naming the address, where Inc
// would answer from the local fallback and say so only in
// Decision.Degraded and the log.
func (l *Limiter) Ping(ctx context.Context) error { return l.p.Ping(ctx) }
