package redisabs_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/limiter"
)

func TestSets(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { conformance.RunSets(t, conformance.AbsoluteStrategy, b.f) })
	}
}

// setTraceSteps is the length of each differential trace of sets.
const setTraceSteps = 6_000

func TestSetTraceAgainstLocal(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel() // miniredis runs in this process, the servers in theirs
			// The real server runs the full trace; the cluster, the ring
			// and miniredis (whose gopher-lua runs in this process, slowly
			// under the race detector) a third of it, which still admits
			// and refuses sets in every combination the trace draws.
			steps := setTraceSteps
			if b.name != "Real" {
				steps = 2_000
			}
			admitted, refused := conformance.RunSetTrace(t, conformance.AbsoluteStrategy, steps, 3, localAbsolute, b.f)
			t.Logf("set trace: %d admitted, %d refused", admitted, refused)
			if admitted == 0 || refused == 0 {
				t.Errorf("set trace admitted %d and refused %d calls; want both", admitted, refused)
			}
		})
	}
}

// TestSetConcurrent is the all-or-nothing check under concurrency: 64
// goroutines on one key of {20 per second, 100 per minute} on real Redis.
func TestSetConcurrent(t *testing.T) {
	conformance.RunSetConcurrent(t, onReal, localAbsolute, 64, 40, 20, 100)
}

// TestSetFailurePolicies checks sets under each failure policy with Redis
// gone.
func TestSetFailurePolicies(t *testing.T) {
	conformance.RunSetFailurePolicies(t, conformance.AbsoluteStrategy, func(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter {
		return newLimiter(t, c, opts...)
	})
}
