package cleanup_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// BenchmarkPacing measures what a cleaner costs the Inc calls of an
// application sharing its Redis: 8 goroutines Inc 1,000 keys (absolute,
// W = 1 min) on a private redis-server holding 20,000 further live keys of
// both strategies, while a cleaner makes passes back to back at a budget.
// The run alternates slices of 2,000 Incs with the cleaner at work and
// slices with it held between two keys (a hook), so that the noise of a
// shared machine falls on both sides alike; it reports the latency
// percentiles of Inc on each side, their ratio, and the keys the cleaner
// handled per second while at work (docs/benchmarks.md, Cleanup pacing):
//
//	go test -run '^$' -bench Pacing -benchtime 200000x -count 5 ./cleanup/
func BenchmarkPacing(b *testing.B) {
	srv := redistest.StartServer(b)
	c := srv.Client(b)
	const prefix = "bench"
	// The key space the cleaner walks: 20,000 live keys, W = 1 h.
	for _, s := range strategies {
		l := newLimiter(b, s, c, limiter.WithPrefix(prefix), limiter.WithWindow(time.Hour))
		keys := make([]string, 10_000)
		for i := range keys {
			keys[i] = "idle:" + strconv.Itoa(i)
		}
		incAll(b, l, keys)
	}
	app := newLimiter(b, key.Absolute, c, limiter.WithPrefix(prefix))
	rate := limiter.PerSecond(1e6)

	for _, budget := range []float64{500, cleanup.DefaultRate, 2000, math.Inf(1)} {
		b.Run(fmt.Sprintf("rate=%v", budget), func(b *testing.B) {
			cc := redis.NewClient(srv.Options())
			defer cc.Close()
			cl, err := cleanup.New(cc, cleanup.WithPrefix(prefix), cleanup.WithWindow(time.Hour, 0),
				cleanup.WithRate(budget), cleanup.WithPeriod(0),
				cleanup.WithReports(func(r cleanup.Report, err error) {
					if err != nil && !errors.Is(err, context.Canceled) {
						b.Error(err)
					}
				}))
			if err != nil {
				b.Fatal(err)
			}
			// The gate holds the cleaner between two keys while closed.
			var mu sync.Mutex
			cond := sync.NewCond(&mu)
			open := false
			var handled atomic.Int64
			cleanup.SetHooks(cl, func() {
				mu.Lock()
				for !open {
					cond.Wait()
				}
				mu.Unlock()
			}, func(string) func() { handled.Add(1); return func() {} })
			setGate := func(o bool) {
				mu.Lock()
				open = o
				mu.Unlock()
				cond.Broadcast()
			}
			cl.Start()
			defer func() {
				setGate(true)
				sctx, cancel := context.WithTimeout(ctx, time.Millisecond)
				cl.Stop(sctx) // cancel the pass in flight rather than wait for it
				cancel()
			}()

			const workers, slice = 8, 2000
			var on, off []time.Duration
			var onTime time.Duration
			b.ResetTimer()
			for done, i := 0, 0; done < b.N; i++ {
				n := min(slice, b.N-done)
				working := i%2 == 1
				setGate(working)
				lat := make([][]time.Duration, workers)
				var next atomic.Int64
				var wg sync.WaitGroup
				h0, t0 := handled.Load(), time.Now()
				for w := 0; w < workers; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						for {
							j := next.Add(1)
							if j > int64(n) {
								return
							}
							s := time.Now()
							if _, err := app.Inc(ctx, "app:"+strconv.Itoa(int((int64(done)+j)%1000)), rate, 1); err != nil {
								b.Error(err)
								return
							}
							lat[w] = append(lat[w], time.Since(s))
						}
					}(w)
				}
				wg.Wait()
				if working {
					on = append(on, slices.Concat(lat...)...)
					onTime += time.Since(t0)
				} else {
					off = append(off, slices.Concat(lat...)...)
					handled.Add(h0 - handled.Load()) // keys that slipped through as the gate closed
				}
				done += n
			}
			b.StopTimer()
			keys := handled.Load()
			if len(on) == 0 || len(off) == 0 {
				return // the first run, b.N = 1
			}
			pct := func(d []time.Duration, p float64) float64 {
				slices.Sort(d)
				return float64(d[int(p*float64(len(d)-1))].Microseconds())
			}
			p99on, p99off := pct(on, 0.99), pct(off, 0.99)
			b.ReportMetric(pct(off, 0.5), "p50-off-µs")
			b.ReportMetric(pct(on, 0.5), "p50-on-µs")
			b.ReportMetric(p99off, "p99-off-µs")
			b.ReportMetric(p99on, "p99-on-µs")
			b.ReportMetric(p99on/p99off, "p99-ratio")
			b.ReportMetric(float64(keys)/onTime.Seconds(), "keys/s")
		})
	}
}
