package redisabs

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/config"
	"github.com/sluice-go/sluice/internal/failover"
	"github.com/sluice-go/sluice/internal/redisx"
	"github.com/sluice-go/sluice/internal/relief"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

// Client is the part of a go-redis client the limiter calls: script
// execution (EVALSHA, EVAL, SCRIPT LOAD, SCRIPT EXISTS) and UNLINK.
// *redis.Client, *redis.ClusterClient, *redis.Ring and the failover clients
// of go-redis v9 satisfy it.
type Client interface {
	redis.Scripter
	Unlink(ctx context.Context, keys ...string) *redis.IntCmd
}

// Every Client is one for the shared provider code.
var _ redisx.Client = Client(nil)

// Limiter is the absolute limiter on Redis: a request is admitted while the
// key's sliding window, shared by every process that uses the same Redis
// and prefix, has room for all of it. It is safe for concurrent use. Build
// it with New; the zero value is not usable.
type Limiter struct {
	b redisx.Base
	g failover.Guard
	// relief remembers refusals (hot-key relief), nil when it is off.
	relief *relief.Memory
	peeks  relief.Peeks
}

var (
	_ limiter.Limiter  = (*Limiter)(nil)
	_ limiter.Windowed = (*Limiter)(nil)
)

// Window returns the window the limiter was built with (WithWindow).
func (l *Limiter) Window() time.Duration { return l.b.Cfg.Window }

// New returns an absolute limiter that keeps its state in Redis through
// client. It reads WithWindow, WithBucket, WithPrefix and WithClock (given
// WithClock, the clock's reading replaces Redis TIME: for tests only, since
// key expiry still runs on the Redis server's clock). WithTimeout,
// WithFailurePolicy, WithFallbackInstances, WithProbeInterval,
// WithStateChange and WithLogger set what happens when Redis fails
// (docs/operations.md, When Redis fails). limiter.WithBatching(n) lets
// concurrent calls share round trips (on by default). It starts no
// goroutine and makes no call to Redis. A nil client is ErrInvalidConfig.
func New(client Client, opts ...limiter.Option) (*Limiter, error) {
	l := &Limiter{}
	if err := l.b.Init("redisabs", key.Absolute, client, opts); err != nil {
		return nil, err
	}
	l.initGuard(client, opts)
	if !l.b.Cfg.NoRelief {
		l.relief = new(relief.Memory)
		l.relief.Init(l.b.Cfg.WindowMs, l.b.Cfg.BucketMs, l.b.Cfg.CacheMs)
	}
	return l, nil
}

// inc is Inc's call to Redis.
func (l *Limiter) inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	if err := l.b.Valid("inc", k); err != nil {
		return limiter.Decision{}, err
	}
	if err := config.CheckCost(n); err != nil {
		return limiter.Decision{}, l.b.Errorf("inc", err)
	}
	c, err := limiter.Capacity(rate, l.b.Cfg.Window)
	if err != nil {
		return limiter.Decision{}, l.b.Errorf("inc", err)
	}
	if l.relief != nil {
		// Before the key's hash name is built: a remembered refusal
		// allocates nothing.
		if r, ok := l.relief.Answer(k, c, c, n, l.b.Cfg.NowMs(), 0); ok {
			return r.Decision(), nil
		}
	}
	h, err := l.b.Check("inc", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	if n == 0 || n > c || l.relief == nil {
		// A request over the capacity is refused whatever its size: the
		// script sees C + 1, so its numbers stay exact in a double.
		return l.decide(ctx, "inc", h, c, min(n, c+1))
	}
	r, err := l.relief.Decide(ctx, k, c, c, n, 0, l.b.Cfg.NowMs, func(ctx context.Context, _ int64) (window.Result, error) {
		return l.run(ctx, "inc", h, c, n)
	})
	if err != nil {
		return limiter.Decision{}, err
	}
	return r.Decision(), nil
}

// isAllowed is IsAllowed's call to Redis.
func (l *Limiter) isAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	h, err := l.b.Check("is allowed", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	if l.relief == nil {
		return l.decide(ctx, "is allowed", h, 0, 0)
	}
	return l.peeks.Do(ctx, k, func(ctx context.Context) (limiter.Decision, error) {
		return l.decide(ctx, "is allowed", h, 0, 0)
	})
}

// decide runs abs_inc.lua; c = 0 asks for the stored capacity.
func (l *Limiter) decide(ctx context.Context, op, h string, c, n int64) (limiter.Decision, error) {
	r, err := l.run(ctx, op, h, c, n)
	if err != nil {
		return limiter.Decision{}, err
	}
	return r.Decision(), nil
}

// run is decide's script call, its reply read.
func (l *Limiter) run(ctx context.Context, op, h string, c, n int64) (window.Result, error) {
	v, err := l.b.Run(ctx, scripts.AbsInc, []string{h},
		redisx.NowArg(&l.b.Cfg), l.b.W, l.b.B, c, n, l.b.TTL)
	if err != nil {
		return window.Result{}, l.b.Errorf(op, err)
	}
	r, err := redisx.Decision(v, c, window.OutcomeAllowed, window.OutcomeRejected)
	if err != nil {
		return window.Result{}, l.b.Errorf(op, err)
	}
	return r, nil
}

// get is Get's call to Redis.
func (l *Limiter) get(ctx context.Context, k string) (limiter.Usage, error) {
	h, err := l.b.Check("get", k)
	if err != nil {
		return limiter.Usage{}, err
	}
	v, err := l.b.Run(ctx, scripts.AbsGet, []string{h}, redisx.NowArg(&l.b.Cfg), l.b.W, l.b.B)
	if err != nil {
		return limiter.Usage{}, l.b.Errorf("get", err)
	}
	x, err := redisx.Int64s(v, 2)
	if err != nil {
		return limiter.Usage{}, l.b.Errorf("get", err)
	}
	return limiter.Usage{Used: x[0], Limit: x[1]}, nil
}

// Ping checks that Redis answers this limiter: one script call that
// writes a unit to a key of the limiter's own (never a caller's key),
// bounded by WithTimeout on top of ctx, whatever the state of the circuit
// breaker. Call it at start-up: a wrong address, a refused password or a
// Redis that refuses writes is an error naming the address, where Inc
// would answer from the local fallback (FallbackLocal, the default) and
// say so only in Decision.Degraded and the log.
func (l *Limiter) Ping(ctx context.Context) error { return l.g.Ping(ctx) }
