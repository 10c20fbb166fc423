package hybrid_test

import (
	"testing"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
)

// TestTwoWindows: one limit name with two windows in two sets, and two
// hybrid limiters with different windows on one prefix (with their
// default leases), keep both bounds (limiter.ErrWindowConflict), for both
// strategies, on miniredis and a real server.
func TestTwoWindows(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, st := range []struct {
		name       string
		s          conformance.Strategy
		new        func(testing.TB, hybrid.Client, ...limiter.Option) limiter.Limiter
		mini, real func(...limiter.Option) conformance.Factory
	}{
		{"Absolute", conformance.AbsoluteStrategy,
			func(t testing.TB, c hybrid.Client, o ...limiter.Option) limiter.Limiter {
				return newAbsolute(t, c, o...)
			}, onMini, onReal},
		{"Suppressed", conformance.SuppressedStrategy,
			func(t testing.TB, c hybrid.Client, o ...limiter.Option) limiter.Limiter {
				return newSuppressed(t, c, o...)
			}, supOnMini, supOnReal},
	} {
		pair := func(c hybrid.Client, t *testing.T, clk *conformance.Clock, o1, o2 []limiter.Option) (limiter.Limiter, limiter.Limiter) {
			p := []limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithClock(clk.Now)}
			return st.new(t, c, append(o1, p...)...), st.new(t, c, append(o2, p...)...)
		}
		miniPair := func(t *testing.T, clk *conformance.Clock, o1, o2 []limiter.Option) (limiter.Limiter, limiter.Limiter) {
			mr, c := redistest.Mini(t)
			clk.Drive(mr)
			return pair(c, t, clk, o1, o2)
		}
		realPair := func(t *testing.T, clk *conformance.Clock, o1, o2 []limiter.Option) (limiter.Limiter, limiter.Limiter) {
			return pair(realClient(t), t, clk, o1, o2)
		}
		// Each pair has its own server or prefix: they run in parallel.
		t.Run(st.name+"/Mini", func(t *testing.T) {
			t.Parallel()
			conformance.RunTwoWindowsMini(t, st.s, st.mini(), miniPair)
		})
		t.Run(st.name+"/Real", func(t *testing.T) {
			t.Parallel()
			conformance.RunTwoWindows(t, st.s, st.real(), realPair)
		})
	}
}
