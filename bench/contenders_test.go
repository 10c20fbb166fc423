package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// incFunc makes one decision for key and reports whether it was admitted.
type incFunc func(ctx context.Context, key string) (bool, error)

// A contender is one limiter under test. build returns its call for a
// policy; clk, when not nil, replaces Redis TIME (sluice only: used to lay
// out buckets in the past; redis_rate ignores it).
type contender struct {
	name  string
	build func(c *redis.Client, p policy, clk interface{ Now() time.Time }) (incFunc, error)
}

// A policy is the same limit in both libraries' terms.
type policy struct {
	rate  limiter.Rate     // sluice
	limit redis_rate.Limit // redis_rate: Rate per Period, Burst = Rate
}

// hardLimitFactor is redissup's F. Every workload stays below soft, so F
// only sets the stored hard capacity.
const hardLimitFactor = 1.5

// contenders are sluice's providers unbatched (WithBatching(0), given so
// that the Redis section measures one round trip per decision whatever the
// default, which is batched) and redis_rate. BenchmarkBatching measures
// batching.
var contenders = []contender{
	{"redisabs", func(c *redis.Client, p policy, clk interface{ Now() time.Time }) (incFunc, error) {
		l, err := redisabs.New(c, append(clockOpts(clk), limiter.WithBatching(0))...)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, k string) (bool, error) {
			d, err := l.Inc(ctx, k, p.rate, 1)
			return d.Allowed, err
		}, nil
	}},
	{"redissup", func(c *redis.Client, p policy, clk interface{ Now() time.Time }) (incFunc, error) {
		l, err := redissup.New(c, append(clockOpts(clk), limiter.WithHardLimitFactor(hardLimitFactor), limiter.WithBatching(0))...)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, k string) (bool, error) {
			d, err := l.Inc(ctx, k, p.rate, 1)
			return d.Allowed && !d.Suppressed, err
		}, nil
	}},
	{"redis_rate", func(c *redis.Client, p policy, _ interface{ Now() time.Time }) (incFunc, error) {
		l := redis_rate.NewLimiter(c)
		return func(ctx context.Context, k string) (bool, error) {
			r, err := l.Allow(ctx, k, p.limit)
			if err != nil {
				return false, err
			}
			return r.Allowed == 1, nil
		}, nil
	}},
}

func clockOpts(clk interface{ Now() time.Time }) []limiter.Option {
	if clk == nil {
		return nil // Redis TIME, as in production
	}
	return []limiter.Option{limiter.WithClock(clk.Now)}
}

// A workload is the keys the calls rotate over and the policy they run at.
// Every workload is sized so that all calls are admitted: the measure is
// the cost of a write that records a request.
type workload struct {
	name       string
	keys       []string
	policy     policy
	goroutines []int
	// fullWindow starts the sluice key with a full window of buckets
	// (W/B = 100 of them, the steady state of a key hit at least once per
	// bucket) instead of an empty one.
	fullWindow bool
}

var workloads = func() []workload {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	hot := policy{limiter.PerSecond(1e6), redis_rate.PerSecond(1_000_000)}
	return []workload{
		{name: "hot", keys: []string{"hot"}, policy: hot, goroutines: []int{1, 8, 64}},
		{name: "10k", keys: keys, policy: policy{limiter.PerMinute(1000), redis_rate.PerMinute(1000)}, goroutines: []int{1, 8, 64}},
		{name: "hotfull", keys: []string{"hot"}, policy: hot, goroutines: []int{64}, fullWindow: true},
	}
}()

// Default window and bucket of sluice: 1 min and W/100.
const (
	window = time.Minute
	bucket = window / 100
)

// prepare empties Redis and readies ct for w: scripts loaded, every
// pooled connection open, and every key of w touched once, so the measure
// starts on live keys.
func prepare(c *redis.Client, ct contender, w workload) (incFunc, error) {
	if err := c.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	inc, err := ct.build(c, w.policy, nil)
	if err != nil {
		return nil, err
	}
	if w.fullWindow && ct.name != "redis_rate" {
		// Buckets B apart over the last W - B, written at past instants
		// through a fake clock; the first real call opens the 100th.
		now, err := c.Time(ctx).Result()
		if err != nil {
			return nil, err
		}
		clk := &stepClock{t: now.Add(-window + bucket)}
		past, err := ct.build(c, w.policy, clk)
		if err != nil {
			return nil, err
		}
		for i := 0; i < int(window/bucket)-1; i++ {
			if _, err := past(ctx, w.keys[0]); err != nil {
				return nil, err
			}
			clk.Advance(bucket)
		}
	}
	n := len(w.keys)
	if n < 2000 {
		n = 2000
	}
	if _, err := parallel(poolSize, n, func(i int) (bool, error) {
		return inc(ctx, w.keys[i%len(w.keys)])
	}); err != nil {
		return nil, err
	}
	return inc, nil
}

