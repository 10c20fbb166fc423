package limiter

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluice-go/sluice/internal/settings"
)

// Rate is a target rate: count events per period, built with PerSecond,
// PerMinute, PerHour, PerDay, Every or ParseRate. It decides as its events
// per second; its period is the default window of a Limit and what String
// writes, so PerMinute(60) decides as PerSecond(1) but is not equal to it.
// The zero Rate is invalid (ErrInvalidRate). A Rate is a small value; copy
// it freely.
type Rate struct {
	perSecond float64
	count     float64
	period    time.Duration // ≤ 0 only from Every's bad period (perSecond NaN)
}

// PerSecond returns a rate of n events per second; its period is 1 s.
func PerSecond(n float64) Rate { return Rate{perSecond: n, count: n, period: time.Second} }

// PerMinute returns a rate of n events per minute; its period is 1 min.
func PerMinute(n float64) Rate { return Rate{perSecond: n / 60, count: n, period: time.Minute} }

// PerHour returns a rate of n events per hour; its period is 1 h.
func PerHour(n float64) Rate { return Rate{perSecond: n / 3600, count: n, period: time.Hour} }

// PerDay returns a rate of n events per day; its period is 24 h.
func PerDay(n float64) Rate { return Rate{perSecond: n / 86400, count: n, period: 24 * time.Hour} }

// Every returns a rate of n events per d; its period is d. A d ≤ 0 gives
// an invalid rate.
func Every(n float64, d time.Duration) Rate {
	if d <= 0 {
		return Rate{perSecond: math.NaN(), period: d}
	}
	return Rate{perSecond: n / d.Seconds(), count: n, period: d}
}

// PerSecondValue returns the rate in events per second.
func (r Rate) PerSecondValue() float64 { return r.perSecond }

// defaultWindow returns the window of a Limit with Window 0 (and of the
// sluice command without --window): the rate's period, or the shortest
// multiple of it that holds one unit. An invalid rate is its
// ErrInvalidRate; a window outside 1 ms to 31 days is ErrInvalidConfig.
func defaultWindow(r Rate) (time.Duration, error) {
	if err := r.validate(); err != nil {
		return 0, err
	}
	p := r.period
	w := p
	if _, err := Capacity(r, p); errors.Is(err, ErrCapacityTooSmall) {
		// 1/(count per period) periods hold one unit; Capacity's rounding
		// may want one period more.
		k := math.Ceil(1 / (r.perSecond * p.Seconds()))
		if k > float64(settings.MaxWindow/p)+3 {
			return 0, fmt.Errorf("%w: %v needs a window of about %.6g × %v to hold one unit, above the largest window %v: give a window", ErrInvalidConfig, r, k, p, settings.MaxWindow)
		}
		w = time.Duration(k) * p
		for i := 0; i < 3; i++ {
			if _, err := Capacity(r, w); err == nil {
				break
			}
			w += p
		}
	}
	if w < settings.MinWindow || w > settings.MaxWindow || w%time.Millisecond != 0 {
		return 0, fmt.Errorf("%w: the window of %v would be %v, outside whole milliseconds from %v to %v: give a window", ErrInvalidConfig, r, w, settings.MinWindow, settings.MaxWindow)
	}
	return w, nil
}

// validate reports ErrInvalidRate unless r is finite and positive.
func (r Rate) validate() error {
	p := r.perSecond
	if r.period <= 0 && math.IsNaN(p) {
		return fmt.Errorf("%w: a period of %v (want a positive duration)", ErrInvalidRate, r.period)
	}
	if math.IsNaN(p) || math.IsInf(p, 0) || p <= 0 {
		return fmt.Errorf("%w: %v events per second (want a finite number > 0)", ErrInvalidRate, p)
	}
	return nil
}

// Capacity returns C = floor(rate × window in seconds + 1e-9), the units
// a window admits, as every provider computes it (the 1e-9 absorbs binary
// rounding: 0.7 × 10 s gives 7). A bad window is ErrInvalidConfig, C < 1
// ErrCapacityTooSmall, C > 2^50 ErrInvalidRate.
func Capacity(r Rate, window time.Duration) (int64, error) {
	// The fast path inlines; every invalid input fails its one test.
	if v := r.perSecond*window.Seconds() + settings.CapacityEpsilon; v >= 1 && v < float64(settings.MaxCapacity)+1 && window > 0 {
		return int64(v), nil
	}
	return capacityError(r, window)
}

// capacityError is Capacity's slow path, naming the rate's error first.
func capacityError(r Rate, window time.Duration) (int64, error) {
	if err := r.validate(); err != nil {
		return 0, err
	}
	if window <= 0 {
		return 0, fmt.Errorf("%w: window %v", ErrInvalidConfig, window)
	}
	x := r.perSecond * window.Seconds()
	if x+settings.CapacityEpsilon < 1 {
		return 0, fmt.Errorf("%w: %v over %v is %.6g units", ErrCapacityTooSmall, r, window, x)
	}
	return 0, fmt.Errorf("%w: %v over %v is %.6g units, more than 2^50", ErrInvalidRate, r, window, x)
}
