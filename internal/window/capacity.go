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
// the suppressed strategy's ceiling (limiter.WithHardLimitFactor): with
// factor 1, limiter.Capacity. Its errors are Capacity's, then a bad
// factor's ErrInvalidConfig.
func HardCapacity(r limiter.Rate, window time.Duration, factor float64) (int64, error) {
	// The fast path, as Capacity's: every invalid input fails one of its
	// tests and takes the slow path, which names the error.
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
		return limiter.Capacity(r, window) // the rate's error
	}
	return settings.HardCapacity(p, r, window, factor, capacityErrors)
}
