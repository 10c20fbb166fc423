package window

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// TestDefaultSourceDrawsWhenNeeded: with the default source the draw is
// made inside the window, only for the calls a factor decides; those calls
// are still refused with probability f. Over many such calls the refusals
// match the sum of their factors within five standard deviations.
func TestDefaultSourceDrawsWhenNeeded(t *testing.T) {
	clk := newClock()
	s, err := NewLocalSuppressed(limiter.WithClock(clk.Now), limiter.WithWindow(time.Second), limiter.WithHardLimitFactor(4),
		limiter.WithSuppressionCache(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx := context.Background()
	rate := limiter.PerSecond(100) // soft 100, hard 400
	var decided, refused int
	var sumF, varF float64
	for i := 0; i < 200; i++ {
		k := "k" + strconv.Itoa(i)
		for j := 0; j < 300; j++ {
			d, err := s.Inc(ctx, k, rate, 1)
			if err != nil {
				t.Fatal(err)
			}
			if f := d.SuppressionFactor; f > 0 && f < 1 {
				decided++
				sumF += f
				varF += f * (1 - f)
				if !d.Allowed {
					refused++
				}
			} else if j < 100 && !d.Allowed {
				t.Fatalf("Inc %d of %q below the soft capacity = %+v, want admitted", j, k, d)
			}
		}
	}
	if decided < 1000 {
		t.Fatalf("%d calls decided by a factor, want at least 1000", decided)
	}
	if dev := math.Abs(float64(refused) - sumF); dev > 5*math.Sqrt(varF) {
		t.Fatalf("%d of %d calls refused, want %.0f ± %.0f (the sum of their factors)", refused, decided, sumF, 5*math.Sqrt(varF))
	}
}
