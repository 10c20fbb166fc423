package limiter

import (
	"fmt"
	"math"
	"time"

	"github.com/sluice-go/sluice/internal/settings"
)

// Rate is a target rate in events per second. Build one with PerSecond,
// PerMinute, PerHour, PerDay or Every. The zero Rate is invalid: passing it to
// Inc returns ErrInvalidRate. A Rate is a small value; copy it freely.
type Rate struct {
	perSecond float64
	// badPeriod is set by Every when its period is not positive: the
	// rate is invalid and Validate names that period.
	badPeriod    time.Duration
	hasBadPeriod bool
}

// PerSecond returns a rate of n events per second.
func PerSecond(n float64) Rate { return Rate{perSecond: n} }

// PerMinute returns a rate of n events per minute.
func PerMinute(n float64) Rate { return Rate{perSecond: n / 60} }

// PerHour returns a rate of n events per hour.
func PerHour(n float64) Rate { return Rate{perSecond: n / 3600} }

// PerDay returns a rate of n events per day.
func PerDay(n float64) Rate { return Rate{perSecond: n / 86400} }

// Every returns a rate of n events per d. A d ≤ 0 gives an invalid rate.
func Every(n float64, d time.Duration) Rate {
	if d <= 0 {
		return Rate{perSecond: math.NaN(), badPeriod: d, hasBadPeriod: true}
	}
	return Rate{perSecond: n / d.Seconds()}
}

// PerSecondValue returns the rate in events per second.
func (r Rate) PerSecondValue() float64 { return r.perSecond }

// String writes r in the form ParseRate reads, COUNT/UNIT with UNIT one of
// s, min, h and day: the unit whose count needs the fewest digits (the
// smaller on a tie), with the shortest count that gives back exactly r:
// PerSecond(5.5) is "5.5/s", PerMinute(1000) "1000/min", PerHour(90)
// "1.5/min", PerSecond(1e16) "1e+16/s". ParseRate(r.String()) == r for
// every valid r; an invalid rate is written per second ("NaN/s"), which
// ParseRate refuses.
func (r Rate) String() string { return r.format() }

// Validate reports ErrInvalidRate unless r is finite and positive.
func (r Rate) Validate() error {
	p := r.perSecond
	if r.hasBadPeriod {
		return fmt.Errorf("%w: a period of %v (want a positive duration)", ErrInvalidRate, r.badPeriod)
	}
	if math.IsNaN(p) || math.IsInf(p, 0) || p <= 0 {
		return fmt.Errorf("%w: %v events per second (want a finite number > 0)", ErrInvalidRate, p)
	}
	return nil
}

// epsilon absorbs binary rounding in rate × window (0.7 × 10 must give 7).
const epsilon = 1e-9

// Capacity returns C = floor(rate × window in seconds + 1e-9), the number of
// units a window of the given length admits. It is the one function every
// provider uses. A capacity below 1 is ErrCapacityTooSmall; one above 2^50
// is ErrInvalidRate.
func Capacity(r Rate, window time.Duration) (int64, error) {
	// The fast path, small enough to inline into every Inc: for x ≥ 0,
	// int64 truncation is floor, and every invalid input (NaN, ±Inf, a
	// rate ≤ 0, a window ≤ 0, C < 1 or C > 2^50) fails the one test and
	// takes HardCapacity's path, which names the error.
	if v := r.perSecond*window.Seconds() + epsilon; v >= 1 && v < float64(settings.MaxCapacity)+1 && window > 0 {
		return int64(v), nil
	}
	return HardCapacity(r, window, 1)
}

// HardCapacity returns H = floor(rate × window in seconds × factor + 1e-9),
// the ceiling of the suppressed strategy. With factor 1 it equals Capacity.
func HardCapacity(r Rate, window time.Duration, factor float64) (int64, error) {
	// The fast path, as Capacity's: every invalid input (a NaN or
	// infinite factor or one below 1, a bad rate or window, H out of
	// range) fails one of its tests and takes the path below, which names
	// the error. The arithmetic is the path's own, so both give the same H.
	if x := r.perSecond * window.Seconds(); factor >= 1 && window > 0 && !r.hasBadPeriod {
		if factor != 1 {
			x *= factor
		}
		if v := x + epsilon; v >= 1 && v < float64(settings.MaxCapacity)+1 {
			return int64(v), nil
		}
	}
	if err := r.Validate(); err != nil {
		return 0, err
	}
	if window <= 0 {
		return 0, fmt.Errorf("%w: window %v", ErrInvalidConfig, window)
	}
	if math.IsNaN(factor) || math.IsInf(factor, 0) || factor < 1 {
		return 0, fmt.Errorf("%w: hard limit factor %v", ErrInvalidConfig, factor)
	}
	x := r.perSecond * window.Seconds()
	if factor != 1 {
		x *= factor
	}
	c := math.Floor(x + epsilon)
	switch {
	case c < 1:
		return 0, fmt.Errorf("%w: %v over %v is %.6g units", ErrCapacityTooSmall, r, window, x)
	case c > float64(settings.MaxCapacity):
		return 0, fmt.Errorf("%w: %v over %v is %.6g units, more than 2^50", ErrInvalidRate, r, window, x)
	}
	return int64(c), nil
}
