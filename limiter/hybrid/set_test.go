package hybrid_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/local"
)

// setBackends are the set-ups of the set tests: each strategy on
// miniredis and on the real server.
var setBackends = []struct {
	name string
	s    conformance.Strategy
	f    conformance.Factory
}{
	{"Absolute/Mini", conformance.AbsoluteStrategy, onMini()},
	{"Absolute/Real", conformance.AbsoluteStrategy, onReal()},
	{"Suppressed/Mini", conformance.SuppressedStrategy, supOnMini()},
	{"Suppressed/Real", conformance.SuppressedStrategy, supOnReal()},
}

// localFactory is the local provider of strategy s on clk: the reference
// of the set trace.
func localFactory(s conformance.Strategy) conformance.Factory {
	return func(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
		t.Helper()
		opts = append(opts, limiter.WithClock(clk.Now))
		var l limiter.Limiter
		var err error
		if s == conformance.SuppressedStrategy {
			l, err = local.NewSuppressed(opts...)
		} else {
			l, err = local.NewAbsolute(opts...)
		}
		if err != nil {
			t.Fatalf("local: %v", err)
		}
		return l
	}
}

// TestSets runs the shared set step tables, the separation of a set's
// limits from the key's single limit (and its lease) and the set errors
// on both hybrids, on miniredis and real Redis.
func TestSets(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, b := range setBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel() // miniredis runs in this process, the server in its own
			conformance.RunSets(t, b.s, b.f)
		})
	}
}

// TestSetTraceAgainstLocal feeds each hybrid and the local provider of its
// strategy the same random trace of set calls and compares every
// decision. The trace also makes single-limit Incs on the same keys,
// which a forward-dated lease answers with a longer ResetAfter than the
// local provider's (1.065 s for 1.05 s: TestForwardDatedLease):
// WithMaxLease(1) makes them Redis decisions, as the reference expects.
// The set calls lease nothing either way.
func TestSetTraceAgainstLocal(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, b := range setBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			// miniredis (its gopher-lua is slow under the race detector)
			// runs a third of the real server's steps.
			steps := 6_000
			if strings.HasSuffix(b.name, "Mini") {
				steps = 2_000
			}
			f := func(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
				return b.f(t, clk, append(opts, hybrid.WithMaxLease(1))...)
			}
			admitted, refused := conformance.RunSetTrace(t, b.s, steps, 3, localFactory(b.s), f)
			t.Logf("set trace: %d admitted, %d refused", admitted, refused)
			if admitted == 0 || refused == 0 {
				t.Errorf("set trace admitted %d and refused %d calls; want both", admitted, refused)
			}
		})
	}
}

// TestSetConcurrent is the all-or-nothing check under concurrency: 64
// goroutines on one key of {20 per second, 100 per minute} on real Redis,
// through the absolute hybrid.
func TestSetConcurrent(t *testing.T) {
	conformance.RunSetConcurrent(t, onReal(), localFactory(conformance.AbsoluteStrategy), 64, 40, 20, 100)
}

// TestSetFailurePolicies checks sets under each failure policy with Redis
// gone, for both hybrids.
func TestSetFailurePolicies(t *testing.T) {
	t.Run("Absolute", func(t *testing.T) {
		conformance.RunSetFailurePolicies(t, conformance.AbsoluteStrategy, func(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter {
			return newDefaultAbsolute(t, c, opts...)
		})
	})
	t.Run("Suppressed", func(t *testing.T) {
		conformance.RunSetFailurePolicies(t, conformance.SuppressedStrategy, func(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter {
			return newDefaultSuppressed(t, c, opts...)
		})
	})
}

// TestSetTTL: the expiry rule of a set's hashes (docs/data-model.md) on a
// real server, for both hybrids (conformance.RunSetTTLReal). The exact
// rule on miniredis's fake clock (conformance.RunSetTTL, 6 to 11 s each
// under the race detector) runs in redisabs and redissup, whose set calls
// the hybrids make: here it would test the same code again.
func TestSetTTL(t *testing.T) {
	for _, st := range []struct {
		name string
		s    conformance.Strategy
		new  func(testing.TB, hybrid.Client, ...limiter.Option) limiter.SetLimiter
	}{
		{"Absolute", conformance.AbsoluteStrategy,
			func(t testing.TB, c hybrid.Client, o ...limiter.Option) limiter.SetLimiter {
				return newAbsolute(t, c, o...)
			}},
		{"Suppressed", conformance.SuppressedStrategy,
			func(t testing.TB, c hybrid.Client, o ...limiter.Option) limiter.SetLimiter {
				return newSuppressed(t, c, o...)
			}},
	} {
		t.Run(st.name, func(t *testing.T) {
			c := redistest.Real(t).Client(t)
			prefix := redistest.Prefix(t)
			conformance.RunSetTTLReal(t, st.s, c, st.new(t, c, limiter.WithPrefix(prefix)), prefix)
		})
	}
}
