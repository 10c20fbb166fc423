package redissup_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// The tests that call t.Parallel at their top (the conformance suites,
// the hostile calls, the set step tables, the traces against the local
// provider, batched and with hot-key relief, the sustained overload on a
// fake clock, the TTL, set TTL and memory tests) decide on a fake clock
// with no timeout (newLimiter gives WithTimeout(0)): a loaded
// machine slows them but sheds none of their calls, so they run after
// the sequential tests, two at a time, beside each other. The fault,
// outage, latency and batching tests (real time, 64 goroutines on one
// client) stay sequential, run first, and have the package to
// themselves. In make test this package's CPU-heavy half then uses both
// cores once the other packages are done (it was the last to end, on one
// core, for 200 s of a 536 s run).
func TestMain(m *testing.M) { redistest.Main(m) }

// with returns opts followed by more, without touching opts' backing array.
func with(opts []limiter.Option, more ...limiter.Option) []limiter.Option {
	return append(append([]limiter.Option(nil), opts...), more...)
}

func newLimiter(t testing.TB, c redissup.Client, opts ...limiter.Option) *redissup.Limiter {
	t.Helper()
	// No per-call timeout by default: these tests check decisions, and a
	// call shed on a loaded machine would differ (internal/overload
	// certifies the bounds under load with the defaults). No hot-key
	// relief either (tests that want it pass WithHotKeyRelief(true)):
	// these tests certify that every decision is the script's, exactly the
	// local provider's, while relief answers within the error
	// docs/algorithms.md bounds (Hot-key relief), which relief_test.go
	// checks.
	l, err := redissup.New(c, append([]limiter.Option{limiter.WithTimeout(0), limiter.WithHotKeyRelief(false)}, opts...)...)
	if err != nil {
		t.Fatalf("redissup.New: %v", err)
	}
	return l
}

// miniFactory builds a limiter on a fresh miniredis whose TIME follows clk:
// the script reads the clock from Redis, as in production.
func miniFactory(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
	t.Helper()
	mr, c := redistest.Mini(t)
	clk.Drive(mr)
	return newLimiter(t, c, with(opts, limiter.WithPrefix(redistest.Prefix(t)))...)
}

// realClient returns a client of the shared real redis-server.
func realClient(t testing.TB) *redis.Client {
	t.Helper()
	return redistest.Real(t).Client(t)
}

// clockFactory builds a limiter on the client from connect, under a fresh
// prefix, that sends clk's reading to the script instead of TIME.
func clockFactory(connect func(testing.TB) redissup.Client) conformance.Factory {
	return func(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
		t.Helper()
		return newLimiter(t, connect(t), with(opts, limiter.WithClock(clk.Now), limiter.WithPrefix(redistest.Prefix(t)))...)
	}
}

var (
	realFactory    = clockFactory(func(t testing.TB) redissup.Client { return realClient(t) })
	clusterFactory = clockFactory(func(t testing.TB) redissup.Client { return redistest.Cluster(t) })
	ringFactory    = clockFactory(func(t testing.TB) redissup.Client { return redistest.Ring(t) })
)

// providers are the Redis set-ups every shared suite runs on.
var providers = []struct {
	name string
	f    conformance.Factory
}{
	{"Mini", miniFactory},
	{"Real", realFactory},
	{"Cluster", clusterFactory},
	{"Ring", ringFactory},
}

// localFactory builds the reference: the local suppressed limiter on clk.
func localFactory(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
	t.Helper()
	l, err := local.NewSuppressed(with(opts, limiter.WithClock(clk.Now))...)
	if err != nil {
		t.Fatalf("local.NewSuppressed: %v", err)
	}
	return l
}

// localFactoryE is localFactory for code without a *testing.T (examples).
func localFactoryE(clk *conformance.Clock, opts ...limiter.Option) (limiter.Limiter, error) {
	return local.NewSuppressed(with(opts, limiter.WithClock(clk.Now))...)
}
