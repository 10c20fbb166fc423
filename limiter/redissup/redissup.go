package redissup

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

// Limiter is the suppressed strategy on Redis. It is safe for concurrent
// use; build it with New (the zero value is not usable). It holds no
// connection of its own; its only goroutine is the probe that runs while
// Redis is unavailable (see limiter.WithFailurePolicy). Close stops it and
// makes later calls fail with ErrClosed; the caller still owns and closes
// the client.
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

// New returns a suppressed limiter that keeps its state in Redis through
// client. It reads every option: WithWindow, WithBucket,
// WithHardLimitFactor, WithSuppressionCache, WithRandom and WithPrefix shape
// the decisions; WithClock replaces Redis TIME by the given clock, which is
// meant for tests and simulations (every instance of a fleet must share one
// clock, and Redis TIME is that clock). A nil client or a bad option is
// ErrInvalidConfig. WithTimeout, WithFailurePolicy, WithFallbackInstances,
// WithProbeInterval, WithStateChange and WithLogger set what happens when
// Redis fails (docs/operations.md, When Redis fails).
// limiter.WithBatching(n) lets concurrent calls share round trips (on by
// default). New starts no goroutine and makes no call to Redis.
func New(client Client, opts ...limiter.Option) (*Limiter, error) {
	l := &Limiter{}
	if err := l.b.Init("redissup", key.Suppressed, client, opts); err != nil {
		return nil, err
	}
	l.initGuard(client, opts)
	if !l.b.Cfg.NoRelief {
		l.relief = new(relief.Memory)
		l.relief.Init(l.b.Cfg.WindowMs, l.b.Cfg.BucketMs, l.b.Cfg.CacheMs)
	}
	return l, nil
}

// usageLen is the length of sup_get.lua's reply.
const usageLen = 3

// inc is Inc's call to Redis.
func (l *Limiter) inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	if err := l.b.Valid("inc", k); err != nil {
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
	if l.relief != nil && n > 0 {
		// Before the key's hash name is built: a remembered refusal
		// allocates nothing.
		if r, ok := l.relief.Answer(k, soft, hard, n, l.b.Cfg.NowMs(), draw); ok {
			return r.Decision(), nil
		}
	}
	h, err := l.b.Check("inc", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	if l.relief == nil {
		r, err := l.run(ctx, h, soft, hard, n, draw, 0)
		if err != nil {
			return limiter.Decision{}, err
		}
		return r.Decision(), nil
	}
	if n == 0 {
		// A peek writes nothing: the declines memory made wait for a
		// call that writes.
		r, err := l.run(ctx, h, soft, hard, n, draw, 0)
		if err != nil {
			return limiter.Decision{}, err
		}
		return r.Decision(), nil
	}
	r, err := l.relief.Decide(ctx, k, soft, hard, n, draw, l.b.Cfg.NowMs, func(ctx context.Context, decl int64) (window.Result, error) {
		return l.run(ctx, h, soft, hard, n, draw, decl)
	})
	if err != nil {
		return limiter.Decision{}, err
	}
	return r.Decision(), nil
}

// run is one call of sup_inc.lua, its reply read. decl > 0 reports units
// declined from memory (hot-key relief) with the call, through the
// hybrid's arguments of the script, whose reply begins with the decision.
func (l *Limiter) run(ctx context.Context, h string, soft, hard, n, draw, decl int64) (window.Result, error) {
	args := []any{redisx.NowArg(&l.b.Cfg), l.b.W, l.b.B, soft, hard, window.RecordedCost(n, hard), l.b.Cache, draw, l.b.TTL}
	if decl > 0 {
		args = append(args, 0, 0, 0, decl)
	}
	v, err := l.b.Run(ctx, scripts.SupInc, []string{h}, args...)
	if err != nil {
		return window.Result{}, l.b.Errorf("inc", err)
	}
	if arr, ok := v.([]any); ok && decl > 0 && len(arr) > decisionLen {
		v = arr[:decisionLen]
	}
	r, err := redisx.Decision(v, soft, window.OutcomeAllowed, window.OutcomeSuppressed)
	if err != nil {
		return window.Result{}, l.b.Errorf("inc", err)
	}
	return r, nil
}

// decisionLen is the length of the decision at the head of sup_inc.lua's
// long replies.
const decisionLen = 8

// isAllowed is IsAllowed's call to Redis.
func (l *Limiter) isAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	h, err := l.b.Check("is allowed", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	if l.relief == nil {
		return l.peek(ctx, h)
	}
	return l.peeks.Do(ctx, k, func(ctx context.Context) (limiter.Decision, error) { return l.peek(ctx, h) })
}

// peek is isAllowed's script call.
func (l *Limiter) peek(ctx context.Context, h string) (limiter.Decision, error) {
	v, err := l.b.Run(ctx, scripts.SupAllowed, []string{h},
		redisx.NowArg(&l.b.Cfg), l.b.W, l.b.Cache, l.b.B)
	if err != nil {
		return limiter.Decision{}, l.b.Errorf("is allowed", err)
	}
	r, err := redisx.Decision(v, 0, window.OutcomeAllowed, window.OutcomeSuppressed)
	if err != nil {
		return limiter.Decision{}, l.b.Errorf("is allowed", err)
	}
	return r.Decision(), nil
}

// get is Get's call to Redis.
func (l *Limiter) get(ctx context.Context, k string) (limiter.Usage, error) {
	h, err := l.b.Check("get", k)
	if err != nil {
		return limiter.Usage{}, err
	}
	v, err := l.b.Run(ctx, scripts.SupGet, []string{h}, redisx.NowArg(&l.b.Cfg), l.b.W, l.b.B)
	if err != nil {
		return limiter.Usage{}, l.b.Errorf("get", err)
	}
	x, err := redisx.Int64s(v, usageLen)
	if err != nil {
		return limiter.Usage{}, l.b.Errorf("get", err)
	}
	u := limiter.Usage{Used: x[0], Declined: x[1], Limit: x[2]}
	if l.relief != nil {
		// Units declined from memory reach Redis with the key's next
		// call; until then they are counted here.
		u.Declined += l.relief.Pending(k, l.b.Cfg.NowMs())
	}
	return u, nil
}

// Ping checks that Redis answers this limiter: one script call that
// writes a unit to a key of the limiter's own (never a caller's key),
// bounded by WithTimeout on top of ctx, whatever the state of the circuit
// breaker. Call it at start-up: a wrong address, a refused password or a
// Redis that refuses writes is an error naming the address, where Inc
// would answer from the local fallback (FallbackLocal, the default) and
// say so only in Decision.Degraded and the log.
func (l *Limiter) Ping(ctx context.Context) error { return l.g.Ping(ctx) }
