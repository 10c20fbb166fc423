package redisabs

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/config"
	"github.com/sluice-go/sluice/internal/failover"
	"github.com/sluice-go/sluice/internal/redisx"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

// initGuard sets up the failure policy, breaker and fallback.
func (l *Limiter) initGuard(client Client, opts []limiter.Option) {
	cfg := &l.b.Cfg
	l.g.Init("redisabs", key.Absolute, client, cfg, opts, failover.Probe(client, cfg), failover.Reconciler{
		Script: scripts.AbsInc,
		// The units are recorded at Redis TIME with the capacity of the
		// key's latest rate, like an Inc of that many units.
		Queue: func(ctx context.Context, pipe redis.Scripter, p *failover.Pending, n int64) *redis.Cmd {
			c, _ := limiter.Capacity(p.Rate, cfg.Window) // validated by the Inc that admitted them
			return scripts.AbsInc.EvalSha(ctx, pipe, []string{p.Hash}, redisx.NowArg(cfg), l.b.W, l.b.B, c, n, l.b.TTL)
		},
		// All or nothing: when the key has less room than n (another
		// instance wrote meanwhile), fill the room instead.
		More: func(cmd *redis.Cmd, p *failover.Pending, n int64) int64 {
			c, _ := limiter.Capacity(p.Rate, cfg.Window)
			r, err := redisx.Decision(cmd.Val(), c, window.OutcomeAllowed, window.OutcomeRejected)
			if err != nil || r.Allowed || r.Never {
				return 0
			}
			return min(r.Remaining, n)
		},
	})
}

// call validates an Inc (or, with peek, an IsAllowed) for the policy.
func (l *Limiter) call(op, k string, rate limiter.Rate, n int64, peek bool) (*failover.Call, error) {
	h, err := l.b.Check(op, k)
	if err != nil {
		return nil, err
	}
	if peek {
		return &failover.Call{Op: op, Key: k, Hash: h, Peek: true}, nil
	}
	if err := config.CheckCost(n); err != nil {
		return nil, l.b.Errorf(op, err)
	}
	c, err := limiter.Capacity(rate, l.b.Cfg.Window)
	if err != nil {
		return nil, l.b.Errorf(op, err)
	}
	return &failover.Call{Op: op, Key: k, Hash: h, Rate: rate, N: n, C: c, Hard: c}, nil
}

// answer is the policy's answer to a call Redis cannot take.
func (l *Limiter) answer(ctx context.Context, op, k string, rate limiter.Rate, n int64, peek bool, err error) (limiter.Decision, error) {
	if err != nil { // the Redis call failed
		if ctx.Err() != nil || !failover.Unavailable(err) {
			return l.g.Failed(ctx, &failover.Call{Op: op}, err)
		}
	}
	c, verr := l.call(op, k, rate, n, peek)
	if verr != nil {
		return limiter.Decision{}, verr
	}
	if err != nil {
		return l.g.Failed(ctx, c, err)
	}
	return l.g.Answer(ctx, c)
}

// Inc admits n units of key at rate if they all fit in the window, and
// records them; a refusal records nothing. n = 0 decides for one unit and
// records nothing. It costs one script call, bounded by WithTimeout. A
// call is never retried: one that timed out may or may not have counted.
// When Redis is unavailable (see limiter.WithFailurePolicy) the failure
// policy answers, with Degraded set, and later calls do not ask Redis until
// the background probe finds it back.
func (l *Limiter) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	if l.g.Open() {
		return l.answer(ctx, "inc", k, rate, n, false, nil)
	}
	cctx, cancel := l.g.Context(ctx)
	d, err := l.inc(cctx, k, rate, n)
	cancel()
	if err != nil {
		return l.answer(ctx, "inc", k, rate, n, false, err)
	}
	return d, nil
}

// IsAllowed reports whether one more unit of key would be admitted now at
// the capacity stored by its latest Inc. It writes nothing. A key with no
// live state is allowed, with Limit 0. Redis failures are handled as for
// Inc.
func (l *Limiter) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	if l.g.Open() {
		return l.answer(ctx, "is allowed", k, limiter.Rate{}, 0, true, nil)
	}
	cctx, cancel := l.g.Context(ctx)
	d, err := l.isAllowed(cctx, k)
	cancel()
	if err != nil {
		return l.answer(ctx, "is allowed", k, limiter.Rate{}, 0, true, err)
	}
	return d, nil
}

// Get returns key's usage in the live window: the units admitted and the
// stored capacity, both 0 for a key with no live state. It writes nothing.
// It has no Decision to mark as degraded, so under every policy an
// unavailable Redis is an error: Redis's own, or ErrUnavailable while the
// breaker is open.
func (l *Limiter) Get(ctx context.Context, k string) (limiter.Usage, error) {
	if l.g.Open() {
		if _, err := l.b.Check("get", k); err != nil {
			return limiter.Usage{}, err
		}
		return limiter.Usage{}, l.g.Err("get")
	}
	cctx, cancel := l.g.Context(ctx)
	u, err := l.get(cctx, k)
	cancel()
	if err != nil {
		return limiter.Usage{}, l.g.FailedErr(ctx, "get", err)
	}
	return u, nil
}

// Reset forgets key: it UNLINKs the key's hash, and drops what the local
// fallback holds for it. Redis failures are errors, as for Get.
func (l *Limiter) Reset(ctx context.Context, k string) error {
	if l.g.Open() {
		if _, err := l.b.Check("reset", k); err != nil {
			return err
		}
		return l.g.Err("reset")
	}
	cctx, cancel := l.g.Context(ctx)
	err := l.b.Reset(cctx, k)
	cancel()
	if err != nil {
		return l.g.FailedErr(ctx, "reset", err)
	}
	l.g.Forget(ctx, k)
	return nil
}

// Close marks the limiter closed: later calls return ErrClosed. It stops
// the background probe, if Redis is down, and the local fallback, waiting
// for them until ctx is done (then it returns ctx's error). It does not
// close the client, which belongs to the caller. Closing twice is harmless.
func (l *Limiter) Close(ctx context.Context) error {
	l.b.Close()
	return l.g.Close(ctx)
}
