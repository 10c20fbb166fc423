package redisabs_test

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/limiter"
)

// TestBatchingExact: 64 goroutines on one key and on eight, with batching
// and without (the default), on real Redis, miniredis and the cluster:
// each key admits exactly its capacity (or all it was offered), and Get
// agrees with the decisions.
func TestBatchingExact(t *testing.T) {
	conformance.RunBatching(t, func(t testing.TB, c redis.UniversalClient, opts ...limiter.Option) limiter.Limiter {
		return newLimiter(t, c, opts...)
	}, func(admitted, offered int64) error {
		if want := min(conformance.BatchingCapacity, offered); admitted != want {
			return fmt.Errorf("admitted %d, want %d", admitted, want)
		}
		return nil
	})
}
