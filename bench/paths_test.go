package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// The paths set-up: 1,000 per second per key over W = 1 s with B = 10 ms,
// from pathGoroutines goroutines; redis_rate gets the same rate and a
// burst of one window (1,000).
const (
	pathWindow     = time.Second
	pathBucket     = 10 * time.Millisecond
	pathGoroutines = 8
)

var (
	pathRate  = limiter.PerSecond(1000)
	pathLimit = redis_rate.PerSecond(1000)
)

// A pathLoad is one path of the paths benchmark: the keys the calls rotate
// over, how long calls run before the measure (so that windows are in
// their steady state) and whether calls are meant to be refused.
type pathLoad struct {
	name      string
	keys      []string
	warm      time.Duration
	saturated bool
}

var pathLoads = func() []pathLoad {
	keys := func(n int) []string {
		ks := make([]string, n)
		for i := range ks {
			ks[i] = "user:" + strconv.Itoa(i)
		}
		return ks
	}
	return []pathLoad{
		// Each key is called about twice a second: nearly every call
		// opens a bucket and drops the one that died.
		{name: "10k", keys: keys(10_000)},
		// Each key is called about every 6 ms, well below its rate: full
		// windows of 10 ms buckets, calls join, open and drop buckets.
		{name: "100", keys: keys(100), warm: pathWindow + pathBucket},
		// One key offered far above its rate: redisabs and redis_rate
		// refuse most calls, redissup is overloaded (suppression
		// factor near 1, most calls refused with a RetryAfter).
		{name: "hot", keys: []string{"hot"}, warm: pathWindow + pathBucket, saturated: true},
	}
}()

// pathOptions are the sluice contenders' options: the window and bucket,
// a 5 s bound per call (the shared client's; the default 250 ms would let
// a loaded machine turn calls into fallback decisions that never reach
// Redis), and no batching, so that every decision is one EVALSHA and one
// round trip, as with redis_rate: the paths compare the scripts' cost.
var pathOptions = []limiter.Option{limiter.WithWindow(pathWindow), limiter.WithBucket(pathBucket),
	limiter.WithTimeout(5 * time.Second), limiter.WithBatching(0)}

// pathDecision reports d's admission, or errDegraded for a decision Redis
// did not make.
func pathDecision(d limiter.Decision, err error) (bool, error) {
	if err == nil && d.Degraded {
		err = errDegraded
	}
	return d.Allowed, err
}

// pathContenders builds each limiter of the paths benchmark.
var pathContenders = []struct {
	name  string
	build func(c *redis.Client) (incFunc, error)
}{
	{"redisabs", func(c *redis.Client) (incFunc, error) {
		l, err := redisabs.New(c, pathOptions...)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, k string) (bool, error) {
			return pathDecision(l.Inc(ctx, k, pathRate, 1))
		}, nil
	}},
	{"redissup", func(c *redis.Client) (incFunc, error) {
		l, err := redissup.New(c, append(pathOptions, limiter.WithHardLimitFactor(hardLimitFactor))...)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, k string) (bool, error) {
			return pathDecision(l.Inc(ctx, k, pathRate, 1))
		}, nil
	}},
	{"redis_rate", func(c *redis.Client) (incFunc, error) {
		l := redis_rate.NewLimiter(c)
		return func(ctx context.Context, k string) (bool, error) {
			r, err := l.Allow(ctx, k, pathLimit)
			if err != nil {
				return false, err
			}
			return r.Allowed == 1, nil
		}, nil
	}},
}

// BenchmarkPaths measures the paths users hit, side by side with
// go-redis/redis_rate on the run's one redis-server, 8 goroutines at
// 1,000/s per key (W = 1 s, B = 10 ms): 10,000 keys (calls open buckets
// and drop dead ones), 100 keys with full windows, and one hot key far
// above its rate (refusals; redissup overloaded). Besides ns/op it reports
// ops/s, the server's µs per EVALSHA (INFO commandstats: the script's run
// time, the figure docs/benchmarks.md compares), the server's CPU µs per
// call and the share of calls refused:
//
//	go test -run '^$' -bench Paths -benchtime 20000x -count 3 | tee testdata/paths.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /impl testdata/paths.txt
func BenchmarkPaths(b *testing.B) {
	c := requireServer(b)
	for _, p := range pathLoads {
		b.Run("path="+p.name, func(b *testing.B) {
			for _, ct := range pathContenders {
				b.Run("impl="+ct.name, func(b *testing.B) {
					inc, err := preparePath(c, ct.build, p)
					if err != nil {
						b.Fatal(err)
					}
					measurePath(b, p, inc)
				})
			}
		})
	}
}

// preparePath empties Redis, builds the limiter, touches every key once
// and runs calls for p.warm.
func preparePath(c *redis.Client, build func(*redis.Client) (incFunc, error), p pathLoad) (incFunc, error) {
	if err := c.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	inc, err := build(c)
	if err != nil {
		return nil, err
	}
	if _, err := parallel(poolSize, len(p.keys), func(i int) (bool, error) { return inc(ctx, p.keys[i]) }); err != nil {
		return nil, err
	}
	for end := time.Now().Add(p.warm); time.Now().Before(end); {
		if _, err := parallel(pathGoroutines, 1000, func(i int) (bool, error) {
			return inc(ctx, p.keys[i%len(p.keys)])
		}); err != nil {
			return nil, err
		}
	}
	return inc, nil
}

// measurePath is the timed body of BenchmarkPaths: b.N calls from
// pathGoroutines goroutines over p's keys.
func measurePath(b *testing.B, p pathLoad, inc incFunc) {
	if err := stats.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	cpu0, err := serverCPU(stats)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	refused, err := parallel(pathGoroutines, b.N, func(i int) (bool, error) {
		return inc(ctx, p.keys[i%len(p.keys)])
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	st, err := commandStat(stats, "evalsha")
	if err != nil {
		b.Fatal(err)
	}
	if st.Calls < int64(b.N) {
		b.Fatalf("cmdstat_evalsha calls = %d, want ≥ %d", st.Calls, b.N)
	}
	cpu1, err := serverCPU(stats)
	if err != nil {
		b.Fatal(err)
	}
	// The path must be the one named: no refusal below the rate, mostly
	// refusals on the saturated key (once b.N spans more than a window's
	// worth of calls).
	switch share := float64(refused) / float64(b.N); {
	case !p.saturated && refused > 0:
		b.Fatalf("%d of %d calls refused on path %s, which stays below the rate", refused, b.N, p.name)
	case p.saturated && b.N >= 10_000 && share < 0.5:
		b.Fatalf("%.0f%% of %d calls refused on the saturated key, want most", 100*share, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(st.UsecPerCall, "server-µs/op")
	b.ReportMetric((cpu1-cpu0)*1e6/float64(b.N), "server-cpu-µs/op")
	b.ReportMetric(float64(refused)/float64(b.N), "refused/op")
}
