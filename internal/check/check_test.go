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

func TestMostFromEach(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int64, n int64) Admission {
		return Admission{At: t0.Add(time.Duration(ms) * time.Millisecond), Units: n}
	}
	mine := []Admission{at(100, 5), at(500, 5)}
	other := []Admission{at(0, 7), at(900, 4), at(5000, 100)}
	all := append(append([]Admission(nil), mine...), other...)
	// [100, 1100) holds 5 + 5 + 4; the 7 before it and the 100 at 5 s
	// are outside every span of 1 s that starts at one of mine
	if got, from := MostFromEach(all, mine, time.Second); got != 14 || !from.Equal(at(100, 0).At) {
		t.Errorf("MostFromEach = %d from %v, want 14 from 100 ms", got, from)
	}
	if got, _ := MostFromEach(all, mine, 10*time.Second); got != 114 {
		t.Errorf("MostFromEach over 10 s = %d, want 114", got)
	}
	if got, _ := MostFromEach(all, nil, time.Second); got != 0 {
		t.Errorf("MostFromEach with none of mine = %d, want 0", got)
	}
}
