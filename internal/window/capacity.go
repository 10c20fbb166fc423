package window

import (
	"math"
	"time"

	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/limiter"
)

// capacityErrors are the sentinels a capacity error wraps.
var capacityErrors = settings.CapacityErrors{InvalidRate: limiter.ErrInvalidRate, InvalidConfig: limiter.ErrInvalidConfig, TooSmall: limiter.ErrCapacityTooSmall}

// HardCapacity returns H = floor(rate × window in seconds × factor + 1e-9),
// the ceiling of the suppressed strategy (limiter.WithHardLimitFactor).
// With factor 1 it equals limiter.Capacity, and its errors are
// limiter.Capacity's, with a bad factor's ErrInvalidConfig after a bad
// rate's and window's.
func HardCapacity(r limiter.Rate, window time.Duration, factor float64) (int64, error) {
	// The fast path, as limiter.Capacity's: every invalid input (a NaN or
	// infinite factor or one below 1, a bad rate or window, H out of
	// range) fails one of its tests and takes the path below, which names
	// the error. The arithmetic is the path's own, so both give the same H.
	p := r.PerSecondValue()
	if x := p * window.Seconds(); factor >= 1 && window > 0 {
		if factor != 1 {
			x *= factor
		}
		if h, ok := capacityOf(x); ok {
			return h, nil
		}
	}
	if math.IsNaN(p) || math.IsInf(p, 0) || p <= 0 {
		return limiter.Capacity(r, window) // the rate's error: Capacity checks the rate first
	}
	return settings.HardCapacity(p, r, window, factor, capacityErrors)
}
