package limiter

import "errors"

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
