package limiter

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluice-go/sluice/internal/settings"
)

// Rate is a target rate: a count of events per period. Build one with
// PerSecond, PerMinute, PerHour, PerDay or Every (or ParseRate). It
// decides as its events per second; the period it was built with is the
// default window of a Limit that gives none (see Limit.Window), and String
// writes it. Two Rates are equal when built with the same count and
// period: PerMinute(60) decides as PerSecond(1) but is not equal to it.
// The zero Rate is invalid: passing it to Inc returns ErrInvalidRate. A
// Rate is a small value; copy it freely.
type Rate struct {
	perSecond float64
	// count and period are what the rate was built with: count events
	// per period (0 for the zero Rate).
	count  float64
	period time.Duration
	// badPeriod is set by Every when its period is not positive: the
	// rate is invalid and validate names that period.
	badPeriod    time.Duration
	hasBadPeriod bool
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
		return Rate{perSecond: math.NaN(), badPeriod: d, hasBadPeriod: true}
	}
	return Rate{perSecond: n / d.Seconds(), count: n, period: d}
}

// PerSecondValue returns the rate in events per second.
func (r Rate) PerSecondValue() float64 { return r.perSecond }

// defaultWindow returns the window a rate is given when none is (a Limit
// with Window 0, a sluice command without --window): the rate's period, so
// that "100/day" admits 100 per day and Every(3, 10*time.Second) 3 per
// 10 s. A rate of less than one unit per period takes the shortest whole
// multiple of its period that holds one unit (PerSecond(0.5): 2 s; the
// capacity rule is Capacity's). An invalid rate is its ErrInvalidRate; a
// window outside 1 ms to 31 days (Every(1, 40*24*time.Hour), or 1e-9 per
// day) is ErrInvalidConfig naming the period: give the window then.
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

// String writes r in the form ParseRate reads, COUNT/PERIOD over the
// period r was built with, the count in its shortest decimal (an exponent
// only above 2^53 or below 10^-6) and the period in its largest whole unit
// of ms, s, min, h and day: PerSecond(5.5) is "5.5/s", PerMinute(1000)
// "1000/min", PerHour(90) "90/h", Every(3, 10*time.Second) "3/10s",
// Every(1, 90*time.Second) "1/90s", PerSecond(1e16) "1e+16/s".
// ParseRate(r.String()) == r for every valid r whose period is a whole
// number of milliseconds. Another rate (Every(1, 1500*time.Microsecond))
// is written over the unit of s, min, h and day whose count needs the
// fewest digits, which ParseRate reads back as the same events per second
// over that unit; an invalid rate is written per second ("NaN/s"), which
// ParseRate refuses.
func (r Rate) String() string { return r.format() }

// validate reports ErrInvalidRate unless r is finite and positive (every
// call that takes a rate reports it so: Capacity, NewSet, Inc).
func (r Rate) validate() error {
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
const epsilon = settings.CapacityEpsilon

// Capacity returns C = floor(rate × window in seconds + 1e-9), the number of
// units a window of the given length admits. It is the one function every
// provider uses. A capacity below 1 is ErrCapacityTooSmall; one above 2^50
// is ErrInvalidRate.
func Capacity(r Rate, window time.Duration) (int64, error) {
	// The fast path, small enough to inline into every Inc: for x ≥ 0,
	// int64 truncation is floor, and every invalid input (NaN, ±Inf, a
	// rate ≤ 0, a window ≤ 0, C < 1 or C > 2^50) fails the one test and
	// takes the path below, which names the error.
	if v := r.perSecond*window.Seconds() + epsilon; v >= 1 && v < float64(settings.MaxCapacity)+1 && window > 0 {
		return int64(v), nil
	}
	return capacityError(r, window)
}

// capacityError is Capacity's slow path: the error that names what is
// wrong (the rate first).
func capacityError(r Rate, window time.Duration) (int64, error) {
	if err := r.validate(); err != nil {
		return 0, err
	}
	return settings.HardCapacity(r.perSecond, r, window, 1, capacityErrors)
}

// capacityErrors are the sentinels a capacity error wraps.
var capacityErrors = settings.CapacityErrors{InvalidRate: ErrInvalidRate, InvalidConfig: ErrInvalidConfig, TooSmall: ErrCapacityTooSmall}
