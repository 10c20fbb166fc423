package redissup_test

import (
	"testing"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// TestSets runs the shared set step tables (factors combined by their
// maximum, one limit refusing, n over a hard capacity, n = 0) on every
// Redis set-up.
func TestSets(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) { conformance.RunSets(t, conformance.SuppressedStrategy, p.f) })
	}
}

// TestSetTrace feeds the local provider and Redis the same random trace of
// 3-limit set calls (two tiers sharing names, windows from 200 ms to 20 s,
// costs beyond a hard capacity, peeks, GetSet, ResetSet and single Incs on
// the same keys), each with its own identically seeded source, and checks
// every decision field for field: the factors combine the same way
// whatever the provider.
//
// The trace gives one limit name ("slow") two buckets in different sets. A
// hash lives W + B after its latest write, of the latest call's W + B, as
// the local provider keeps a limit's state; under WithClock both add a
// minute of slack (redisx.ClockSlackMs), and a later call with a longer
// bucket may still count a bucket the shorter TTL has dropped. So on
// miniredis the trace sends the clock as the other set-ups do
// (miniClockFactory), while miniredis's TTLs still follow it.
func TestSetTrace(t *testing.T) {
	ps := append([]struct {
		name string
		f    conformance.Factory
	}{{"Mini", miniClockFactory}}, providers[1:]...)
	for _, p := range ps {
		t.Run(p.name, func(t *testing.T) {
			for _, seed := range []uint64{1, 2} {
				admitted, refused := conformance.RunSetTrace(t, conformance.SuppressedStrategy, 5000, seed, localFactory, p.f)
				t.Logf("seed %d: %d admitted, %d refused", seed, admitted, refused)
				if admitted == 0 || refused == 0 {
					t.Errorf("seed %d: trace admitted %d and refused %d set calls, want some of each", seed, admitted, refused)
				}
			}
		})
	}
}

// miniClockFactory builds a limiter on a fresh miniredis whose TIME and
// TTLs follow clk, and sends clk's reading to the scripts (WithClock), so
// that writes get the minute of TTL slack the local reference keeps too.
func miniClockFactory(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
	t.Helper()
	mr, c := redistest.Mini(t)
	followClock(clk, mr)
	return newLimiter(t, c, with(opts, limiter.WithClock(clk), limiter.WithPrefix(redistest.Prefix(t)))...)
}
