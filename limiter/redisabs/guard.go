package redisabs

import (
	"context"

	"github.com/sluice-go/sluice/internal/failover"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// initGuard sets up the failure policy, breaker and fallback.
func (l *Limiter) initGuard(client Client, opts []limiter.Option) {
	cfg := &l.b.Cfg
	l.g.Init("redisabs", key.Absolute, client, cfg, opts, failover.Probe(cfg), failover.AbsoluteReconciler(&l.b))
	l.b.SetGate(l.g.Opened)
}

// backend is the Limiter as its Guard sees it (failover.Backend): a
// pointer, so passing it allocates nothing.
type backend Limiter

// Validate checks an Inc (or, with peek, an IsAllowed) for the policy.
func (be *backend) Validate(op, k string, rate limiter.Rate, n int64, peek bool) (*failover.Call, error) {
	return failover.AbsoluteCall(&(*Limiter)(be).b, op, k, rate, n, peek)
}

// Decide is the Redis call of an Inc or, with peek, an IsAllowed.
func (be *backend) Decide(ctx context.Context, k string, rate limiter.Rate, n int64, peek bool) (limiter.Decision, error) {
	if peek {
		return (*Limiter)(be).isAllowed(ctx, k)
	}
	return (*Limiter)(be).inc(ctx, k, rate, n)
}

// Usage is the Redis call of a Get.
func (be *backend) Usage(ctx context.Context, k string) (limiter.Usage, error) {
	return (*Limiter)(be).get(ctx, k)
}

// Inc admits n units of key at rate if they all fit in the window, and
// records them; a refusal records nothing. n = 0 decides for one unit and
// records nothing. It costs one script call, bounded by WithTimeout. A
// call is never retried: one that timed out may or may not have counted.
// When Redis is unavailable (see limiter.WithFailurePolicy) the failure
// policy answers, with Degraded set, and later calls do not ask Redis until
// the background probe finds it back.
func (l *Limiter) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	return l.g.Decide(ctx, (*backend)(l), "inc", k, rate, n, false)
}

// IsAllowed reports whether one more unit of key would be admitted now at
// the capacity stored by its latest Inc. It writes nothing. A key with no
// live state is allowed, with Limit 0. Redis failures are handled as for
// Inc.
func (l *Limiter) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	return l.g.Decide(ctx, (*backend)(l), "is allowed", k, limiter.Rate{}, 0, true)
}

// Get returns key's usage in the live window: the units admitted and the
// stored capacity, both 0 for a key with no live state. It writes nothing.
// It has no Decision to mark as degraded, so under every policy an
// unavailable Redis is an error: Redis's own, or ErrUnavailable while the
// breaker is open.
func (l *Limiter) Get(ctx context.Context, k string) (limiter.Usage, error) {
	return l.g.Get(ctx, (*backend)(l), &l.b, k)
}

// Reset forgets key: it UNLINKs the key's hash, and drops what the local
// fallback and hot-key relief hold for it. Redis failures are errors, as
// for Get.
func (l *Limiter) Reset(ctx context.Context, k string) error {
	err := l.g.Reset(ctx, &l.b, k)
	if l.relief != nil {
		// Forgotten whether or not the UNLINK worked (a timed-out one
		// may have): forgetting costs one Redis call, never a decision.
		l.relief.Forget(k)
	}
	return err
}

// Close marks the limiter closed: later calls return ErrClosed. It stops
// the background probe, if Redis is down, and the local fallback, and
// waits for them and for the batching goroutines (which end once the calls
// made before Close are answered) until ctx is done (then it returns ctx's
// error). It does not close the client, which belongs to the caller.
// Closing twice is harmless.
func (l *Limiter) Close(ctx context.Context) error {
	l.b.Close()
	err := l.g.Close(ctx)
	if werr := l.b.Wait(ctx); err == nil {
		err = werr
	}
	return err
}
