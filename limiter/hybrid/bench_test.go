package hybrid_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// BenchmarkInc: Inc(1) from 64 goroutines (b.SetParallelism with
// GOMAXPROCS 2) on one hot key and across 10,000 keys, for both
// strategies at W = 1 min (B 600 ms) and W = 1 s (B 10 ms), on a real
// Redis, after a warm-up that calls every key once. It reports the Redis calls per 1,000 decisions by kind (fetch:
// an Inc's lease request; renew, release and refresh: the sync's) and,
// after the run, the Redis keys per limiter key. The comparison with the
// other providers is in the bench module (BenchmarkHybrid); this one is
// for profiling and for the calls a decision costs:
//
//	go test -run '^$' -bench Inc -benchtime 2s ./limiter/hybrid
func BenchmarkInc(b *testing.B) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	for _, win := range []time.Duration{time.Minute, time.Second} {
		for _, w := range []struct {
			name string
			keys []string
			rate limiter.Rate
		}{
			{"hot", keys[:1], limiter.PerSecond(1e6)},
			{"10k", keys, limiter.Every(1000, win)},
		} {
			for _, strategy := range []string{"absolute", "suppressed"} {
				b.Run(fmt.Sprintf("W=%v/load=%s/strategy=%s", win, w.name, strategy), func(b *testing.B) {
					c := redistest.Real(b).Client(b)
					hook := new(callCounter)
					c.AddHook(hook)
					ctx := context.Background()
					if err := c.FlushAll(ctx).Err(); err != nil {
						b.Fatal(err)
					}
					opts := []limiter.Option{limiter.WithWindow(win), limiter.WithTimeout(5 * time.Second)}
					var l limiter.Limiter
					var calls func() [4]int64
					if strategy == "absolute" {
						a := newAbsolute(b, c, opts...)
						l, calls = a, func() [4]int64 { f, r, rel := a.Calls(); return [4]int64{f, r, rel} }
					} else {
						s := newSuppressed(b, c, append(opts, limiter.WithHardLimitFactor(1.5))...)
						l, calls = s, func() [4]int64 { f, r, rel, ref := s.Calls(); return [4]int64{f, r, rel, ref} }
					}
					for _, k := range w.keys { // warm: every key once
						if _, err := l.Inc(ctx, k, w.rate, 1); err != nil {
							b.Fatal(err)
						}
					}
					var next atomic.Int64
					before, hbefore := calls(), hook.counts()
					self0, srv0 := cpuNow(ctx, c)
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
					b.StopTimer()
					self1, srv1 := cpuNow(ctx, c)
					after, hafter := calls(), hook.counts()
					n := float64(b.N)
					b.ReportMetric(n/b.Elapsed().Seconds(), "ops/s")
					b.ReportMetric((self1-self0)/n, "client-cpu-µs/op")
					b.ReportMetric((srv1-srv0)/n, "server-cpu-µs/op")
					for i, kind := range []string{"fetch", "renew", "release", "refresh"} {
						b.ReportMetric(float64(after[i]-before[i])*1000/n, kind+"/1k")
					}
					for i, kind := range countNames {
						b.ReportMetric(float64(hafter[i]-hbefore[i])*1000/n, kind+"/1k")
					}
					if p := hafter[2] - hbefore[2]; p > 0 {
						b.ReportMetric(float64(hafter[3]-hbefore[3])/float64(p), "calls/pipe")
					}
					if keys, err := c.DBSize(ctx).Result(); err == nil {
						b.ReportMetric(float64(keys)/float64(min(len(w.keys), b.N)), "rkeys/key")
					}
				})
			}
		}
	}
}

// BenchmarkIncMemory: Inc(1) of one hot key from one goroutine, nearly
// every decision from memory (a lease request per lease, about one per
// sync interval), for both strategies: the cost of a decision in memory,
// with the CPU time of the process per decision beside the wall time.
//
//	go test -run '^$' -bench IncMemory -count 10 ./limiter/hybrid
func BenchmarkIncMemory(b *testing.B) {
	for _, strategy := range []string{"absolute", "suppressed"} {
		b.Run("strategy="+strategy, func(b *testing.B) {
			c := redistest.Real(b).Client(b)
			ctx := context.Background()
			opts := []limiter.Option{limiter.WithWindow(time.Minute), limiter.WithTimeout(5 * time.Second),
				limiter.WithPrefix(redistest.Prefix(b))}
			var l limiter.Limiter
			if strategy == "absolute" {
				l = newAbsolute(b, c, opts...)
			} else {
				l = newSuppressed(b, c, append(opts, limiter.WithHardLimitFactor(1.5))...)
			}
			rate := limiter.PerSecond(1e6)
			for i := 0; i < 1000; i++ { // warm: the lease grows
				if _, err := l.Inc(ctx, "hot", rate, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			self0, _ := cpuNow(ctx, c)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.Inc(ctx, "hot", rate, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			self1, _ := cpuNow(ctx, c)
			b.ReportMetric((self1-self0)*1000/float64(b.N), "cpu-ns/op")
		})
	}
}
