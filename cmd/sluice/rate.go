package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	win "github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

// rateHelp is the usage of every --rate flag that names a limit's rate.
const rateHelp = "the rate of every key: `N/UNIT`, N per UNIT (5/s, 100/min, 3/10s, 0.5/s; units ms, s, min, h, d); the window is UNIT unless --window"

// limitFlags reads the --rate and --window of a command the one way every
// command reads them (docs/cli.md, Rates): the rate is limiter.ParseRate's,
// and the window is --window when it was given, else the default window
// of a set's Limit with Window 0 (limiter.Limit.Window):
// the rate's period (1s for 5/s, 10s for 3/10s), so that N/UNIT admits N
// per UNIT, or for a count below one unit per period the shortest multiple
// of the period that holds one unit (0.5/s: 2s); note then says so, for
// the banner. The returned status is nonzero when the command must stop
// with it (the error is written).
func limitFlags(fs *flag.FlagSet, stderr io.Writer, rateFlag string, window time.Duration) (rate limiter.Rate, w time.Duration, capacity int64, note string, status int) {
	rate, err := limiter.ParseRate(rateFlag)
	if err != nil {
		return rate, 0, 0, "", usageError(fs, stderr, "--rate: %v", err)
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "window" })
	if given {
		if _, err := win.NewConfig(limiter.WithWindow(window)); err != nil {
			return rate, 0, 0, "", usageError(fs, stderr, "--window: %v", err)
		}
		c, err := limiter.Capacity(rate, window)
		if err != nil {
			return rate, 0, 0, "", capacityError(fs, stderr, rateFlag, rate, window, err)
		}
		return rate, window, c, "", exitOK
	}
	w, err = defaultWindow(rate)
	if err != nil {
		return rate, 0, 0, "", usageError(fs, stderr, "--rate %s: %v; give --window", rateFlag, err)
	}
	if p := flagPeriod(rateFlag); w != p {
		note = fmt.Sprintf("%v, the shortest multiple of %v that holds one unit", w, p)
	}
	c, err := limiter.Capacity(rate, w)
	if err != nil {
		return rate, 0, 0, "", capacityError(fs, stderr, rateFlag, rate, w, err)
	}
	return rate, w, c, note, exitOK
}

// defaultWindow returns the window a set's Limit with Window 0 and rate
// gets (limiter.NewSet applies the one rule), or the rule's own error.
func defaultWindow(rate limiter.Rate) (time.Duration, error) {
	set, err := limiter.NewSet(limiter.Limit{Name: "rate", Rate: rate})
	if err != nil {
		// NewSet names the limit and its window 0 around the rule's error;
		// a valid name and a default window leave nothing else to fail.
		return 0, errors.Unwrap(err)
	}
	return set.At(0).Window, nil
}

// flagPeriod returns the PERIOD of a --rate that limiter.ParseRate read: the
// period of one unit per PERIOD, a whole number of milliseconds.
func flagPeriod(rateFlag string) time.Duration {
	_, period, _ := strings.Cut(rateFlag, "/")
	one, err := limiter.ParseRate("1/" + period)
	if err != nil {
		return 0
	}
	return time.Duration(math.Round(1e3/one.PerSecondValue())) * time.Millisecond
}

// capacityError reports a --rate that the window cannot hold: when the
// capacity is below one unit, it says which flag to raise and how far.
func capacityError(fs *flag.FlagSet, stderr io.Writer, rateFlag string, rate limiter.Rate, window time.Duration, err error) int {
	if errors.Is(err, limiter.ErrCapacityTooSmall) {
		return usageError(fs, stderr, "--rate %s over --window %v: %v; raise --window to %v or more, or --rate",
			rateFlag, window, err, minWindow(rate))
	}
	return usageError(fs, stderr, "--rate %s over --window %v: %v", rateFlag, window, err)
}

// minWindow is the shortest window, in whole milliseconds, in which rate
// admits one unit.
func minWindow(r limiter.Rate) time.Duration {
	ms := math.Ceil(1000 / r.PerSecondValue())
	w := time.Duration(ms) * time.Millisecond
	for i := 0; i < 3; i++ { // Capacity's rounding: step up until it admits one
		if _, err := limiter.Capacity(r, w); err == nil {
			break
		}
		w += time.Millisecond
	}
	return w
}
