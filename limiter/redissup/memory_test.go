package redissup_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/doccheck"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// TestMemoryPerKey measures, on a private real redis-server, the INFO
// memory delta (used_memory at the end of the run less used_memory right
// after a FLUSHALL that follows) per key of 10,000 keys under a 10-per-minute
// policy (W = 1 min, B = 600 ms), and the mean MEMORY USAGE of one hash.
// The figures are in the memory tables of docs/data-model.md and
// docs/operations.md, which doccheck.CheckMemory compares with them:
//
//	go test -run TestMemoryPerKey -v ./limiter/redissup/
func TestMemoryPerKey(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	const keys = 10_000
	for _, tc := range []struct {
		name   string
		calls  int
		gap    time.Duration // between a key's requests
		factor float64
		budget float64 // bytes per key, 0 for none
		doc    string  // the workload's row in the docs' memory tables
	}{
		{"5 requests, one bucket", 5, 0, 1, 350, doccheck.OneBucket},
		{"5 requests, five buckets", 5, time.Second, 1, 350, doccheck.FiveBuckets},
		{"20 requests 1 s apart, F = 1.5 (suppressed)", 20, time.Second, 1.5, 0, doccheck.Suppressed20},
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
			opts := []limiter.Option{limiter.WithPrefix(prefix), limiter.WithClock(clk.Now), limiter.WithTimeout(0),
				limiter.WithHardLimitFactor(tc.factor), limiter.WithRandom(conformance.NewRand(1))}
			// The keys are written by a limiter of their own client with
			// batching on (the default 128 calls a pipeline): the same
			// script calls, writing the same hashes, for about a third of
			// the CPU of one round trip each (most of this test's time
			// under the race detector). That client is closed before the
			// readings, so the server's client buffers at the figure and
			// at the baseline are those of c's one connection alike.
			fc := redis.NewClient(opt)
			fill, err := redissup.New(fc, with(opts, limiter.WithBatching(128))...)
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
			for r := 0; r < tc.calls; r++ {
				run("user:", keys)
				clk.Advance(tc.gap)
			}
			if err := fill.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := fc.Close(); err != nil {
				t.Fatal(err)
			}
			l, err := redissup.New(c, with(opts, limiter.WithBatching(0))...)
			if err != nil {
				t.Fatal(err)
			}
			redistest.WaitClients(t, c, 1)
			after := redistest.UsedMemory(t, c)
			if n := c.DBSize(ctx).Val(); n != keys {
				t.Fatalf("DBSIZE = %d, want %d", n, keys)
			}
			var usage, fields int64
			for i := 0; i < keys; i += 100 {
				h := hashOf(t, prefix, "user:"+strconv.Itoa(i))
				usage += c.MemoryUsage(ctx, h, 0).Val()
				fields += c.HLen(ctx, h).Val()
			}
			u := mustGet(t, l, "user:0")
			// The baseline is read right after the figure, with the data
			// flushed: the connections and their buffers are as they were
			// at the figure, where a reading before the run saw them as
			// the warm-up left them, some hundred kilobytes apart.
			if err := c.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			empty := redistest.UsedMemory(t, c)
			perKey := float64(after-empty) / keys
			t.Logf("%s: used_memory %d flushed, %d full: %.0f bytes per key; MEMORY USAGE %d bytes, %.1f fields per hash; user:0 %+v",
				tc.name, empty, after, perKey, usage/(keys/100), float64(fields)/(keys/100), u)
			doccheck.CheckMemory(t, c, doccheck.Memory{Strategy: "suppressed", Workload: tc.doc,
				PerKey: perKey, Usage: usage / (keys / 100), Fields: float64(fields) / (keys / 100)})
			if tc.budget > 0 && perKey > tc.budget {
				t.Errorf("%.0f bytes per key, above the %.0f-byte target", perKey, tc.budget)
			}
		})
	}
}

// TestListpack checks the encoding claim of docs/data-model.md: under
// overload every bucket but a few carries a declined field, so a full
// window (W/B + 1 buckets: a bucket lives W + B) holds up to 2·(W/B + 1) +
// 8 fields, and the hash stays a listpack while that is at most
// hash-max-listpack-entries (512 by default: W/B ≤ 251). It holds at least
// 2·W/B − 1: W/B closed buckets, all but the first few (admitted below
// S = 2) with a declined field, and "m" and "k".
func TestListpack(t *testing.T) {
	c := realClient(t)
	cfg, err := c.ConfigGet(ctx, "hash-max-listpack-entries").Result()
	if err != nil {
		t.Fatal(err)
	}
	var maxEntries int64
	if _, err := fmt.Sscan(cfg["hash-max-listpack-entries"], &maxEntries); err != nil || maxEntries < 16 {
		t.Fatalf("hash-max-listpack-entries = %q", cfg["hash-max-listpack-entries"])
	}
	for _, buckets := range []int64{100, 128, (maxEntries - 10) / 2, maxEntries/2 + 10} {
		t.Run(fmt.Sprint(buckets), func(t *testing.T) {
			clk := conformance.NewClock()
			prefix := redistest.Prefix(t)
			b := 10 * time.Millisecond
			w := time.Duration(buckets) * b
			l := newLimiter(t, c, limiter.WithPrefix(prefix), limiter.WithWindow(w), limiter.WithBucket(b),
				limiter.WithClock(clk.Now), limiter.WithHardLimitFactor(1.5), limiter.WithRandom(conformance.NewRand(2)))
			rate := limiter.Every(2, w) // S = 2, H = 3: nearly every call refused
			// Two windows of one call per bucket.
			for i := int64(0); i < 2*buckets; i++ {
				mustInc(t, l, "k", rate, 1)
				clk.Advance(b)
			}
			h := hashOf(t, prefix, "k")
			n := c.HLen(ctx, h).Val()
			enc := c.ObjectEncoding(ctx, h).Val()
			t.Logf("W/B = %d: %d fields, %s, MEMORY USAGE %d bytes", buckets, n, enc, c.MemoryUsage(ctx, h).Val())
			if n > 2*buckets+10 || n < 2*buckets-1 {
				t.Errorf("HLEN = %d, want between 2·W/B − 1 = %d and 2·(W/B + 1) + 8", n, 2*buckets-1)
			}
			if want := map[bool]string{true: "listpack", false: "hashtable"}[n <= maxEntries]; enc != want {
				t.Errorf("%d fields with hash-max-listpack-entries %d: OBJECT ENCODING = %q, want %q", n, maxEntries, enc, want)
			}
			if buckets <= (maxEntries-10)/2 && enc != "listpack" {
				t.Errorf("W/B = %d: encoding %q, want listpack", buckets, enc)
			}
		})
	}
}
