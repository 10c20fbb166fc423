package limiter

import (
	"context"
	"time"
)

// Decision is the answer to one call. A refused request is a Decision with
// Allowed false, never an error. Every provider fills it identically for the
// same trace of calls and times.
type Decision struct {
	// Allowed reports whether the caller may proceed.
	Allowed bool
	// Suppressed reports that the suppressed strategy was above its soft
	// target for this call (for a set, some limit was): the draw against
	// SuppressionFactor decided it, or the hard capacity refused it. The
	// request may still be admitted: read Allowed. Always false for the
	// absolute strategy, whose refusals have Allowed and Suppressed false.
	Suppressed bool
	// Limit is the capacity C of the window (the soft capacity for the
	// suppressed strategy). 0 from IsAllowed on a key with no stored state.
	Limit int64
	// Remaining is the number of units still available in the window after
	// this call, never negative.
	Remaining int64
	// RetryAfter, when the request was refused, is how long until it would
	// fit with no new traffic. 0 when allowed, and 0 when Never is true.
	RetryAfter time.Duration
	// ResetAfter is how long until the window holds nothing (the key's
	// newest bucket expires). 0 when it holds nothing now.
	ResetAfter time.Duration
	// SuppressionFactor is the probability of refusal applied to this
	// request by the suppressed strategy, in [0, 1]; 0 for absolute.
	SuppressionFactor float64
	// Never is true when the request's cost exceeds the capacity (the hard
	// capacity for suppressed): no wait can make it fit.
	Never bool
	// Degraded is true when the backend could not be asked and the failure
	// policy answered instead.
	Degraded bool
	// Shed is true when the call was refused because its budget
	// (WithTimeout, or the caller's context) ran out while Redis was not
	// known to be down. A shed decision is a refusal, never Degraded;
	// FailError returns ErrShed instead (docs/operations.md, When Redis
	// fails).
	Shed bool
}

// Usage is a key's state in its current window.
type Usage struct {
	// Used is the number of units admitted in the live window.
	Used int64
	// Declined is the number of units refused in the live window
	// (suppressed strategy only).
	Declined int64
	// Limit is the stored capacity (soft capacity for suppressed), 0 for a
	// key with no live state.
	Limit int64
}

// Limiter is what every sluice provider implements. Implementations are safe
// for concurrent use.
type Limiter interface {
	// Inc asks to consume n units of key's window at the given rate. n ≥ 1
	// records the units when they are admitted (all or nothing); n = 0 is a
	// peek that decides for one unit and records nothing. The rate of the
	// latest Inc becomes the key's stored capacity.
	Inc(ctx context.Context, key string, rate Rate, n int64) (Decision, error)
	// IsAllowed reports whether one more unit would be admitted now under
	// the key's stored capacity, recording nothing. A key with no stored
	// state is allowed, with Limit 0.
	IsAllowed(ctx context.Context, key string) (Decision, error)
	// Get returns the key's usage in the live window.
	Get(ctx context.Context, key string) (Usage, error)
	// Reset forgets everything about the key.
	Reset(ctx context.Context, key string) error
	// Close releases the provider's resources and stops its background
	// work, waiting for it until ctx is done. Calls after Close return
	// ErrClosed.
	Close(ctx context.Context) error
}
