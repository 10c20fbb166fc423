package redisabs_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/faults"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

func newFaultLimiter(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter {
	t.Helper()
	l, err := redisabs.New(c, opts...)
	if err != nil {
		t.Fatalf("redisabs.New: %v", err)
	}
	return l
}

// TestFaultMatrix: each failure of the fault matrix under 16 goroutines of
// Inc load on real Redis (docs/operations.md, When Redis fails).
func TestFaultMatrix(t *testing.T) { faults.RunMatrix(t, newFaultLimiter) }

// TestFailurePolicies: each policy during an outage, bad input, and
// reconciliation of the fallback's units, alone and in a fleet of three.
func TestFailurePolicies(t *testing.T) { faults.RunPolicies(t, "redisabs", newFaultLimiter) }

// TestHealthyPath: the per-call timeout allocates nothing on a healthy
// Redis for a context that can never be cancelled (docs/benchmarks.md,
// Failure policy: the healthy path).
func TestHealthyPath(t *testing.T) { faults.RunHealthyPath(t, newFaultLimiter) }

// BenchmarkOpenBreaker: the cost of Inc while Redis is down and the
// breaker open (the fallback's decision), mean and p99.
func BenchmarkOpenBreaker(b *testing.B) {
	srv := redistest.StartServer(b)
	l, err := redisabs.New(srv.Client(b), limiter.WithPrefix(redistest.Prefix(b)))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close(context.Background())
	faults.BenchOpen(b, srv, l)
}

// TestLoud: a misconfiguration is loud by default, and Ping names the
// address (docs/operations.md, Start-up check and logging).
func TestLoud(t *testing.T) { faults.RunLoud(t, newFaultLimiter) }

// TestWriteBack: a fleet of three through each outage of the matrix, on
// one limit and on a set of two: what the fallbacks admitted is in Redis
// before Redis decides again, so no window after the fault holds more
// than C (docs/operations.md, Reconciliation).
func TestWriteBack(t *testing.T) { faults.RunWriteBack(t, newFaultLimiter) }

// TestGrace: in the grace after an outage a full fallback share refuses
// what Redis would admit (internal/faults.RunGrace).
func TestGrace(t *testing.T) { faults.RunGrace(t, newFaultLimiter, 10) }
