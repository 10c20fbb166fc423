package limiter

import "github.com/sluice-go/sluice/internal/config"

// Sentinel errors, matched with errors.Is. Errors returned by providers wrap
// them with the operation and the offending value.
var (
	// ErrInvalidRate: NaN, ±Inf, zero or negative rate, or one so large
	// that the window's capacity exceeds 2^50 units.
	ErrInvalidRate = config.ErrInvalidRate
	// ErrInvalidConfig: an option outside its documented range.
	ErrInvalidConfig = config.ErrInvalidConfig
	// ErrCapacityTooSmall: rate × window admits less than one unit, so every
	// call would be rejected forever. Widen the window or raise the rate.
	ErrCapacityTooSmall = config.ErrCapacityTooSmall
	// ErrInvalidCost: n < 0. Any n ≥ 0 is a valid cost: one larger than
	// the capacity is refused with Decision.Never set, not an error.
	ErrInvalidCost = config.ErrInvalidCost
	// ErrClosed: the limiter was closed.
	ErrClosed = config.ErrClosed
)
