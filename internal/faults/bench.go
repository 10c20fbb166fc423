package faults

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// BenchOpen measures what an Inc costs while the breaker is open: it stops
// srv, the Redis of l (built with the default failure policy), calls until
// a decision comes back degraded, then times b.N calls over 256 keys and
// reports their p99 as p99-ns beside the mean. The fault matrix bounds this
// cost loosely (OpenP99); this is where its target is measured.
func BenchOpen(b *testing.B, srv *redistest.Server, l limiter.Limiter) {
	ctx := context.Background()
	rate := limiter.PerSecond(1e6)
	srv.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := l.Inc(ctx, "open:warm", rate, 1)
		if err == nil && d.Degraded {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("no degraded decision within 10 s of stopping Redis (last: %+v, %v)", d, err)
		}
	}
	keys := make([]string, 256)
	for i := range keys {
		keys[i] = "open:" + strconv.Itoa(i)
	}
	durs := make([]time.Duration, 0, min(b.N, 1<<20))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		d, err := l.Inc(ctx, keys[i%len(keys)], rate, 1)
		if len(durs) < cap(durs) {
			durs = append(durs, time.Since(start))
		}
		if err != nil || !d.Degraded {
			b.Fatalf("call %d while the breaker is open: %+v, %v; want a degraded decision", i, d, err)
		}
	}
	b.StopTimer()
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds()), "p99-ns")
}
