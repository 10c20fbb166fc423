package settings

import (
	"fmt"
	"math"
	"time"
)

// CapacityEpsilon absorbs binary rounding in rate × window (0.7 × 10 must
// give 7).
const CapacityEpsilon = 1e-9

// CapacityErrors are the sentinels of package limiter that capacity errors
// wrap.
type CapacityErrors struct{ InvalidRate, InvalidConfig, TooSmall error }

// HardCapacity returns H = floor(perSecond × window in seconds × factor +
// CapacityEpsilon) for a rate already found finite and positive, or the
// error that names the window, the factor or rate (written with %v) and
// the units. It is the slow path of limiter's capacities and of
// internal/window's HardCapacity, so both name the same errors.
func HardCapacity(perSecond float64, rate fmt.Stringer, window time.Duration, factor float64, errs CapacityErrors) (int64, error) {
	if window <= 0 {
		return 0, fmt.Errorf("%w: window %v", errs.InvalidConfig, window)
	}
	if math.IsNaN(factor) || math.IsInf(factor, 0) || factor < 1 {
		return 0, fmt.Errorf("%w: hard limit factor %v", errs.InvalidConfig, factor)
	}
	x := perSecond * window.Seconds()
	if factor != 1 {
		x *= factor
	}
	c := math.Floor(x + CapacityEpsilon)
	switch {
	case c < 1:
		return 0, fmt.Errorf("%w: %v over %v is %.6g units", errs.TooSmall, rate, window, x)
	case c > float64(MaxCapacity) && factor != 1:
		return 0, fmt.Errorf("%w: %v over %v with hard limit factor %v is %.6g units, more than 2^50", errs.InvalidRate, rate, window, factor, x)
	case c > float64(MaxCapacity):
		return 0, fmt.Errorf("%w: %v over %v is %.6g units, more than 2^50", errs.InvalidRate, rate, window, x)
	}
	return int64(c), nil
}
