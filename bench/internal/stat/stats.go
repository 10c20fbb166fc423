// Package stat holds the summary statistics the bench module's tests and
// programs share.
package stat

import "sort"

// Median returns the median of v (the mean of the two middle values for
// an even count), 0 for none. v is not modified.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
