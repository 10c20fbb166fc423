package hybrid_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// BenchmarkInc: Inc(1) from 64 goroutines (b.SetParallelism with
// GOMAXPROCS 2) on one hot key and across 10,000 keys, on a real Redis.
// The provider-against-provider comparison is in the bench module
// (BenchmarkHybrid); this one is for profiling.
func BenchmarkInc(b *testing.B) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	for _, w := range []struct {
		name string
		keys []string
		rate limiter.Rate
	}{
		{"hot", keys[:1], limiter.PerSecond(1e6)},
		{"10k", keys, limiter.PerMinute(1000)},
	} {
		b.Run(w.name, func(b *testing.B) {
			l := newAbsolute(b, redistest.Real(b).Client(b), limiter.WithWindow(time.Minute))
			ctx := context.Background()
			var next atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					if _, err := l.Inc(ctx, w.keys[i%int64(len(w.keys))], w.rate, 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}