// parallel makes n calls f(i) from g goroutines and returns how many were
// refused, stopping at the first error.
func parallel(g, n int, f func(i int) (bool, error)) (refused int64, err error) {
	var next, ref atomic.Int64
	errc := make(chan error, g)
	var wg sync.WaitGroup
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				ok, err := f(int(i))
				if err != nil {
					errc <- err
					next.Store(int64(n)) // stop the others
					return
				}
				if !ok {
					ref.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return ref.Load(), <-errc
}

// measure is the timed body shared by BenchmarkInc and TestCompare: b.N
// calls of inc from g goroutines over w's keys. Besides ns/op it reports
// ops/s, the server's µs per EVALSHA (INFO commandstats after CONFIG
// RESETSTAT: the script's run time), the server's CPU µs per call (INFO
// cpu, user + sys: the script plus reading, parsing and answering the
// request) and the benchmark process' CPU µs per call (getrusage; Linux
// only): the client's share of the machine.
func measure(b *testing.B, c *redis.Client, w workload, g int, inc incFunc) {
	measureCmd(b, c, w, g, inc, "evalsha")
}

// measureCmd is measure for contenders whose one command per call is cmd
// (the PING floor's is "ping"): its server µs are cmdstat_<cmd>'s.
func measureCmd(b *testing.B, c *redis.Client, w workload, g int, inc incFunc, cmd string) {
	if err := stats.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	cpu0, err := serverCPU(stats)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	self0 := processCPU()
	refused, err := parallel(g, b.N, func(i int) (bool, error) {
		return inc(ctx, w.keys[i%len(w.keys)])
	})
	self1 := processCPU()
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if refused > 0 {
		b.Fatalf("%d of %d calls refused; the workload is meant to be admitted", refused, b.N)
	}
	st, err := commandStat(stats, cmd)
	if err != nil {
		b.Fatal(err)
	}
	if st.Calls < int64(b.N) {
		b.Fatalf("cmdstat_%s calls = %d, want ≥ %d", cmd, st.Calls, b.N)
	}
	cpu1, err := serverCPU(stats)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(st.UsecPerCall, "server-µs/op")
	b.ReportMetric((cpu1-cpu0)*1e6/float64(b.N), "server-cpu-µs/op")
	b.ReportMetric(float64(self1-self0)/1e3/float64(b.N), "client-cpu-µs/op")
}

// Memory workload: 10,000 keys at 10 per minute, 5 requests each.
const memoryKeys, memoryCalls = 10_000, 5

var memoryPolicy = policy{limiter.PerMinute(10), redis_rate.PerMinute(10)}

// memSample is one measure of the memory workload, per key.
type memSample struct {
	PerKey float64 // INFO memory: used_memory less mem_clients_normal, delta / keys
	Used   float64 // the raw used_memory delta / keys
	Usage  float64 // mean MEMORY USAGE of 100 random keys
}

// memoryPerKey measures the memory workload on an empty Redis. buckets (1
// or 5) lays a sluice key's 5 requests in one bucket or in five, with a
// fake clock; redis_rate keeps one value per key either way.
//
// used_memory also counts the connections' buffers, which the server
// trims in the background: a reply buffer starts at 16 KB and shrinks to
// 1 KB about a second after the replies prove small, and a connection idle
// for 2 s frees its 16 KB query buffer. With 64 pooled connections that is
// over 1 MB, 100 bytes per key of the measure, moving at times that depend
// on the pool. So PerKey subtracts mem_clients_normal, read once the server
// has caught up (settled); Used keeps the raw delta for reference.
func memoryPerKey(c *redis.Client, ct contender, buckets int) (memSample, error) {
	now, err := c.Time(ctx).Result()
	if err != nil {
		return memSample{}, err
	}
	clk := &stepClock{t: now}
	var gap time.Duration
	if buckets > 1 {
		gap = bucket + bucket/2
	}
	inc, err := ct.build(c, memoryPolicy, clk)
	if err != nil {
		return memSample{}, err
	}
	pass := func(workers int, prefix string, keys int) error {
		refused, err := parallel(workers, keys, func(i int) (bool, error) {
			return inc(ctx, prefix+strconv.Itoa(i))
		})
		if err == nil && refused > 0 {
			err = fmt.Errorf("%s: %d calls refused", ct.name, refused)
		}
		return err
	}
	// Warm up: scripts loaded, every pooled connection open; then start
	// empty.
	if err := pass(poolSize, "warm:", 1000); err != nil {
		return memSample{}, err
	}
	if err := c.FlushAll(ctx).Err(); err != nil {
		return memSample{}, err
	}
	before, err := settledMemory()
	if err != nil {
		return memSample{}, err
	}
	for r := 0; r < memoryCalls; r++ {
		if err := pass(16, "user:", memoryKeys); err != nil {
			return memSample{}, err
		}
		clk.Advance(gap)
	}
	after, err := settledMemory()
	if err != nil {
		return memSample{}, err
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != memoryKeys {
		return memSample{}, fmt.Errorf("%s: DBSIZE = %d, %v; want %d", ct.name, n, err, memoryKeys)
	}
	const samples = 100
	var sum int64
	for i := 0; i < samples; i++ {
		k, err := c.RandomKey(ctx).Result()
		if err != nil {
			return memSample{}, err
		}
		u, err := c.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			return memSample{}, err
		}
		sum += u
	}
	return memSample{
		PerKey: float64(after.Data()-before.Data()) / memoryKeys,
		Used:   float64(after.Used-before.Used) / memoryKeys,
		Usage:  float64(sum) / samples,
	}, nil
}

// settledMemory reads INFO memory (on the stats connection) once
// used_memory less mem_clients_normal has not moved for 2 s: the server
// updates a connection's share of mem_clients_normal about once a second,
// while used_memory moves at once.
func settledMemory() (memory, error) {
	const (
		poll   = 500 * time.Millisecond
		stable = 4 // polls
		within = 4096
	)
	last, err := memoryInfo(stats)
	if err != nil {
		return memory{}, err
	}
	same := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		time.Sleep(poll)
		m, err := memoryInfo(stats)
		if err != nil {
			return memory{}, err
		}
		if d := m.Data() - last.Data(); -within <= d && d <= within {
			if same++; same == stable {
				return m, nil
			}
			continue
		}
		same, last = 0, m
	}
	return memory{}, errors.New("used_memory did not settle within 30s")
}

// stepClock is a clock that moves only when told.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
