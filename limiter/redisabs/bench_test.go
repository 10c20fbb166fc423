package redisabs_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/doccheck"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// Benchmarks run on the real redis-server of the harness, with Redis TIME
// as the clock (as in production) and the default window (1 min, B = 600 ms):
//
//	go test -run '^$' -bench . -benchmem ./limiter/redisabs/
//
// HotKey: one key whose capacity is never reached (every call writes).
// HotKeyRejected: one key kept full (every call is a refusal).
// Keys10k: calls rotate over 10,000 keys at 1,000 per minute.
func BenchmarkInc(b *testing.B) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	cases := []struct {
		name string
		rate limiter.Rate
		key  func(i int) string
	}{
		{"HotKey", limiter.PerSecond(1e9), func(int) string { return "hot" }},
		{"HotKeyRejected", limiter.PerMinute(10), func(int) string { return "hot" }},
		{"Keys10k", limiter.PerMinute(1000), func(i int) string { return keys[i%len(keys)] }},
	}
	for _, c := range cases {
		b.Run(c.name+"/Serial", func(b *testing.B) {
			l := newLimiter(b, redistest.Real(b).Client(b))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.Inc(ctx, c.key(i), c.rate, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/Parallel", func(b *testing.B) {
			l := newLimiter(b, redistest.Real(b).Client(b))
			var seq atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
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
		})
	}
}

