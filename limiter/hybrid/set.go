package hybrid

import (
	"context"

	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/limiter"
)

// Sets of limits hold no lease: each set call is the Redis providers' own
// (redisprov.Sets), one script call over one hash per limit, under the
// limiter's failure policy, breaker, fallback and write-back, and reported
// to the observer as the hybrid's. A limit's hash
// (<prefix>:{<key>}:<strategy>:h:<name>) is never a key's single-limit
// hash, so a set call neither reads nor spends a lease, and a lease never
// holds units of a set's limit: set decisions are exactly redisabs' (or
// redissup's), and hybrid and Redis-provider instances may share them
// (docs/algorithms.md, Hybrid sets).
var (
	_ limiter.SetLimiter = (*Absolute)(nil)
	_ limiter.SetLimiter = (*Suppressed)(nil)
)

// IncSet admits n units of key if every limit of set has room for them,
// then records them in every limit; a refusal records nothing. n = 0
// decides for one unit and records nothing. It asks Redis on every call,
// as redisabs.Limiter.IncSet does: sets are not leased.
func (l *Absolute) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return l.g.DecideSet(ctx, redisprov.SetsOf(&l.b), "inc set", k, set, n)
}

// IsAllowedSet reports whether one more unit of key would be admitted by
// every limit of set now: IncSet with n = 0.
func (l *Absolute) IsAllowedSet(ctx context.Context, k string, set *limiter.Set) (limiter.SetDecision, error) {
	return l.g.DecideSet(ctx, redisprov.SetsOf(&l.b), "is allowed set", k, set, 0)
}

// GetSet returns key's usage in each limit of set, in the set's order.
// Redis failures are errors, as for Get.
func (l *Absolute) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return l.g.GetSet(ctx, redisprov.SetsOf(&l.b), k, set)
}

// ResetSet forgets key's state in every limit of set, in Redis and in the
// local fallback; the key's single limit and its lease stay. Redis
// failures are errors, as for Reset.
func (l *Absolute) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return l.g.ResetSet(ctx, redisprov.SetsOf(&l.b), k, set)
}

// IncSet offers n units of key to every limit of set and decides them as
// redissup.Limiter.IncSet does, in Redis on every call (sets are not
// leased): admitted with the probability of the most suppressing limit,
// recorded in every limit, as declined when refused. n = 0 is a peek for
// one unit that records nothing; every call with valid arguments draws
// one number.
func (l *Suppressed) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return l.g.DecideSet(ctx, redisprov.SetsOf(&l.b), "inc set", k, set, n)
}

// IsAllowedSet is IncSet with n = 0: it writes nothing and draws a number.
func (l *Suppressed) IsAllowedSet(ctx context.Context, k string, set *limiter.Set) (limiter.SetDecision, error) {
	return l.g.DecideSet(ctx, redisprov.SetsOf(&l.b), "is allowed set", k, set, 0)
}

// GetSet returns key's accepted (Used) and declined units in each limit
// of set, with each limit's stored soft capacity. Redis failures are
// errors.
func (l *Suppressed) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return l.g.GetSet(ctx, redisprov.SetsOf(&l.b), k, set)
}

// ResetSet forgets key's state in every limit of set (Redis and the local
// fallback); the key's single limit and its lease stay.
func (l *Suppressed) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return l.g.ResetSet(ctx, redisprov.SetsOf(&l.b), k, set)
}
