package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// BenchmarkHybrid compares the hybrid absolute provider with redisabs and
// redis_rate at 64 goroutines, on the hot and 10k workloads of
// BenchmarkInc, on the run's one redis-server, contenders interleaved per
// round:
//
//	go test -run '^$' -bench Hybrid -benchtime 3s -count 3 | tee hybrid.txt
//
// The sluice contenders get WithTimeout(5 s), the shared client's bound,
// so that a loaded machine does not send them to the failure policy.
// Besides ns/op and ops/s it reports the script calls the contender sent
// per 1,000 decisions (EVALSHA and EVAL: the round trips, pipelined or
// not) and the Redis commands they ran per 1,000 decisions (every line
// of INFO commandstats, the commands scripts call included). Decisions
// are not required to be admissions: at hybrid speed the 10k workload's
// keys (1,000 per minute each) fill up, and refusals are decisions too.
func BenchmarkHybrid(b *testing.B) {
	c := requireServer(b)
	const g = 64
	for _, w := range workloads[:2] {
		b.Run("load="+w.name, func(b *testing.B) {
			names := []string{"redisabs", "redis_rate", "hybrid"}
			if w.name == "10k" {
				// the same with leases that live up to 6 s (B = W/10), for
				// keys called further apart than a default lease lives
				names = append(names, "hybrid-bucket=W/10")
			}
			for _, name := range names {
				b.Run("impl="+name, func(b *testing.B) {
					if err := c.FlushAll(ctx).Err(); err != nil {
						b.Fatal(err)
					}
					inc, closeFn, err := buildHybridContender(c, name, w.policy)
					if err != nil {
						b.Fatal(err)
					}
					defer closeFn()
					// warm: every key once, every connection open
					if _, err := parallel(poolSize, max(len(w.keys), 2000), func(i int) (bool, error) {
						return inc(ctx, w.keys[i%len(w.keys)])
					}); err != nil {
						b.Fatal(err)
					}
					measureDecisions(b, w, g, inc)
				})
			}
		})
	}
}

// buildHybridContender returns the call of one contender and what closes
// it.
func buildHybridContender(c *redis.Client, name string, p policy) (incFunc, func(), error) {
	switch name {
	case "redisabs":
		// Unbatched, as when the hybrid section was measured.
		l, err := redisabs.New(c, limiter.WithTimeout(5*time.Second), limiter.WithBatching(0))
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, k string) (bool, error) {
			d, err := l.Inc(ctx, k, p.rate, 1)
			return d.Allowed, err
		}, func() { l.Close(ctx) }, nil
	case "redis_rate":
		l := redis_rate.NewLimiter(c)
		return func(ctx context.Context, k string) (bool, error) {
			r, err := l.Allow(ctx, k, p.limit)
			if err != nil {
				return false, err
			}
			return r.Allowed == 1, nil
		}, func() {}, nil
	case "hybrid", "hybrid-bucket=W/10":
		opts := []limiter.Option{limiter.WithTimeout(5 * time.Second)}
		if name != "hybrid" {
			opts = append(opts, limiter.WithBucket(window/10))
		}
		l, err := hybrid.NewAbsolute(c, opts...)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, k string) (bool, error) {
			d, err := l.Inc(ctx, k, p.rate, 1)
			return d.Allowed, err
		}, func() { l.Close(ctx) }, nil
	}
	return nil, nil, fmt.Errorf("no contender %q", name)
}