// BenchmarkPing is the floor the other benchmarks stand on: one round trip
// to the same server with the same client.
func BenchmarkPing(b *testing.B) {
	c := redistest.Real(b).Client(b)
	for i := 0; i < b.N; i++ {
		if err := c.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadOnly measures IsAllowed and Get on a live key.
func BenchmarkReadOnly(b *testing.B) {
	l := newLimiter(b, redistest.Real(b).Client(b))
	if _, err := l.Inc(ctx, "k", limiter.PerMinute(100), 5); err != nil {
		b.Fatal(err)
	}
	b.Run("IsAllowed", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := l.IsAllowed(ctx, "k"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Get", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := l.Get(ctx, "k"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFullWindow measures Inc on one key whose window is full of
// buckets (one per B), for several W/B: the cost of listpack lookups and of
// the scan that runs each time the oldest bucket expires.
func BenchmarkFullWindow(b *testing.B) {
	for _, buckets := range []int{100, 250, 500} {
		b.Run(fmt.Sprintf("W/B=%d", buckets), func(b *testing.B) {
			clk := conformance.NewClock()
			bucket := time.Millisecond
			l := newLimiter(b, redistest.Real(b).Client(b), limiter.WithClock(clk.Now),
				limiter.WithWindow(time.Duration(buckets)*bucket), limiter.WithBucket(bucket))
			rate := limiter.PerSecond(1e9)
			for i := 0; i < buckets; i++ {
				if _, err := l.Inc(ctx, "k", rate, 1); err != nil {
					b.Fatal(err)
				}
				clk.Advance(bucket)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.Inc(ctx, "k", rate, 1); err != nil {
					b.Fatal(err)
				}
				clk.Advance(bucket)
			}
		})
	}
}

// memoryKeys and memoryCalls are the memory test's workload: 10,000 keys
// under a 10-per-minute policy, 5 requests each.
const memoryKeys, memoryCalls = 10_000, 5

// TestMemoryPerKey measures, on a private real redis-server, the INFO
// memory delta (used_memory at the end of the run less used_memory right
// after a FLUSHALL that follows) per key of 10,000 keys under a 10-per-minute
// policy with 5 requests each, and the mean MEMORY USAGE of one key. The
// figures are in the memory tables of docs/data-model.md and
// docs/operations.md, which doccheck.CheckMemory compares with them:
//
//	go test -run TestMemoryPerKey -v ./limiter/redisabs/
func TestMemoryPerKey(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, tc := range []struct {
		name string
		gap  time.Duration // between a key's requests
		doc  string        // the workload's row in the docs' memory tables
	}{
		{"one bucket", 0, doccheck.OneBucket},               // the 5 requests coalesce
		{"five buckets", time.Second, doccheck.FiveBuckets}, // each request opens a bucket
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartServer(t)
			opt := srv.Options()
			c := redis.NewClient(opt)
			t.Cleanup(func() { c.Close() })
			clk := conformance.NewClock()
			prefix := redistest.Prefix(t)
			// No timeout: on a loaded machine a call past it would be
			// shed and write nothing, and a confirming probe would write
			// a key of its own.
			opts := []limiter.Option{limiter.WithPrefix(prefix), limiter.WithClock(clk.Now), limiter.WithTimeout(0)}
			// The keys are written by a limiter of their own client with
			// batching on (pipelines of up to 128 calls): the same script
			// calls, writing the same hashes, for less CPU than one round
			// trip each (most of this test's time under the race
			// detector). That client is closed before the readings, so
			// the server's client buffers at the figure and at the
			// baseline are those of c's one connection alike.
			fc := redis.NewClient(opt)
			fill, err := redisabs.New(fc, append(opts, limiter.WithBatching(128))...)
			if err != nil {
				t.Fatal(err)
			}
			rate := limiter.PerMinute(10)
			const workers = 64 // more than 8 calls in flight: batched
			run := func(prefix string, keys int) {
				var wg sync.WaitGroup
				errs := make(chan error, workers)
				for w := 0; w < workers; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						for i := w; i < keys; i += workers {
							if _, err := fill.Inc(ctx, prefix+strconv.Itoa(i), rate, 1); err != nil {
								errs <- err
								return
							}
						}
					}(w)
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
			}
			for r := 0; r < memoryCalls; r++ {
				run("user:", memoryKeys)
				clk.Advance(tc.gap)
			}
			if err := fill.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := fc.Close(); err != nil {
				t.Fatal(err)
			}
			redistest.WaitClients(t, c, 1)
			after := redistest.UsedMemory(t, c)
			if n := c.DBSize(ctx).Val(); n != memoryKeys {
				t.Fatalf("DBSIZE = %d, want %d", n, memoryKeys)
			}
			var usage, fields int64
			for i := 0; i < memoryKeys; i += 100 {
				h := hashOf(t, prefix, "user:"+strconv.Itoa(i))
				usage += c.MemoryUsage(ctx, h, 0).Val()
				fields += c.HLen(ctx, h).Val()
			}
			// The baseline is read right after the figure, with the data
			// flushed: the connections and their buffers are as they were
			// at the figure, where a reading before the run saw them as
			// the warm-up left them, some hundred kilobytes apart.
			if err := c.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			empty := redistest.UsedMemory(t, c)
			perKey := float64(after-empty) / memoryKeys
			t.Logf("%s: used_memory %d flushed, %d full: %.0f bytes per key (INFO memory delta); MEMORY USAGE %d bytes, %.1f fields per hash",
				tc.name, empty, after, perKey, usage/(memoryKeys/100), float64(fields)/(memoryKeys/100))
			doccheck.CheckMemory(t, c, doccheck.Memory{Strategy: "absolute", Workload: tc.doc,
				PerKey: perKey, Usage: usage / (memoryKeys / 100), Fields: float64(fields) / (memoryKeys / 100)})
			if perKey > 350 {
				t.Errorf("%.0f bytes per key, above the 350-byte target", perKey)
			}
		})
	}
}

// BenchmarkSet compares a call on a set of three limits {100 per second,
// 1,000 per minute, 10,000 per hour} with a single-limit Inc of 1,000 per
// minute, on 10,000 keys (admitted calls) and on one full key (refusals),
// serially. Beside ns/op it reports the Redis server's own time per call
// (server-µs/op: usec / calls of EVALSHA in INFO commandstats), the figure
// the cost target of a set is stated in:
//
//	go test -run '^$' -bench 'BenchmarkSet' -benchmem -count 5 ./limiter/redisabs/
func BenchmarkSet(b *testing.B) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	set, err := limiter.NewSet(
		limiter.Limit{Name: "second", Rate: limiter.PerSecond(100), Window: time.Second},
		limiter.Limit{Name: "minute", Rate: limiter.PerMinute(1000), Window: time.Minute},
		limiter.Limit{Name: "hour", Rate: limiter.PerHour(10_000), Window: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	full, err := limiter.NewSet(
		limiter.Limit{Name: "second", Rate: limiter.PerSecond(100), Window: time.Second},
		limiter.Limit{Name: "minute", Rate: limiter.PerMinute(10), Window: time.Minute},
		limiter.Limit{Name: "hour", Rate: limiter.PerHour(10_000), Window: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		opts []limiter.Option
		call func(l *redisabs.Limiter, i int) error
	}{
		{"Single/Keys10k/Second", []limiter.Option{limiter.WithWindow(time.Second)}, func(l *redisabs.Limiter, i int) error {
			_, err := l.Inc(ctx, keys[i%len(keys)], limiter.PerSecond(100), 1)
			return err
		}},
		{"Single/Keys10k/Minute", nil, func(l *redisabs.Limiter, i int) error {
			_, err := l.Inc(ctx, keys[i%len(keys)], limiter.PerMinute(1000), 1)
			return err
		}},
		{"Single/Keys10k/Hour", []limiter.Option{limiter.WithWindow(time.Hour)}, func(l *redisabs.Limiter, i int) error {
			_, err := l.Inc(ctx, keys[i%len(keys)], limiter.PerHour(10_000), 1)
			return err
		}},
		{"Set3/Keys10k", nil, func(l *redisabs.Limiter, i int) error {
			_, err := l.IncSet(ctx, keys[i%len(keys)], set, 1)
			return err
		}},
		{"Single/HotKeyRejected", nil, func(l *redisabs.Limiter, i int) error {
			_, err := l.Inc(ctx, "hot", limiter.PerMinute(10), 1)
			return err
		}},
		{"Set3/HotKeyRejected", nil, func(l *redisabs.Limiter, i int) error {
			_, err := l.IncSet(ctx, "hot", full, 1)
			return err
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			cl := redistest.Real(b).Client(b)
			l := newLimiter(b, cl, c.opts...)
			for i := 0; i < 20; i++ { // fill the full key, load the script
				if err := c.call(l, i); err != nil {
					b.Fatal(err)
				}
			}
			if err := cl.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := c.call(l, i); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if us, ok := scriptServerMicros(b, cl); ok {
				b.ReportMetric(us, "server-µs/op")
			}
		})
	}
}

// scriptServerMicros reads the mean server time of EVALSHA since the last
// CONFIG RESETSTAT from INFO commandstats.
func scriptServerMicros(b *testing.B, c *redis.Client) (float64, bool) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "cmdstat_evalsha:")), ",") {
			if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
				x, err := strconv.ParseFloat(v, 64)
				return x, err == nil
			}
		}
	}
	return 0, false
}
