package redisabs_test

import (
	"testing"

	"github.com/sluice-go/sluice/internal/redistest"
)

// The tests that call t.Parallel at their top (the conformance suites,
// the set step tables, the traces against the local provider, with
// hundreds of buckets and with hot-key relief, the set TTL and memory
// tests) decide on a fake clock with no timeout (newLimiter gives
// WithTimeout(0)): a loaded
// machine slows them but sheds none of their calls, so they run after
// the sequential tests, two at a time, beside each other. The fault,
// outage, latency and batching tests (real time, 64 goroutines on one
// client) stay sequential, run first, and have the package to
// themselves. In make test this package's CPU-heavy half then uses both
// cores once the other packages are done.
func TestMain(m *testing.M) { redistest.Main(m) }
