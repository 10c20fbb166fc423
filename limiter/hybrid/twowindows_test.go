package hybrid_test

import (
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// TestTwoWindows: two hybrid limiters with different windows on one
// prefix keep both bounds (limiter.ErrWindowConflict), on miniredis and a
// real server, with their default leases.
func TestTwoWindows(t *testing.T) {
	miniPair := func(t *testing.T, clk *conformance.Clock, o1, o2 []limiter.Option) (limiter.Limiter, limiter.Limiter) {
		mr, c := redistest.Mini(t)
		clk.OnAdvance(func(now time.Time, d time.Duration) {
			mr.SetTime(now)
			mr.FastForward(d)
		})
		p := []limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithClock(clk)}
		return newAbsolute(t, c, append(o1, p...)...), newAbsolute(t, c, append(o2, p...)...)
	}
	realPair := func(t *testing.T, clk *conformance.Clock, o1, o2 []limiter.Option) (limiter.Limiter, limiter.Limiter) {
		c := realClient(t)
		p := []limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithClock(clk)}
		return newAbsolute(t, c, append(o1, p...)...), newAbsolute(t, c, append(o2, p...)...)
	}
	// Each pair has its own server or prefix: the two run in parallel.
	t.Run("Mini", func(t *testing.T) {
		t.Parallel()
		conformance.RunTwoWindows(t, conformance.AbsoluteStrategy, nil, miniPair)
	})
	t.Run("Real", func(t *testing.T) {
		t.Parallel()
		conformance.RunTwoWindows(t, conformance.AbsoluteStrategy, nil, realPair)
	})
}
