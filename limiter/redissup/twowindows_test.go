package redissup_test

import (
	"testing"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// TestTwoWindows: one limit name with two windows, and two limiters with
// two windows on one prefix, keep both bounds (limiter.ErrWindowConflict),
// on miniredis and a real server.
func TestTwoWindows(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	miniPair := func(t *testing.T, clk *conformance.Clock, o1, o2 []limiter.Option) (limiter.Limiter, limiter.Limiter) {
		mr, c := redistest.Mini(t)
		clk.Drive(mr)
		p := limiter.WithPrefix(redistest.Prefix(t))
		return newLimiter(t, c, with(o1, p)...), newLimiter(t, c, with(o2, p)...)
	}
	realPair := func(t *testing.T, clk *conformance.Clock, o1, o2 []limiter.Option) (limiter.Limiter, limiter.Limiter) {
		c := realClient(t)
		p := []limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithClock(clk.Now)}
		return newLimiter(t, c, with(o1, p...)...), newLimiter(t, c, with(o2, p...)...)
	}
	// Each pair has its own server or prefix: the two run in parallel.
	t.Run("Mini", func(t *testing.T) {
		t.Parallel()
		conformance.RunTwoWindowsMini(t, conformance.SuppressedStrategy, miniFactory, miniPair)
	})
	t.Run("Real", func(t *testing.T) {
		t.Parallel()
		conformance.RunTwoWindows(t, conformance.SuppressedStrategy, clockFactory(func(t testing.TB) redissup.Client { return realClient(t) }), realPair)
	})
}
