package redissup_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// Benchmarks run on the real redis-server of the harness, with Redis TIME
// as the clock (as in production):
//
//	go test -run '^$' -bench . -benchmem ./limiter/redissup/
//
// Beside ns/op each reports ops/s and server-µs/op, the server's own time
// per EVALSHA (INFO commandstats usec and calls, delta over the run).
//
// HotKey: one key below its soft capacity (every call admitted and written).
// HotKeyOverloaded: one key offered far more than its 1,000/s (W = 1 s,
// B = 10 ms, F = 1.5): it sits between S and H, most calls are refused and
// pay for a factor (cached 100 ms) and a RetryAfter walk over the window.
// Keys10k: calls rotate over 10,000 keys at 1,000 per minute (W = 1 min).
func BenchmarkInc(b *testing.B) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	overloaded := []limiter.Option{limiter.WithWindow(time.Second), limiter.WithBucket(10 * time.Millisecond), limiter.WithHardLimitFactor(1.5)}
	cases := []struct {
		name string
		rate limiter.Rate
		opts []limiter.Option
		key  func(i int) string
	}{
		{"HotKey", limiter.PerSecond(1e9), nil, func(int) string { return "hot" }},
		{"HotKeyOverloaded", limiter.PerSecond(1000), overloaded, func(int) string { return "hot" }},
		{"Keys10k", limiter.PerMinute(1000), nil, func(i int) string { return keys[i%len(keys)] }},
	}
	for _, c := range cases {
		b.Run(c.name+"/Serial", func(b *testing.B) {
			rc := redistest.Real(b).Client(b)
			l := newLimiter(b, rc, with(c.opts, limiter.WithPrefix(redistest.Prefix(b)))...)
			b.ReportAllocs()
			s := startServerStat(b, rc)
			for i := 0; i < b.N; i++ {
				if _, err := l.Inc(ctx, c.key(i), c.rate, 1); err != nil {
					b.Fatal(err)
				}
			}
			s.report(b)
		})
		b.Run(c.name+"/Parallel", func(b *testing.B) {
			rc := redistest.Real(b).Client(b)
			l := newLimiter(b, rc, with(c.opts, limiter.WithPrefix(redistest.Prefix(b)))...)
			var seq atomic.Int64
			b.ReportAllocs()
			s := startServerStat(b, rc)
			b.RunParallel(func(pb *testing.PB) {
				i := int(seq.Add(1) * 7919)
				for pb.Next() {
					if _, err := l.Inc(ctx, c.key(i), c.rate, 1); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
			s.report(b)
		})
	}
}

// BenchmarkReadOnly measures IsAllowed and Get on a live key.
func BenchmarkReadOnly(b *testing.B) {
	rc := redistest.Real(b).Client(b)
	l := newLimiter(b, rc, limiter.WithPrefix(redistest.Prefix(b)))
	if _, err := l.Inc(ctx, "k", limiter.PerMinute(100), 5); err != nil {
		b.Fatal(err)
	}
	b.Run("IsAllowed", func(b *testing.B) {
		s := startServerStat(b, rc)
		for i := 0; i < b.N; i++ {
			if _, err := l.IsAllowed(ctx, "k"); err != nil {
				b.Fatal(err)
			}
		}
		s.report(b)
	})
	b.Run("Get", func(b *testing.B) {
		s := startServerStat(b, rc)
		for i := 0; i < b.N; i++ {
			if _, err := l.Get(ctx, "k"); err != nil {
				b.Fatal(err)
			}
		}
		s.report(b)
	})
}

// BenchmarkFullWindow measures Inc on one key whose window is full of
// buckets (one per B) and kept between S and H, for several W/B: every
// call finds a dead bucket (a scan), and most are refused (a RetryAfter
// walk).
func BenchmarkFullWindow(b *testing.B) {
	for _, buckets := range []int{100, 250, 500} {
		b.Run(fmt.Sprintf("W/B=%d", buckets), func(b *testing.B) {
			rc := redistest.Real(b).Client(b)
			clk := conformance.NewClock()
			bucket := time.Millisecond
			w := time.Duration(buckets) * bucket
			l := newLimiter(b, rc, limiter.WithClock(clk), limiter.WithPrefix(redistest.Prefix(b)),
				limiter.WithWindow(w), limiter.WithBucket(bucket), limiter.WithHardLimitFactor(1.5))
			rate := limiter.Every(float64(buckets)/2, w) // S = W/B / 2: offered 2×
			for i := 0; i < 2*buckets; i++ {
				if _, err := l.Inc(ctx, "k", rate, 1); err != nil {
					b.Fatal(err)
				}
				clk.Advance(bucket)
			}
			s := startServerStat(b, rc)
			for i := 0; i < b.N; i++ {
				if _, err := l.Inc(ctx, "k", rate, 1); err != nil {
					b.Fatal(err)
				}
				clk.Advance(bucket)
			}
			s.report(b)
		})
	}
}

// serverStat is the EVALSHA line of INFO commandstats at the start of a
// measurement.
type serverStat struct {
	c           *redis.Client
	calls, usec int64
}

// startServerStat reads the server's EVALSHA totals and resets b's timer.
func startServerStat(b *testing.B, c *redis.Client) serverStat {
	b.Helper()
	calls, usec := evalshaStat(b, c)
	b.ResetTimer()
	return serverStat{c: c, calls: calls, usec: usec}
}

// report stops b's timer and reports ops/s and the server's µs per
// EVALSHA since start. Other users of the server in the meantime would
// blur the figure: run benchmarks alone (-run '^$').
func (s serverStat) report(b *testing.B) {
	b.Helper()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	calls, usec := evalshaStat(b, s.c)
	if dc := calls - s.calls; dc > 0 {
		b.ReportMetric(float64(usec-s.usec)/float64(dc), "server-µs/op")
	}
}

// evalshaStat returns the calls and usec of cmdstat_evalsha.
func evalshaStat(b *testing.B, c *redis.Client) (calls, usec int64) {
	b.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(val, 10, 64)
			switch name {
			case "calls":
				calls = n
			case "usec":
				usec = n
			}
		}
	}
	return calls, usec
}
