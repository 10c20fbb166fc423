package redissup_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// boundedFactory builds the provider on c with no per-call timeout: these
// tests measure Redis time, not the failure policy.
func boundedFactory(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter {
	t.Helper()
	return newLimiter(t, c, append([]limiter.Option{limiter.WithTimeout(0)}, opts...)...)
}

// TestBoundedWork: at the largest W/B accepted, no script call in any worst
// state (refusals with any n on a key saturated one unit per bucket, the factor
// over a full window, reads past dead buckets) takes more than about 1 ms of Redis time (SLOWLOG).
func TestBoundedWork(t *testing.T) {
	conformance.RunBoundedWork(t, conformance.SuppressedStrategy, boundedFactory)
}

// TestBoundedWorkPing: four clients refusing in the worst state leave
// another client's PING answered within a few milliseconds.
func TestBoundedWorkPing(t *testing.T) {
	conformance.RunBoundedPing(t, conformance.SuppressedStrategy, boundedFactory)
}

// TestTraceHashTable is the differential trace on a server that keeps every
// hash as a hash table (hash-max-ziplist-entries 0), whose HGETALL returns
// fields in no particular order: the scripts' scans must sort them, where a
// listpack returns them oldest first.
func TestTraceHashTable(t *testing.T) {
	srv := redistest.StartServer(t, "--hash-max-ziplist-entries", "0")
	onHashTable := func(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
		t.Helper()
		c := redis.NewClient(srv.Options())
		t.Cleanup(func() { c.Close() })
		// No per-call timeout: the trace compares every decision with the
		// local provider's, and a call shed on a loaded machine would differ.
		return newLimiter(t, c, append([]limiter.Option{limiter.WithTimeout(0), limiter.WithClock(clk.Now)}, opts...)...)
	}
	st := conformance.RunTrace(t, conformance.SuppressedStrategy, 5000, 5, localFactory, onHashTable)
	t.Logf("trace: %+v", st)
	if st.Allowed == 0 || st.Suppressed == 0 || st.SuppressedAdmitted == 0 || st.Never == 0 || st.Peeks == 0 {
		t.Errorf("trace missed a regime: %+v", st)
	}
}
