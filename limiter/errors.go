package limiter

import "errors"

// Sentinel errors, matched with errors.Is. Errors returned by providers wrap
// them with the operation and the offending value.
var (
	// ErrInvalidRate: NaN, ±Inf, zero or negative rate, or one so large
	// that the window's capacity exceeds 2^50 units.
	ErrInvalidRate = errors.New("sluice: invalid rate")
	// ErrInvalidConfig: an option outside its documented range.
	ErrInvalidConfig = errors.New("sluice: invalid configuration")
	// ErrCapacityTooSmall: rate × window admits less than one unit, so every
	// call would be rejected forever. Widen the window or raise the rate.
	ErrCapacityTooSmall = errors.New("sluice: capacity below one unit")
	// ErrInvalidCost: n < 0. Any n ≥ 0 is a valid cost: one larger than
	// the capacity is refused with Decision.Never set, not an error.
	ErrInvalidCost = errors.New("sluice: invalid cost")
	// ErrClosed: the limiter was closed.
	ErrClosed = errors.New("sluice: limiter closed")
	// ErrWindowConflict: the call gives a limit another window or bucket
	// than the one its live state records. State is shared by limit name
	// (a set's limit) or by prefix and strategy (a single limiter), and a
	// count kept under one window cannot be read under another without
	// breaking one of the two bounds, so such a call is refused with this
	// error until that state dies, W + B (its own) after its newest bucket
	// opened. Tiers that change only the rate share state as usual. Give
	// the other window its own limit name, or its own prefix.
	ErrWindowConflict = errors.New("sluice: limit state recorded with another window")
	// ErrLayout: the key's state in Redis records a layout version this
	// sluice does not read (a newer release on the same prefix), or holds
	// a count no write of its layout makes (2^53 or more, set by another
	// client; the error names the hash and the field). The call fails
	// rather than misread counts (docs/data-model.md, Layout versions);
	// Reset forgets such a state.
	ErrLayout = errors.New("sluice: key state in another layout version")
	// ErrShed: under the FailError policy, a call whose budget ran out
	// while Redis was not known to be down (the other policies answer
	// such a call with a refusal marked Decision.Shed). Redis may still be
	// fine: the caller waited for local resources, or for a round trip
	// that a probe did not confirm as lost. The error wraps the call's
	// own too (a deadline, a socket timeout).
	ErrShed = errors.New("sluice: call shed")
)
