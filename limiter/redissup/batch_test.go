package redissup_test

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/limiter"
)

// TestBatchingExact: 64 goroutines on one key and on eight, with batching
// and without (the default), on real Redis, miniredis and the cluster: Get
// counts exactly the units the decisions admitted (suppressed admissions
// included), never more than the capacity (F = 1) and at least one.
func TestBatchingExact(t *testing.T) {
	conformance.RunBatching(t, func(t testing.TB, c redis.UniversalClient, opts ...limiter.Option) limiter.Limiter {
		return newLimiter(t, c, opts...)
	}, func(admitted, _ int64) error {
		if admitted == 0 || admitted > conformance.BatchingCapacity {
			return fmt.Errorf("admitted %d, want in [1, %d]", admitted, conformance.BatchingCapacity)
		}
		return nil
	})
}