// BenchmarkHybridSuppressed compares the suppressed hybrid with redissup
// at 64 goroutines on the run's one redis-server, contenders interleaved
// per round, on the hot and 10k workloads of BenchmarkInc (below the soft
// capacity) and on "hotover", the hot key at 1,000 per minute (S = 1,000
// per 1-minute window, H = 1.5 S), which every contender drives beyond S
// within the warm-up, so that its decisions draw against the factor (or
// are refused beyond H):
//
//	go test -run '^$' -bench HybridSuppressed -benchtime 3s -count 3 | tee hybrid-sup.txt
//
// It reports what BenchmarkHybrid reports; a decision is any answer, and
// %refused counts the suppressed and refused ones.
func BenchmarkHybridSuppressed(b *testing.B) {
	c := requireServer(b)
	const g = 64
	over := workload{name: "hotover", keys: []string{"hot"}, policy: policy{limiter.PerMinute(1000), redis_rate.PerMinute(1000)}}
	for _, w := range append(workloads[:2:2], over) {
		b.Run("load="+w.name, func(b *testing.B) {
			for _, name := range []string{"redissup", "hybrid-sup"} {
				b.Run("impl="+name, func(b *testing.B) {
					if err := c.FlushAll(ctx).Err(); err != nil {
						b.Fatal(err)
					}
					inc, closeFn, err := buildSuppressedContender(c, name, w.policy)
					if err != nil {
						b.Fatal(err)
					}
					defer closeFn()
					if _, err := parallel(poolSize, max(len(w.keys), 2000), func(i int) (bool, error) {
						return inc(ctx, w.keys[i%len(w.keys)])
					}); err != nil {
						b.Fatal(err)
					}
					measureDecisions(b, w, g, inc)
				})
			}
		})
	}
}

// buildSuppressedContender returns the call of one contender of
// BenchmarkHybridSuppressed and what closes it.
func buildSuppressedContender(c *redis.Client, name string, p policy) (incFunc, func(), error) {
	opts := []limiter.Option{limiter.WithTimeout(5 * time.Second), limiter.WithHardLimitFactor(hardLimitFactor)}
	var l limiter.Limiter
	var err error
	switch name {
	case "redissup":
		// Unbatched, as when the hybrid section was measured.
		l, err = redissup.New(c, append(opts, limiter.WithBatching(0))...)
	case "hybrid-sup":
		l, err = hybrid.NewSuppressed(c, opts...)
	default:
		err = fmt.Errorf("no contender %q", name)
	}
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, k string) (bool, error) {
		d, err := l.Inc(ctx, k, p.rate, 1)
		return d.Allowed, err
	}, func() { l.Close(ctx) }, nil
}

// measureDecisions is the timed body of BenchmarkHybrid: b.N calls of inc
// from g goroutines over w's keys.
func measureDecisions(b *testing.B, w workload, g int, inc incFunc) {
	if err := stats.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	cpu0, reads0, err := serverSample(stats)
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
	cpu1, reads1, err := serverSample(stats)
	if err != nil {
		b.Fatal(err)
	}
	scriptCalls, commands, err := commandTotals(stats)
	if err != nil {
		b.Fatal(err)
	}
	if reads1 > reads0 {
		// the script calls per read event of the server: how many calls
		// a pipeline (or a single call) brought at once
		b.ReportMetric(float64(scriptCalls)/float64(reads1-reads0), "calls/read")
	}
	n := float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(scriptCalls)*1000/n, "calls/1k")
	b.ReportMetric(float64(commands)*1000/n, "cmds/1k")
	b.ReportMetric(float64(refused)*100/n, "%refused")
	// CPU per decision, the server's and this process's (the limiter,
	// its client and the benchmark's goroutines): less sensitive to the
	// machine's load than ops/s.
	b.ReportMetric((cpu1-cpu0)*1e6/n, "server-cpu-µs/op")
	b.ReportMetric(float64(self1-self0)/1e3/n, "client-cpu-µs/op")
}

// commandTotals sums INFO commandstats: the script calls clients sent
// (EVALSHA, EVAL) and every command run, less the INFO and CONFIG of the
// statistics client.
func commandTotals(c *redis.Client) (scriptCalls, commands int64, err error) {
	s, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(s, "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		cmd := strings.TrimPrefix(name, "cmdstat_")
		if cmd == "info" || strings.HasPrefix(cmd, "config") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		k, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %q: %w", name, v, err)
		}
		commands += k
		if cmd == "evalsha" || cmd == "eval" {
			scriptCalls += k
		}
	}
	return scriptCalls, commands, nil
}
