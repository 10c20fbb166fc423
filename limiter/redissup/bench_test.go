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
	"github.com/sluice-go/sluice/key"
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
			l := newLimiter(b, rc, limiter.WithClock(clk.Now), limiter.WithPrefix(redistest.Prefix(b)),
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

// BenchmarkSetVsSingle measures the server time of one IncSet on a set of
// three limits (a second, a minute and an hour) against one Inc, in the
// same run on a private server:
//
//	go test -run '^$' -bench SetVsSingle -benchtime 20000x -count 3 ./limiter/redissup/
//
// Each iteration makes one Inc and one IncSet on the same key, in chunks
// of 100 calls of one kind, in turn, with INFO commandstats (the EVALSHA
// calls and µs) read around every chunk. It reports single-µs/op and
// set-µs/op, the server's µs per call of sup_inc.lua and of sup_set.lua,
// and set/single, their ratio. (Redis counts each call in whole µs, and a
// SLOWLOG that logs every command would log the scripts' inner commands
// too, in 7.0, charging the set for its larger number of them.) Hot: every
// limit below its soft capacity, every call admitted and written.
// Overloaded: a key offered about twice its rate in every limit (W = 1 s,
// B = 10 ms for the single limit and the set's second), most calls
// between S and H (F = 1.5) and refused, paying for factors, declined
// counts and RetryAfter walks. floor-µs/op is the server time of a script
// that makes only the commands of an admitted set call that joins its
// buckets, on the same three hashes: per hash the HMGET of the ten meta
// fields, an HSET of two and the PEXPIRE, and nothing else (floorScript).
func BenchmarkSetVsSingle(b *testing.B) {
	srv := redistest.StartServer(b)
	rc := redis.NewClient(srv.Options())
	defer rc.Close()
	mk := func(rate float64) *limiter.Set {
		s, err := limiter.NewSet(
			limiter.Limit{Name: "second", Rate: limiter.PerSecond(rate), Window: time.Second, Bucket: 10 * time.Millisecond},
			limiter.Limit{Name: "minute", Rate: limiter.PerSecond(rate), Window: time.Minute},
			limiter.Limit{Name: "hour", Rate: limiter.PerSecond(rate), Window: time.Hour},
		)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	for _, c := range []struct {
		name string
		rate float64 // of the single limit and of each of the set's
	}{
		{"Hot", 1e6},
		{"Overloaded", 1000},
	} {
		b.Run(c.name, func(b *testing.B) {
			clk := conformance.NewClock()
			prefix := redistest.Prefix(b)
			l := newLimiter(b, rc, limiter.WithClock(clk.Now), limiter.WithPrefix(prefix),
				limiter.WithWindow(time.Second), limiter.WithBucket(10*time.Millisecond), limiter.WithHardLimitFactor(1.5))
			rate, set := limiter.PerSecond(c.rate), mk(c.rate)
			// Fill the windows: two seconds of calls every 0.5 ms, twice
			// the overloaded rate.
			for i := 0; i < 4000; i++ {
				if _, err := l.Inc(ctx, "k", rate, 1); err != nil {
					b.Fatal(err)
				}
				if _, err := l.IncSet(ctx, "k", set, 1); err != nil {
					b.Fatal(err)
				}
				clk.Advance(500 * time.Microsecond)
			}
			hs := make([]string, set.Len())
			for i := range hs {
				hs[i], _ = key.LimitName(prefix, "k", key.Suppressed, set.At(i).Name)
			}
			if err := floorScript.Load(ctx, rc).Err(); err != nil {
				b.Fatal(err)
			}
			const chunk = 100
			var usec, calls [3]int64 // single, set, floor
			run := func(which, n int) {
				c0, u0 := evalshaStat(b, rc)
				if which < 2 {
					b.StartTimer()
				}
				for i := 0; i < n; i++ {
					var err error
					switch which {
					case 0:
						_, err = l.Inc(ctx, "k", rate, 1)
					case 1:
						_, err = l.IncSet(ctx, "k", set, 1)
					default:
						err = floorScript.Run(ctx, rc, hs).Err()
					}
					if err != nil {
						b.Fatal(err)
					}
					if which < 2 {
						clk.Advance(500 * time.Microsecond)
					}
				}
				if which < 2 {
					b.StopTimer()
				}
				c1, u1 := evalshaStat(b, rc)
				calls[which] += c1 - c0
				usec[which] += u1 - u0
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.StopTimer()
			for done := 0; done < b.N; done += chunk {
				n := min(chunk, b.N-done)
				first := (done / chunk) % 2
				run(first, n)
				run(1-first, n)
				run(2, n)
			}
			if calls[0] != int64(b.N) || calls[1] != int64(b.N) || calls[2] != int64(b.N) {
				b.Fatalf("the server counted %v EVALSHA calls, want %d each", calls, b.N)
			}
			s1 := float64(usec[0]) / float64(calls[0])
			s3 := float64(usec[1]) / float64(calls[1])
			b.ReportMetric(s1, "single-µs/op")
			b.ReportMetric(s3, "set-µs/op")
			b.ReportMetric(s3/s1, "set/single")
			b.ReportMetric(float64(usec[2])/float64(calls[2]), "floor-µs/op")
		})
	}
}

// floorScript makes, on each hash in KEYS, the commands an admitted
// sup_set.lua call makes when every limit joins its newest bucket, and no
// other work: what a set costs before any Lua of its own. It writes back
// the values it read.
var floorScript = redis.NewScript(`
for i = 1, #KEYS do
  local m = redis.call('HMGET', KEYS[i], 'm', 'k')
  redis.call('HSET', KEYS[i], 'm', m[1])
  redis.call('PEXPIRE', KEYS[i], 3600000)
end
return 0`)
