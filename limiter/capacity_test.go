package limiter_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

func TestCapacity(t *testing.T) {
	tests := []struct {
		rate   limiter.Rate
		window time.Duration
		want   int64
	}{
		{limiter.PerSecond(0.3), time.Minute, 18},
		{limiter.PerSecond(0.7), 10 * time.Second, 7},
		{limiter.PerSecond(10), time.Second, 10},
		{limiter.PerSecond(5.5), 2 * time.Second, 11},
		{limiter.PerMinute(10), time.Minute, 10},
		{limiter.PerHour(3600), time.Second, 1},
		{limiter.PerDay(86400), time.Minute, 60},
		{limiter.Every(1, 3*time.Second), 3 * time.Second, 1},
		{limiter.Every(2, 3*time.Second), 3 * time.Second, 2},
		{limiter.PerSecond(0.1), 30 * time.Second, 3},
		{limiter.PerSecond(1.9999), time.Second, 1},
		{limiter.PerSecond(1000), time.Millisecond, 1},
	}
	for _, tt := range tests {
		got, err := limiter.Capacity(tt.rate, tt.window)
		if err != nil || got != tt.want {
			t.Errorf("Capacity(%v, %v) = %d, %v; want %d", tt.rate, tt.window, got, err, tt.want)
		}
	}
}

func TestCapacityErrors(t *testing.T) {
	tests := []struct {
		name   string
		rate   limiter.Rate
		window time.Duration
		want   error
	}{
		{"one per day over a minute", limiter.PerDay(1), time.Minute, limiter.ErrCapacityTooSmall},
		{"NaN", limiter.PerSecond(math.NaN()), time.Second, limiter.ErrInvalidRate},
		{"+Inf", limiter.PerSecond(math.Inf(1)), time.Second, limiter.ErrInvalidRate},
		{"-Inf", limiter.PerSecond(math.Inf(-1)), time.Second, limiter.ErrInvalidRate},
		{"zero", limiter.PerSecond(0), time.Second, limiter.ErrInvalidRate},
		{"negative", limiter.PerMinute(-1), time.Second, limiter.ErrInvalidRate},
		{"zero value", limiter.Rate{}, time.Second, limiter.ErrInvalidRate},
		{"Every negative duration", limiter.Every(1, -time.Second), time.Second, limiter.ErrInvalidRate},
		{"beyond 2^50 units", limiter.PerSecond(1e12), 31 * 24 * time.Hour, limiter.ErrInvalidRate},
		{"zero window", limiter.PerSecond(1), 0, limiter.ErrInvalidConfig},
	}
	for _, tt := range tests {
		if _, err := limiter.Capacity(tt.rate, tt.window); !errors.Is(err, tt.want) {
			t.Errorf("%s: Capacity(%v, %v) error = %v, want %v", tt.name, tt.rate, tt.window, err, tt.want)
		}
	}
}

func TestHardCapacity(t *testing.T) {
	tests := []struct {
		rate   limiter.Rate
		window time.Duration
		factor float64
		want   int64
	}{
		{limiter.PerSecond(10), time.Second, 1, 10},
		{limiter.PerSecond(10), time.Second, 1.5, 15},
		{limiter.PerSecond(0.7), 10 * time.Second, 1.5, 10},
		{limiter.PerSecond(1), time.Second, 2.9999, 2},
	}
	for _, tt := range tests {
		got, err := window.HardCapacity(tt.rate, tt.window, tt.factor)
		if err != nil || got != tt.want {
			t.Errorf("HardCapacity(%v, %v, %v) = %d, %v; want %d", tt.rate, tt.window, tt.factor, got, err, tt.want)
		}
	}
	for _, f := range []float64{0.99, math.NaN(), math.Inf(1), -1} {
		if _, err := window.HardCapacity(limiter.PerSecond(1), time.Second, f); !errors.Is(err, limiter.ErrInvalidConfig) {
			t.Errorf("HardCapacity factor %v error = %v, want ErrInvalidConfig", f, err)
		}
	}
}

func TestRateString(t *testing.T) {
	if got := limiter.PerSecond(5.5).String(); got != "5.5/s" {
		t.Errorf("PerSecond(5.5).String() = %q", got)
	}
	if got := limiter.PerMinute(60).PerSecondValue(); got != 1 {
		t.Errorf("PerMinute(60).PerSecondValue() = %v, want 1", got)
	}
}

