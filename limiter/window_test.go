package limiter_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// TestDefaultWindow checks the one rule that gives a rate its window when
// none is given: its period, or the shortest multiple of it that holds one
// unit.
func TestDefaultWindow(t *testing.T) {
	parsed := func(s string) limiter.Rate {
		r, err := limiter.ParseRate(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tests := []struct {
		name string
		r    limiter.Rate
		want time.Duration
	}{
		{"PerSecond(5)", limiter.PerSecond(5), time.Second},
		{"PerMinute(100)", limiter.PerMinute(100), time.Minute},
		{"PerHour(90)", limiter.PerHour(90), time.Hour},
		{"PerDay(100)", limiter.PerDay(100), 24 * time.Hour},
		{"Every(3, 10s)", limiter.Every(3, 10*time.Second), 10 * time.Second},
		{"3/10s", parsed("3/10s"), 10 * time.Second},
		{"20000/day", parsed("20000/day"), 24 * time.Hour},
		{"PerSecond(0.5)", limiter.PerSecond(0.5), 2 * time.Second},
		{"0.3/s", parsed("0.3/s"), 4 * time.Second},
		{"Every(1, 31 days)", limiter.Every(1, 31*24*time.Hour), 31 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := limiter.DefaultWindow(tt.r)
			if err != nil || got != tt.want {
				t.Fatalf("DefaultWindow(%v) = %v, %v; want %v", tt.r, got, err, tt.want)
			}
			if _, err := limiter.Capacity(tt.r, got); err != nil {
				t.Errorf("Capacity(%v, %v) = %v, want at least one unit", tt.r, got, err)
			}
		})
	}
	for _, tt := range []struct {
		name string
		r    limiter.Rate
		want error
	}{
		{"Every(1, 40 days)", limiter.Every(1, 40*24*time.Hour), limiter.ErrInvalidConfig},
		{"PerDay(0.01)", limiter.PerDay(0.01), limiter.ErrInvalidConfig},
		{"PerDay(1e-300)", limiter.PerDay(1e-300), limiter.ErrInvalidConfig},
		{"Every(1, 1500us)", limiter.Every(1, 1500*time.Microsecond), limiter.ErrInvalidConfig},
		{"zero Rate", limiter.Rate{}, limiter.ErrInvalidRate},
		{"Every(1, 0)", limiter.Every(1, 0), limiter.ErrInvalidRate},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := limiter.DefaultWindow(tt.r)
			if !errors.Is(err, tt.want) {
				t.Fatalf("DefaultWindow(%v) = %v, %v; want %v", tt.r, got, err, tt.want)
			}
		})
	}
}

// TestNewSetDefaultWindow is the regression test for a set's Limit with
// Window 0: it takes its rate's default window, where NewSet used to
// refuse "window 0s outside [1ms, 744h]".
func TestNewSetDefaultWindow(t *testing.T) {
	set, err := limiter.NewSet(
		limiter.Limit{Name: "per-second", Rate: limiter.PerSecond(10)},
		limiter.Limit{Name: "per-day", Rate: limiter.PerDay(100)},
		limiter.Limit{Name: "per-10s", Rate: limiter.Every(3, 10*time.Second)},
		limiter.Limit{Name: "given", Rate: limiter.PerDay(100), Window: time.Hour},
	)
	if err != nil {
		t.Fatalf("NewSet = %v", err)
	}
	for i, want := range []struct {
		w time.Duration
		c int64
	}{{time.Second, 10}, {24 * time.Hour, 100}, {10 * time.Second, 3}, {time.Hour, 4}} {
		if l := set.At(i); l.Window != want.w || capacityAt(set, i) != want.c {
			t.Errorf("At(%d) = %v per %v, want %v per %v", i, capacityAt(set, i), l.Window, want.c, want.w)
		}
		if l := set.At(i); l.Bucket != want.w/100 {
			t.Errorf("At(%d).Bucket = %v, want %v", i, l.Bucket, want.w/100)
		}
	}
	_, err = limiter.NewSet(limiter.Limit{Name: "long", Rate: limiter.Every(1, 40*24*time.Hour)})
	if !errors.Is(err, limiter.ErrInvalidConfig) || !strings.Contains(err.Error(), `"long"`) || !strings.Contains(err.Error(), "960h") {
		t.Errorf("NewSet(a rate of 1 per 40 days, no window) = %v, want ErrInvalidConfig naming the limit and its period", err)
	}
}

// capacityAt is the capacity of set's i-th limit (Set.CapacityAt was).
func capacityAt(set *limiter.Set, i int) int64 {
	c, _ := limiter.Capacity(set.At(i).Rate, set.At(i).Window)
	return c
}
