package rediscore

import (
	"context"

	"github.com/sluice-go/sluice/limiter"
)

// IncSet offers n units of key to every limit of set, in one script call
// over one hash per limit (all in the key's hash slot: docs/data-model.md),
// bounded by WithTimeout; n = 0 is a peek for one unit that records
// nothing.
//
// Absolute: the units are admitted if every limit has room for them, and
// then recorded in every limit; a refusal records nothing.
//
// Suppressed: each limit computes what a single Inc at its rate, window
// and bucket would: Allowed at or below its soft capacity, factor 1 above
// its hard capacity (Never when n exceeds it), else its own factor, cached
// in its own hash. The call is admitted when the draw is at or above the
// largest of the factors, so with the probability of the most suppressing
// limit, and the offer is recorded in every limit, as declined in every
// limit when refused. Like Inc, every call with valid arguments that asks
// Redis or the local fallback draws exactly one number, before Redis is
// asked.
//
// A call is never retried. Redis failures are handled as for Inc: the
// local fallback decides sets too, and what it admits is written back to
// every limit of the set when Redis returns (docs/operations.md, When
// Redis fails).
func (l *Limiter) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return l.p.IncSet(ctx, "inc set", k, set, n)
}

// IsAllowedSet reports whether one more unit of key would be admitted by
// every limit of set now: IncSet with n = 0, which writes nothing (and,
// under the suppressed strategy, draws a number).
func (l *Limiter) IsAllowedSet(ctx context.Context, k string, set *limiter.Set) (limiter.SetDecision, error) {
	return l.p.IncSet(ctx, "is allowed set", k, set, 0)
}

// GetSet returns key's usage in the live window of each limit of set, in
// the set's order, as Get reads one key: Used, Declined (suppressed) and
// each limit's stored (soft) capacity. It writes nothing. Redis failures
// are errors, as for Get.
func (l *Limiter) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return l.p.GetSet(ctx, k, set)
}

// ResetSet forgets key's state in every limit of set: one UNLINK of their
// hashes, and what the local fallback holds for them. The key's
// single-limit hash and the hashes of limits of other names stay. Redis
// failures are errors, as for Reset.
func (l *Limiter) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return l.p.ResetSet(ctx, k, set)
}
