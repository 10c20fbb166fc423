package settings

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestMaxBuckets checks the bound on W/B that keeps every Redis call's work
// bounded: W/B = MaxBuckets is accepted, one more is errInvalid, and
// the message names the window, the bucket, their ratio and the limit.
func TestMaxBuckets(t *testing.T) {
	withWB := func(w, b time.Duration) option {
		return func(c *config) { c.Window, c.Bucket = w, b }
	}
	if _, err := newConfig(withWB(MaxBuckets*time.Millisecond, time.Millisecond)); err != nil {
		t.Fatalf("newConfig(W/B = %d) = %v, want nil", MaxBuckets, err)
	}
	if _, err := newConfig(withWB(2*MaxBuckets*time.Millisecond, 2*time.Millisecond)); err != nil {
		t.Fatalf("newConfig(W = %d ms, B = 2 ms) = %v, want nil", 2*MaxBuckets, err)
	}
	_, err := newConfig(withWB(time.Second, time.Millisecond))
	if !errors.Is(err, errInvalid) {
		t.Fatalf("newConfig(W = 1s, B = 1ms) = %v, want errInvalid", err)
	}
	for _, want := range []string{"window 1s", "bucket 1ms", "W/B = 1000", "limit of 500"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("newConfig(W = 1s, B = 1ms) = %q, want it to name %q", err, want)
		}
	}
}
