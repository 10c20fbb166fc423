package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestMaxBuckets checks the bound on W/B that keeps every Redis call's work
// bounded: W/B = MaxBuckets is accepted, one more is ErrInvalidConfig, and
// the message names the window, the bucket, their ratio and the limit.
func TestMaxBuckets(t *testing.T) {
	withWB := func(w, b time.Duration) Option {
		return func(c *Config) { c.Window, c.Bucket = w, b }
	}
	if _, err := New(withWB(MaxBuckets*time.Millisecond, time.Millisecond)); err != nil {
		t.Fatalf("New(W/B = %d) = %v, want nil", MaxBuckets, err)
	}
	if _, err := New(withWB(2*MaxBuckets*time.Millisecond, 2*time.Millisecond)); err != nil {
		t.Fatalf("New(W = %d ms, B = 2 ms) = %v, want nil", 2*MaxBuckets, err)
	}
	_, err := New(withWB(time.Second, time.Millisecond))
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New(W = 1s, B = 1ms) = %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"window 1s", "bucket 1ms", "W/B = 1000", "limit of 500"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New(W = 1s, B = 1ms) = %q, want it to name %q", err, want)
		}
	}
}
