package check

import (
	"math/rand/v2"
	"testing"
	"time"
)

// mostBrute is MostInAnyWindow by trying every millisecond start.
func mostBrute(adm []Admission, w time.Duration, from, to time.Time) int64 {
	// Every window [t, t+w) with t a whole millisecond from from − w to
	// to, in integer nanoseconds from from (time.Time comparisons made
	// this scan the slowest test of the package under -race).
	ns := make([]int64, len(adm))
	for i, a := range adm {
		ns[i] = int64(a.At.Sub(from))
	}
	var most int64
	for t := -int64(w); t <= int64(to.Sub(from)); t += int64(time.Millisecond) {
		var s int64
		for i, a := range adm {
			if ns[i] >= t && ns[i] < t+int64(w) {
				s += a.Units
			}
		}
		most = max(most, s)
	}
	return most
}

func TestMostInAnyWindow(t *testing.T) {
	at := func(ms int64, u int64) Admission {
		return Admission{At: start.Add(time.Duration(ms) * time.Millisecond), Units: u}
	}
	cases := []struct {
		name string
		adm  []Admission
		w    time.Duration
		want int64
	}{
		{"empty", nil, time.Second, 0},
		{"one", []Admission{at(5, 3)}, time.Second, 3},
		{"half-open: the end is out", []Admission{at(0, 1), at(1000, 1)}, time.Second, 1},
		{"just inside", []Admission{at(0, 1), at(999, 1)}, time.Second, 2},
		{"unsorted", []Admission{at(999, 4), at(0, 1), at(500, 2), at(1499, 8)}, time.Second, 14},
		{"burst at a bucket's end", []Admission{at(0, 1), at(99, 9), at(1000, 10), at(1099, 1)}, time.Second, 19},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, _ := MostInAnyWindow(c.adm, c.w); got != c.want {
				t.Errorf("MostInAnyWindow = %d, want %d", got, c.want)
			}
		})
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		var adm []Admission
		for j := 0; j < 30; j++ {
			adm = append(adm, at(r.Int64N(3000), 1+r.Int64N(5)))
		}
		w := time.Duration(1+r.Int64N(1500)) * time.Millisecond
		if got, want := func() int64 { m, _ := MostInAnyWindow(adm, w); return m }(), mostBrute(adm, w, start, start.Add(3*time.Second)); got != want {
			t.Fatalf("case %d: MostInAnyWindow(w=%v) = %d, brute force %d", i, w, got, want)
		}
	}
}

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
