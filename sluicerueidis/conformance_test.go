package sluicerueidis_test

import (
	"testing"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/local"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// A provider is one of sluice's Redis providers, built on the adapter.
type provider struct {
	name     string
	pkg      string // its package, which its errors name
	strategy conformance.Strategy
	build    func(c client, opts ...limiter.Option) (limiter.Limiter, error)
}

var providers = []provider{
	{"redisabs", "redisabs", conformance.AbsoluteStrategy, func(c client, opts ...limiter.Option) (limiter.Limiter, error) {
		return redisabs.New(c, opts...)
	}},
	{"redissup", "redissup", conformance.SuppressedStrategy, func(c client, opts ...limiter.Option) (limiter.Limiter, error) {
		return redissup.New(c, opts...)
	}},
	// Leases of one unit: every admission is a Redis decision, and the
	// hybrid passes the strategy's whole suite, as on go-redis.
	{"hybridabs", "hybrid", conformance.AbsoluteStrategy, func(c client, opts ...limiter.Option) (limiter.Limiter, error) {
		return hybrid.NewAbsolute(c, append([]limiter.Option{hybrid.WithMaxLease(1)}, opts...)...)
	}},
	{"hybridsup", "hybrid", conformance.SuppressedStrategy, func(c client, opts ...limiter.Option) (limiter.Limiter, error) {
		return hybrid.NewSuppressed(c, append([]limiter.Option{hybrid.WithMaxLease(1)}, opts...)...)
	}},
}

// factory builds p on the adapter client(t) returns, under a prefix unique
// to t, with clk's reading sent to the scripts instead of Redis TIME and no
// per-call timeout (these suites compare decisions; a call shed on a
// loaded machine would differ), as the core's conformance tests do.
func (p provider) factory(client func(testing.TB) client) conformance.Factory {
	return func(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
		t.Helper()
		// No per-call timeout: a decision suite, see above.
		all := append([]limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithTimeout(0),
			limiter.WithClock(clk.Now)}, opts...)
		l, err := p.build(client(t), all...)
		if err != nil {
			t.Fatalf("%s on the adapter: %v", p.name, err)
		}
		closeAtEnd(t, l)
		return l
	}
}

// TestConformance: every provider passes its strategy's conformance suite
// (step tables, errors, 64-goroutine concurrency, and for the absolute
// strategy the window guarantee; for the suppressed one the admission
// statistics and the hard ceiling) on rueidis and on valkey-go, against
// a real server and the three-master cluster.
func TestConformance(t *testing.T) {
	for _, d := range drivers {
		for _, p := range providers {
			for _, s := range servers {
				t.Run(d.name+"/"+p.name+"/"+s.name, func(t *testing.T) {
					t.Parallel()
					testConformance(t, p, p.factory(s.client(d)))
				})
			}
		}
	}
}

func testConformance(t *testing.T, p provider, f conformance.Factory) {
	switch {
	case p.strategy == conformance.AbsoluteStrategy:
		conformance.RunAbsolute(t, f)
	case p.name == "hybridsup":
		conformance.RunSuppressedTables(t, f)
	default:
		conformance.RunSuppressed(t, f)
	}
}

// traceSteps is the length of each differential trace against the local
// provider.
const traceSteps = 5000

// TestTraceAgainstLocal: the same random trace decides the same on the
// Redis providers on rueidis as on the local provider, call by call.
func TestTraceAgainstLocal(t *testing.T) {
	for _, p := range providers[:2] {
		for _, s := range servers {
			t.Run(p.name+"/"+s.name, func(t *testing.T) {
				t.Parallel()
				st := conformance.RunTrace(t, p.strategy, traceSteps, 1, localFactory(p.strategy), p.factory(s.client(rueidisDriver)))
				t.Logf("trace: %+v", st)
				if st.Steps < traceSteps || st.Allowed == 0 || st.Peeks == 0 {
					t.Errorf("trace did not reach every regime: %+v", st)
				}
			})
		}
	}
}

// TestSets: sets of limits (IncSet, peeks included, GetSet, ResetSet) pass
// the set suite on every provider, on each library, on a server and on
// the cluster.
func TestSets(t *testing.T) {
	for _, d := range drivers {
		for _, p := range providers {
			for _, s := range servers {
				t.Run(d.name+"/"+p.name+"/"+s.name, func(t *testing.T) {
					t.Parallel()
					conformance.RunSets(t, p.strategy, p.factory(s.client(d)))
				})
			}
		}
	}
}

// TestSetTraceAgainstLocal: a random trace of sets decides as the local
// provider's, on rueidis.
func TestSetTraceAgainstLocal(t *testing.T) {
	for _, p := range providers[:2] {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			admitted, refused := conformance.RunSetTrace(t, p.strategy, 2000, 3, localFactory(p.strategy), p.factory(servers[1].client(rueidisDriver)))
			if admitted == 0 || refused == 0 {
				t.Errorf("set trace admitted %d, refused %d: want both", admitted, refused)
			}
		})
	}
}

// localFactory is the local provider of strategy s on clk: the reference.
func localFactory(s conformance.Strategy) conformance.Factory {
	if s == conformance.AbsoluteStrategy {
		return conformance.LocalAbsolute
	}
	return func(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
		t.Helper()
		l, err := local.NewSuppressed(append(opts, limiter.WithClock(clk.Now))...)
		if err != nil {
			t.Fatalf("local.NewSuppressed: %v", err)
		}
		return l
	}
}
