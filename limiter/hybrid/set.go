package hybrid

import (
	"context"

	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/limiter"
)

var (
	_ limiter.SetLimiter = (*Absolute)(nil)
	_ limiter.SetLimiter = (*Suppressed)(nil)
)

// The calls on sets of limits of both hybrids, methods of their table.
// Sets of limits hold no lease: each set call is the Redis providers' own
// (redisprov.Sets over the limiter's Base, whose strategy picks the
// scripts), one script call over one hash per limit, under the limiter's
// guard (failure policy, breaker, fallback, write-back, observer, as the
// hybrid's). A limit's hash (<prefix>:{<key>}:<strategy>:h:<name>) is
// never a key's single-limit hash, so a set call neither reads nor spends
// a lease, and a lease never holds units of a set's limit: set decisions
// are exactly redisabs' (or redissup's), and hybrid and Redis-provider
// instances may share them (docs/algorithms.md, Hybrid sets).

// IncSet decides n units of key in every limit of set as
// redisabs.Limiter.IncSet (or redissup's) does, asking Redis on
// every call: sets are not leased.
// Absolute: admitted if every limit has room, then recorded in every
// limit; a refusal records nothing. Suppressed: admitted with the
// probability of the most suppressing limit, recorded in every limit
// (declined when refused), one number drawn per call. n = 0 decides for
// one unit and records nothing.
func (l *table[E]) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return l.g.DecideSet(ctx, redisprov.SetsOf(&l.b), "inc set", k, set, n)
}

// GetSet returns key's usage in each limit of set, in the set's order
// (suppressed: accepted as Used, and declined), with each limit's stored
// capacity (soft, suppressed). Redis failures are errors, as for Get.
func (l *table[E]) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return l.g.GetSet(ctx, redisprov.SetsOf(&l.b), k, set)
}

// ResetSet forgets key's state in every limit of set, in Redis and in the
// local fallback; the key's single limit and its lease stay. Redis
// failures are errors, as for Reset.
func (l *table[E]) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return l.g.ResetSet(ctx, redisprov.SetsOf(&l.b), k, set)
}
