package redisabs_test

import (
	"context"
	"testing"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// newLimiter builds a limiter on client under a prefix unique to t, with
// no per-call timeout (these tests check decisions, and a loaded test
// machine must not send them to the failure policy); opts come last and
// win.
func newLimiter(t testing.TB, client redisabs.Client, opts ...limiter.Option) *redisabs.Limiter {
	t.Helper()
	// No per-call timeout: these tests compare every decision with the
	// local provider's, and a call shed on a loaded machine (its budget
	// ran out waiting for a CPU) would differ. The bounds under load are
	// certified with the defaults in internal/overload.
	all := append([]limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithTimeout(0)}, opts...)
	l, err := redisabs.New(client, all...)
	if err != nil {
		t.Fatalf("redisabs.New: %v", err)
	}
	return l
}

// onMini is a factory on a fresh miniredis whose TIME follows clk: the
// script reads Redis TIME, as in production, and TTLs run on clk too.
func onMini(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
	t.Helper()
	mr, c := redistest.Mini(t)
	clk.Drive(mr)
	// Without hot-key relief: the limiter's own clock is the wall clock,
	// which does not follow the fake time the trace gives miniredis, so a
	// remembered refusal would not count down with it.
	return newLimiter(t, c, append([]limiter.Option{limiter.WithHotKeyRelief(false)}, opts...)...)
}

// withClock returns a factory on client that sends clk's reading to the
// script instead of Redis TIME.
func withClock(client func(t testing.TB) redisabs.Client) conformance.Factory {
	return func(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
		t.Helper()
		return newLimiter(t, client(t), append([]limiter.Option{limiter.WithClock(clk.Now)}, opts...)...)
	}
}

func realClient(t testing.TB) redisabs.Client    { return redistest.Real(t).Client(t) }
func clusterClient(t testing.TB) redisabs.Client { return redistest.Cluster(t) }
func ringClient(t testing.TB) redisabs.Client    { return redistest.Ring(t) }

var (
	onReal    = withClock(realClient)
	onCluster = withClock(clusterClient)
	onRing    = withClock(ringClient)
)

var localAbsolute conformance.Factory = conformance.LocalAbsolute

var backends = []struct {
	name string
	f    conformance.Factory
}{
	{"Mini", onMini},
	{"Real", onReal},
	{"Cluster", onCluster},
	{"Ring", onRing},
}

// The backends run in parallel: miniredis runs the scripts in this
// process, the servers in theirs. miniredis runs the suite's smaller
// concurrency check (conformance.RunAbsoluteMini), the servers the whole.
func TestConformance(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, b := range backends {
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

// traceSteps is the length of each differential trace.
const traceSteps = 10_000

// miniTraceSteps is the trace's length on miniredis, whose gopher-lua runs
// the scripts in the test's own process, slowly under the race detector:
// the servers (a server, a cluster, a ring) run the full trace, and
// miniredis a quarter of it, which still reaches every regime
// (checkTraceStats) and is fuzzed against local by FuzzAgainstLocal.
const miniTraceSteps = traceSteps / 4

func TestTraceAgainstLocal(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			steps := traceSteps
			if b.name == "Mini" {
				steps = miniTraceSteps
			}
			st := conformance.RunTrace(t, conformance.AbsoluteStrategy, steps, 1, localAbsolute, b.f)
			checkTraceStats(t, st, steps)
		})
	}
}

func checkTraceStats(t *testing.T, st conformance.TraceStats, steps int) {
	t.Helper()
	t.Logf("trace: %+v", st)
	if st.Steps < steps || st.Allowed == 0 || st.Rejected == 0 || st.Never == 0 || st.Peeks == 0 {
		t.Errorf("trace did not reach every regime: %+v", st)
	}
}

// TestRedisTimeConcurrent is the concurrency check with the clock the
// provider uses in production: Redis TIME on a real server.
func TestRedisTimeConcurrent(t *testing.T) {
	conformance.RunConcurrent(t, func(t *testing.T, _ *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
		return newLimiter(t, realClient(t), opts...)
	}, 64, 100, 1000)
}

func TestConfigErrors(t *testing.T) {
	_, c := redistest.Mini(t)
	conformance.ConfigErrors(t, func(opts ...limiter.Option) error {
		l, err := redisabs.New(c, opts...)
		if err == nil {
			return l.Close(context.Background())
		}
		return err
	})
}

// TestHostile compares hostile calls (huge costs, clock edges) with the
// local provider on miniredis and real Redis, in parallel as TestConformance.
func TestHostile(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, b := range backends[:2] {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			conformance.RunHostile(t, conformance.AbsoluteStrategy, localAbsolute, b.f)
		})
	}
}

// TestTraceAgainstLocalBatched is the differential trace with batching on
// (WithBatching(128)), on real Redis and the cluster: a batched limiter
// decides exactly as the local one. The two run in parallel.
func TestTraceAgainstLocalBatched(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, b := range backends[1:3] {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			batched := func(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
				return b.f(t, clk, append(opts, limiter.WithBatching(128))...)
			}
			st := conformance.RunTrace(t, conformance.AbsoluteStrategy, traceSteps, 1, localAbsolute, batched)
			checkTraceStats(t, st, traceSteps)
		})
	}
}
