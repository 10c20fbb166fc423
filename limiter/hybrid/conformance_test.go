package hybrid_test

import (
	"context"
	"testing"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
)

// newAbsolute builds a hybrid absolute limiter on client under a prefix
// unique to t, with no per-call timeout (these tests check decisions, and
// a loaded machine must not send them to the failure policy); opts come
// last and win. It is closed when t ends.
func newAbsolute(t testing.TB, client hybrid.Client, opts ...limiter.Option) *hybrid.Absolute {
	t.Helper()
	// No per-call timeout: these tests compare every decision with a
	// reference, and a call shed on a loaded machine (its budget ran out
	// waiting for a CPU) would differ. The bounds under load are
	// certified with the defaults (newDefaultAbsolute: the fleet and
	// close tests; internal/overload: the contention matrix).
	return newDefaultAbsolute(t, client, append([]limiter.Option{limiter.WithTimeout(0)}, opts...)...)
}

// newDefaultAbsolute is newAbsolute with the default options.
func newDefaultAbsolute(t testing.TB, client hybrid.Client, opts ...limiter.Option) *hybrid.Absolute {
	t.Helper()
	all := append([]limiter.Option{limiter.WithPrefix(redistest.Prefix(t))}, opts...)
	l, err := hybrid.NewAbsolute(client, all...)
	if err != nil {
		t.Fatalf("hybrid.NewAbsolute: %v", err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

func realClient(t testing.TB) hybrid.Client { return redistest.Real(t).Client(t) }

// onMini is a factory on a fresh miniredis whose TIME follows clk.
func onMini(opts ...limiter.Option) conformance.Factory {
	return func(t *testing.T, clk *conformance.Clock, more ...limiter.Option) limiter.Limiter {
		t.Helper()
		mr, c := redistest.Mini(t)
		clk.Drive(mr)
		return newAbsolute(t, c, append(append([]limiter.Option{limiter.WithClock(clk.Now)}, opts...), more...)...)
	}
}

// onReal is a factory on the shared real server that sends clk's reading
// to the script instead of Redis TIME.
func onReal(opts ...limiter.Option) conformance.Factory {
	return func(t *testing.T, clk *conformance.Clock, more ...limiter.Option) limiter.Limiter {
		t.Helper()
		return newAbsolute(t, realClient(t), append(append([]limiter.Option{limiter.WithClock(clk.Now)}, opts...), more...)...)
	}
}

func onCluster(opts ...limiter.Option) conformance.Factory {
	return func(t *testing.T, clk *conformance.Clock, more ...limiter.Option) limiter.Limiter {
		t.Helper()
		return newAbsolute(t, redistest.Cluster(t), append(append([]limiter.Option{limiter.WithClock(clk.Now)}, opts...), more...)...)
	}
}

// TestConformanceLeaseOne: with leases of one unit every admission is a
// Redis decision, and the hybrid provider passes the absolute strategy's
// whole conformance suite, as redisabs does. The backends run in parallel,
// as redisabs' TestConformance, miniredis with the smaller concurrency
// check (conformance.RunAbsoluteMini).
func TestConformanceLeaseOne(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, b := range []struct {
		name string
		f    conformance.Factory
	}{
		{"Mini", onMini(hybrid.WithMaxLease(1))},
		{"Real", onReal(hybrid.WithMaxLease(1))},
		{"Cluster", onCluster(hybrid.WithMaxLease(1))},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			if b.name == "Mini" {
				conformance.RunAbsoluteMini(t, b.f)
				return
			}
			conformance.RunAbsolute(t, b.f)
		})
	}
}

// TestConformanceLeased: with adaptive leases the step tables pass too,
// forward-dating off (WithLeaseAhead(0)). With it on, one row differs
// legitimately: in "coalescing joins the newest bucket" the lease that
// follows an expired one files its units in a bucket starting after now,
// so ResetAfter is longer and Get counts them for longer than redisabs
// would; TestForwardDatedLease shows it.
func TestConformanceLeased(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	conformance.RunAbsolute(t, onReal(hybrid.WithLeaseAhead(0)))
}
