package redisabs

import (
	"context"

	"github.com/sluice-go/sluice/limiter"
)

var _ limiter.SetLimiter = (*Limiter)(nil)

// IncSet admits n units of key if every limit of set has room for them,
// and then records them in every limit; a refusal records nothing. n = 0
// decides for one unit and records nothing. It costs one script call over
// one hash per limit (all in the key's hash slot), bounded by WithTimeout,
// and Redis failures are handled as for Inc; the local fallback decides
// sets too.
func (l *Limiter) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return l.p.IncSet(ctx, "inc set", k, set, n)
}

// IsAllowedSet reports whether one more unit of key would be admitted by
// every limit of set now: IncSet with n = 0.
func (l *Limiter) IsAllowedSet(ctx context.Context, k string, set *limiter.Set) (limiter.SetDecision, error) {
	return l.p.IncSet(ctx, "is allowed set", k, set, 0)
}

// GetSet returns key's usage in each limit of set, in the set's order.
// Redis failures are errors, as for Get.
func (l *Limiter) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return l.p.GetSet(ctx, k, set)
}

// ResetSet forgets key's state in every limit of set: one UNLINK of the
// set's hashes. Redis failures are errors, as for Reset.
func (l *Limiter) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return l.p.ResetSet(ctx, k, set)
}
