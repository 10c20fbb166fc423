package hybrid_test

import (
	"context"
	"testing"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
)

// newSuppressed builds a hybrid suppressed limiter as newAbsolute builds
// an absolute one.
func newSuppressed(t testing.TB, client hybrid.Client, opts ...limiter.Option) *hybrid.Suppressed {
	t.Helper()
	// No per-call timeout, as for newAbsolute.
	return newDefaultSuppressed(t, client, append([]limiter.Option{limiter.WithTimeout(0)}, opts...)...)
}

// newDefaultSuppressed is newSuppressed with the default options.
func newDefaultSuppressed(t testing.TB, client hybrid.Client, opts ...limiter.Option) *hybrid.Suppressed {
	t.Helper()
	all := append([]limiter.Option{limiter.WithPrefix(redistest.Prefix(t))}, opts...)
	l, err := hybrid.NewSuppressed(client, all...)
	if err != nil {
		t.Fatalf("hybrid.NewSuppressed: %v", err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

func supOnMini(opts ...limiter.Option) conformance.Factory {
	return func(t *testing.T, clk *conformance.Clock, more ...limiter.Option) limiter.Limiter {
		t.Helper()
		mr, c := redistest.Mini(t)
		clk.Drive(mr)
		return newSuppressed(t, c, append(append([]limiter.Option{limiter.WithClock(clk.Now)}, opts...), more...)...)
	}
}

func supOnReal(opts ...limiter.Option) conformance.Factory {
	return func(t *testing.T, clk *conformance.Clock, more ...limiter.Option) limiter.Limiter {
		t.Helper()
		return newSuppressed(t, realClient(t), append(append([]limiter.Option{limiter.WithClock(clk.Now)}, opts...), more...)...)
	}
}

func supOnCluster(opts ...limiter.Option) conformance.Factory {
	return func(t *testing.T, clk *conformance.Clock, more ...limiter.Option) limiter.Limiter {
		t.Helper()
		return newSuppressed(t, redistest.Cluster(t), append(append([]limiter.Option{limiter.WithClock(clk.Now)}, opts...), more...)...)
	}
}

// TestSuppressedConformanceLeaseOne: with leases of one unit every
// admission is a Redis decision, and the suppressed hybrid passes the
// suppressed strategy's whole conformance suite, as redissup does. The
// backends run in parallel, as redissup's TestConformance, miniredis with
// the smaller statistics and concurrency checks
// (conformance.RunSuppressedMini).
func TestSuppressedConformanceLeaseOne(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, b := range []struct {
		name string
		f    conformance.Factory
	}{
		{"Mini", supOnMini(hybrid.WithMaxLease(1))},
		{"Real", supOnReal(hybrid.WithMaxLease(1))},
		{"Cluster", supOnCluster(hybrid.WithMaxLease(1))},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			if b.name == "Mini" {
				conformance.RunSuppressedMini(t, b.f)
				return
			}
			conformance.RunSuppressed(t, b.f)
		})
	}
}

// TestSuppressedConformanceLeased: with adaptive leases the step tables,
// which run on one instance and a fake clock, pass too, forward-dating off
// (WithLeaseAhead(0)); the admission statistics check does not apply
// (TestSuppressedDiffers, FactorCountsLeases). With forward-dating on, the
// rows whose lease follows an expired one differ legitimately, as for the
// absolute hybrid (TestConformanceLeased): the lease files its units in a
// bucket starting after now, so ResetAfter is longer;
// TestSuppressedForwardDatedLease shows it.
func TestSuppressedConformanceLeased(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	conformance.RunSuppressedTables(t, supOnReal(hybrid.WithLeaseAhead(0)))
}
