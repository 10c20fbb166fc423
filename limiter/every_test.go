package limiter_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// Regression: Every with a period ≤ 0 said "NaN events per second"; the
// error must name the period the caller passed.
func TestEveryBadPeriodNamesIt(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, 0, -time.Nanosecond} {
		err := limiter.ValidateRate(limiter.Every(1, d))
		if !errors.Is(err, limiter.ErrInvalidRate) {
			t.Fatalf("Every(1, %v): validate = %v, want ErrInvalidRate", d, err)
		}
		if msg := err.Error(); !strings.Contains(msg, d.String()) || strings.Contains(msg, "NaN") {
			t.Errorf("Every(1, %v): validate = %q, want the period %v named and no NaN", d, msg, d)
		}
		if _, err := limiter.Capacity(limiter.Every(1, d), time.Minute); !errors.Is(err, limiter.ErrInvalidRate) {
			t.Errorf("Capacity(Every(1, %v)) error = %v, want ErrInvalidRate", d, err)
		}
	}
}
