// Package check holds the window guarantee's property checker, shared by the
// tests (conformance suite, differential traces) and the sluice tool's
// reports. It imports nothing from the testing package.
package check

import (
	"sort"
	"time"
)

// Admission is one admitted request as a caller saw it: the instant its
// decision was taken and the units it was granted.
type Admission struct {
	At    time.Time
	Units int64
}

// MostInAnyWindow returns the largest number of units admitted in any
// half-open span [t, t + w) and the start of one such span, computed
// exactly from the admissions (a sliding log, not buckets). The input need
// not be sorted and is not modified. Time is compared at full precision;
// the providers count whole milliseconds, so callers that pass their fake
// clock's instants get the providers' own view.
//
// The window guarantee says this never exceeds the capacity of an absolute
// limiter (and the hard capacity of a suppressed one) when w is the
// limiter's window.
func MostInAnyWindow(adm []Admission, w time.Duration) (most int64, at time.Time) {
	if len(adm) == 0 || w <= 0 {
		return 0, time.Time{}
	}
	a := make([]Admission, len(adm))
	copy(a, adm)
	sort.SliceStable(a, func(i, j int) bool { return a[i].At.Before(a[j].At) })
	// Some span of maximal sum starts at an admission: slide its start over
	// the admissions and its end just before start + w.
	sum, j := int64(0), 0
	for i := range a {
		for j < len(a) && a[j].At.Before(a[i].At.Add(w)) {
			sum += a[j].Units
			j++
		}
		if sum > most {
			most, at = sum, a[i].At
		}
		sum -= a[i].Units
	}
	return most, at
}

// MostFromEach returns the largest number of units of all admitted in a
// span [x, x + w) that starts at an admission x of mine (a subset of all),
// and that x: the bound of a limit whose state other callers may share
// (one limit name given two windows), counted from each of its own
// admissions, whatever the others admitted after it.
func MostFromEach(all, mine []Admission, w time.Duration) (most int64, at time.Time) {
	for _, x := range mine {
		var sum int64
		for _, a := range all {
			if !a.At.Before(x.At) && a.At.Before(x.At.Add(w)) {
				sum += a.Units
			}
		}
		if sum > most {
			most, at = sum, x.At
		}
	}
	return most, at
}
