package limiter

import (
	"context"
	"errors"
	"time"
)

// Decision is the answer to one call. A refused request is a Decision with
// Allowed false, never an error. Every provider fills it identically for
// the same trace of calls and times.
type Decision struct {
	// Allowed reports whether the caller may proceed.
	Allowed bool
	// Suppressed reports that the suppressed strategy was above its soft
	// target (for a set, some limit was): the draw against
	// SuppressionFactor, or the hard capacity, decided. Read Allowed.
	// Always false for the absolute strategy.
	Suppressed bool
	// Limit is the capacity C (the soft capacity for suppressed); 0 from
	// IsAllowed on a key with no stored state.
	Limit int64
	// Remaining is the units still available after this call, ≥ 0.
	Remaining int64
	// RetryAfter, for a refusal, is how long until the request would fit
	// with no new traffic; 0 when allowed or Never.
	RetryAfter time.Duration
	// ResetAfter is how long until the window holds nothing.
	ResetAfter time.Duration
	// SuppressionFactor is the probability of refusal the suppressed
	// strategy applied, in [0, 1]; 0 for absolute.
	SuppressionFactor float64
	// Never reports that the cost exceeds the (hard) capacity: no wait
	// makes it fit.
	Never bool
	// Degraded reports that the backend could not be asked and the
	// failure policy answered.
	Degraded bool
	// Shed reports a refusal because the call's budget (WithTimeout, or
	// the caller's context) ran out while Redis was not known to be down;
	// never Degraded (docs/operations.md, When Redis fails).
	Shed bool
}

// Usage is a key's state in its live window; all 0 for a key with none.
type Usage struct {
	Used     int64 // units admitted
	Declined int64 // units refused (suppressed strategy)
	Limit    int64 // the stored (soft) capacity
}

// Limiter is what every sluice provider implements. Implementations are
// safe for concurrent use.
type Limiter interface {
	// Inc asks to consume n units of key's window at rate, all or nothing;
	// n = 0 is a peek for one unit that records nothing. The latest Inc's
	// rate becomes the key's stored capacity.
	Inc(ctx context.Context, key string, rate Rate, n int64) (Decision, error)
	// IsAllowed reports whether one more unit would be admitted now under
	// the key's stored capacity, recording nothing. A key with no stored
	// state is allowed, with Limit 0.
	IsAllowed(ctx context.Context, key string) (Decision, error)
	// Get returns the key's usage in the live window.
	Get(ctx context.Context, key string) (Usage, error)
	// Reset forgets everything about the key.
	Reset(ctx context.Context, key string) error
	// Close stops the provider's background work, waiting for it until
	// ctx is done; later calls return ErrClosed.
	Close(ctx context.Context) error
}

// Sentinel errors, matched with errors.Is; providers wrap them with the
// operation and the offending value.
var (
	// ErrInvalidRate: NaN, ±Inf, zero or negative rate, or one whose
	// capacity exceeds 2^50 units.
	ErrInvalidRate = errors.New("sluice: invalid rate")
	// ErrInvalidConfig: an option outside its documented range.
	ErrInvalidConfig = errors.New("sluice: invalid configuration")
	// ErrCapacityTooSmall: rate × window admits less than one unit.
	ErrCapacityTooSmall = errors.New("sluice: capacity below one unit")
	// ErrInvalidCost: n < 0 (a cost above the capacity is Decision.Never).
	ErrInvalidCost = errors.New("sluice: invalid cost")
	// ErrClosed: the limiter was closed.
	ErrClosed = errors.New("sluice: limiter closed")
	// ErrWindowConflict: the call gives a limit another window or bucket
	// than its live state records (state is shared by limit name, or by
	// prefix and strategy); refused until that state dies, W + B after its
	// newest bucket. Give the other window its own name or prefix.
	ErrWindowConflict = errors.New("sluice: limit state recorded with another window")
	// ErrLayout: the key's Redis state has a layout this release does not
	// read, or a count no write makes (2^53 or more); the call fails rather
	// than misread it, and Reset forgets it (docs/data-model.md).
	ErrLayout = errors.New("sluice: key state in another layout version")
	// ErrShed: under FailError, a call whose budget ran out while Redis
	// was not known to be down (other policies answer Decision.Shed). It
	// wraps the call's own error too.
	ErrShed = errors.New("sluice: call shed")
)