// TestEnumStrings: the names policyName gives FailurePolicy values (the
// logged "policy"), whose table follows the constants' order.
func TestEnumStrings(t *testing.T) {
	for p, want := range map[limiter.FailurePolicy]string{limiter.FallbackLocal: "FallbackLocal", limiter.FailOpen: "FailOpen", limiter.FailClosed: "FailClosed", limiter.FailError: "FailError", -1: "FailurePolicy(-1)", 4: "FailurePolicy(4)"} {
		if got := limiter.PolicyName(p); got != want {
			t.Errorf("policyName(FailurePolicy(%d)) = %q, want %q", int(p), got, want)
		}
	}
}

// Capacity has a fast path of its own; it must agree with HardCapacity at
// factor 1 (the definition) on every input, valid or not, and near every
// boundary: C = 1, C = 2^50, rates just around an integer C.
func TestCapacityFastPathMatchesHardCapacity(t *testing.T) {
	max := float64(int64(1) << 50)
	rates := []float64{
		math.NaN(), math.Inf(1), math.Inf(-1), -1, 0, math.SmallestNonzeroFloat64,
		1e-9, 0.0166, 1.0 / 60, 0.3, 0.7, 1 - 1e-10, 1, 1 + 1e-12, 2.9999999999, 3, 1e6,
		max, max - 1, max + 1, max * (1 + 1e-15), max * 2, math.MaxFloat64,
	}
	windows := []time.Duration{
		-time.Second, 0, 1, time.Millisecond, 999 * time.Millisecond, time.Second,
		10 * time.Second, time.Minute, time.Hour, 744 * time.Hour, math.MaxInt64,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	// 5,000 random rates and windows: about 175,000 pairs, 3 s of CPU under
	// -race.
	for i := 0; i < 5000; i++ {
		rates = append(rates, math.Exp(rng.Float64()*80-40))
		windows = append(windows, time.Duration(rng.Int64N(int64(744*time.Hour)))+1)
	}
	check := func(p float64, w time.Duration) {
		r := limiter.PerSecond(p)
		c, err := limiter.Capacity(r, w)
		hc, herr := window.HardCapacity(r, w, 1)
		if c != hc || (err == nil) != (herr == nil) || err != nil && err.Error() != herr.Error() {
			t.Fatalf("rate %v window %v: Capacity = %d, %v; HardCapacity(…, 1) = %d, %v", p, w, c, err, hc, herr)
		}
	}
	// Every fixed rate with every window, every random rate with every
	// fixed window and with its own random window: the pairs are listed,
	// not filtered out of all 4×10^8.
	const fixedRates, fixedWindows = 23, 11
	for i, p := range rates {
		if i < fixedRates {
			for _, w := range windows {
				check(p, w)
			}
			continue
		}
		for _, w := range windows[:fixedWindows] {
			check(p, w)
		}
		check(p, windows[fixedWindows+i-fixedRates])
	}
}

// TestHardCapacityFastPathMatchesDefinition checks HardCapacity (whose fast
// path Inc of every suppressed provider takes) against its definition,
// floor(rate × window × factor + 1e-9), and an error exactly where the
// definition has no capacity in [1, 2^50] or an input is invalid.
func TestHardCapacityFastPathMatchesDefinition(t *testing.T) {
	max := float64(int64(1) << 50)
	rates := []float64{math.NaN(), math.Inf(1), -1, 0, 1e-9, 1.0 / 60, 0.7, 1, 3, 1e6, max / 2, max, max * 2}
	windows := []time.Duration{-time.Second, 0, 1, time.Millisecond, time.Second, time.Minute, 744 * time.Hour}
	factors := []float64{math.NaN(), math.Inf(1), 0.5, 1 - 1e-12, 1, 1 + 1e-12, 1.5, 2, 1e6}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		rates = append(rates, math.Exp(rng.Float64()*80-40))
	}
	for i, p := range rates {
		for _, w := range windows {
			for _, f := range factors {
				if i >= 13 && rng.IntN(20) != 0 { // random rates: a sample of the pairs
					continue
				}
				got, err := window.HardCapacity(limiter.PerSecond(p), w, f)
				valid := p > 0 && !math.IsInf(p, 0) && w > 0 && f >= 1 && !math.IsInf(f, 0)
				want := math.Floor(p*w.Seconds()*f + 1e-9)
				if f == 1 {
					want = math.Floor(p*w.Seconds() + 1e-9)
				}
				if !valid || want < 1 || want > max {
					if err == nil {
						t.Fatalf("HardCapacity(%v/s, %v, %v) = %d, want an error", p, w, f, got)
					}
					continue
				}
				if err != nil || got != int64(want) {
					t.Fatalf("HardCapacity(%v/s, %v, %v) = %d, %v; want %v", p, w, f, got, err, want)
				}
			}
		}
	}
}
