package stat

import "testing"

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want float64
	}{{nil, 0}, {[]float64{7}, 7}, {[]float64{3, 1, 2}, 2}, {[]float64{3, 1, 2, 10}, 2.5}} {
		in := append([]float64(nil), tc.v...)
		if got := Median(tc.v); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.v, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.v[i] {
				t.Errorf("Median reordered its input: %v", tc.v)
			}
		}
	}
}
