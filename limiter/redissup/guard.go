package redissup

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
	l.g.Init("redissup", key.Suppressed, client, cfg, opts, failover.Probe(client, cfg), failover.Reconciler{
		Script: scripts.SupInc,
		// The units are offered at Redis TIME with the capacities of the
		// key's latest rate and the draw that admits whenever the factor is
		// below 1, like an Inc of that many units. Above the hard capacity
		// they are recorded as declined: offered, not accepted.
		Queue: func(ctx context.Context, pipe redis.Scripter, p *failover.Pending, n int64) *redis.Cmd {
			soft, _ := limiter.Capacity(p.Rate, cfg.Window) // validated by the Inc that admitted them
			hard, _ := limiter.HardCapacity(p.Rate, cfg.Window, cfg.HardLimitFactor)
			return scripts.SupInc.EvalSha(ctx, pipe, []string{p.Hash},
				redisx.NowArg(cfg), l.b.W, l.b.B, soft, hard, n, l.b.Cache, int64(window.PPM-1), l.b.TTL)
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
	soft, err := limiter.Capacity(rate, l.b.Cfg.Window)
	if err != nil {
		return nil, l.b.Errorf(op, err)
	}
	hard, err := limiter.HardCapacity(rate, l.b.Cfg.Window, l.b.Cfg.HardLimitFactor)
	if err != nil {
		return nil, l.b.Errorf(op, err)
	}
	return &failover.Call{Op: op, Key: k, Hash: h, Rate: rate, N: n, C: soft, Hard: hard}, nil
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

// Inc offers n units of key at rate, in one script call bounded by
// WithTimeout. At or below the soft capacity S = C the request is Allowed;
// beyond the hard capacity H it is refused with factor 1; in between it is
// admitted with probability 1 − f. n = 0 is a peek for one unit that
// records nothing. Every call with valid arguments that asks Redis or the
// local fallback draws exactly one number from the random source (peeks
// too), before Redis is asked, so a failed call still consumes its draw.
// A call is never retried. When Redis is unavailable (see
// limiter.WithFailurePolicy) the failure policy answers, with Degraded set,
// and later calls do not ask Redis until the background probe finds it
// back.
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

// IsAllowed reports whether one more unit of key would be admitted without
// suppression now, at the capacities stored by the key's latest Inc. Above
// the soft capacity it reports the factor an Inc would apply. It writes
// nothing and draws nothing. A key with no live state is allowed with
// Limit 0. Redis failures are handled as for Inc.
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

// Get returns key's accepted (Used) and declined units in the live window
// and its stored soft capacity. It writes nothing.
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
