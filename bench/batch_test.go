package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redisprov"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// batchContenders are both sluice strategies with batching
// (WithBatching(128), the default) and without (WithBatching(0)), redis_rate, which sends
// every call alone, and the PING floor: one PING per decision, the round
// trip that an unbatched limiter cannot go below. The sluice ones get WithTimeout(5 s), the shared client's
// ReadTimeout: the client has no ContextTimeoutEnabled, so an unbatched
// call is bounded by ReadTimeout whatever WithTimeout says, while a call
// waiting for a batch honours its deadline; the same bound for both keeps
// a stall of the loaded machine from opening one breaker and not the
// other. A degraded decision (the breaker open) fails the benchmark
// instead of counting as a fast one.
var batchContenders = []contender{
	sluiceContender("redisabs", false, limiter.WithTimeout(5*time.Second), limiter.WithBatching(128)),
	sluiceContender("redisabs-alone", false, limiter.WithTimeout(5*time.Second), limiter.WithBatching(0)),
	sluiceContender("redissup", true, limiter.WithTimeout(5*time.Second), limiter.WithBatching(128)),
	sluiceContender("redissup-alone", true, limiter.WithTimeout(5*time.Second), limiter.WithBatching(0)),
	contenders[2], // redis_rate
	pingFloor,
}

// pingFloor "decides" with one PING: a round trip and no script.
var pingFloor = contender{"ping", func(c *redis.Client, _ policy, _ interface{ Now() time.Time }) (incFunc, error) {
	return func(ctx context.Context, _ string) (bool, error) {
		return true, c.Ping(ctx).Err()
	}, nil
}}

var errDegraded = errors.New("degraded decision: the limiter's breaker is open")

func sluiceContender(name string, sup bool, opts ...limiter.Option) contender {
	return contender{name, func(c *redis.Client, p policy, clk interface{ Now() time.Time }) (incFunc, error) {
		o := append(clockOpts(clk), opts...)
		var l limiter.Limiter
		var err error
		if sup {
			l, err = redissup.New(c, append(o, limiter.WithHardLimitFactor(hardLimitFactor))...)
		} else {
			l, err = redisabs.New(c, o...)
		}
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, k string) (bool, error) {
			d, err := l.Inc(ctx, k, p.rate, 1)
			if err == nil && d.Degraded {
				err = errDegraded
			}
			return d.Allowed && !d.Suppressed, err
		}, nil
	}}
}

// wire counts what the shared client sends: commands, and round trips (a
// single command or a pipeline is one).
type wire struct{ cmds, trips atomic.Int64 }

func (w *wire) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w *wire) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		w.cmds.Add(1)
		w.trips.Add(1)
		return next(ctx, cmd)
	}
}

func (w *wire) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		w.cmds.Add(int64(len(cmds)))
		w.trips.Add(1)
		return next(ctx, cmds)
	}
}

var (
	wireOnce  atomic.Bool
	wireCount = &wire{}
)

// BenchmarkBatching measures admitted decisions per second with and
// without batching of concurrent calls, beside redis_rate and the PING
// floor, at 1, 8, 64 and 256 goroutines over 10,000 keys and on one hot
// key, on the run's one redis-server. Besides measure's metrics it reports the commands and the
// round trips the client sent per 1,000 decisions (docs/benchmarks.md,
// Redis throughput: batching):
//
//	go test -run '^$' -bench 'Batching$' -benchtime 1s -count 3 | tee batch.txt
//	go run ./batchtable batch.txt
func BenchmarkBatching(b *testing.B) {
	c := requireServer(b)
	if wireOnce.CompareAndSwap(false, true) {
		c.AddHook(wireCount)
	}
	for _, w := range workloads[:2] { // hot, 10k
		b.Run("load="+w.name, func(b *testing.B) {
			for _, g := range []int{1, 8, 64, 256} {
				b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) {
					for _, ct := range batchContenders {
						var inc incFunc // prepared when the sub-benchmark first runs: -bench may skip it
						b.Run("impl="+ct.name, func(b *testing.B) {
							if inc == nil {
								var err error
								if inc, err = prepare(c, ct, w); err != nil {
									b.Fatalf("%s: %v", ct.name, err)
								}
							}
							cmds0, trips0 := wireCount.cmds.Load(), wireCount.trips.Load()
							cmd := "evalsha"
							if ct.name == pingFloor.name {
								cmd = "ping"
							}
							measureCmd(b, c, w, g, inc, cmd)
							k := 1000 / float64(b.N)
							b.ReportMetric(float64(wireCount.cmds.Load()-cmds0)*k, "cmds/1k")
							b.ReportMetric(float64(wireCount.trips.Load()-trips0)*k, "trips/1k")
						})
					}
				})
			}
		})
	}
}

// BenchmarkBatchingLone times a lone caller's Inc with batching
// (WithBatching(128), the default) and without (WithBatching(0)), alternating call by call on the same keys, so that
// the noise of a shared machine falls on both alike: batched-ns/op and
// alone-ns/op are the mean latencies, and batched/alone their ratio.
//
//	go test -run '^$' -bench BatchingLone -benchtime 20000x -count 5
func BenchmarkBatchingLone(b *testing.B) {
	c := requireServer(b)
	for _, w := range workloads[:2] { // hot, 10k
		for _, strat := range []string{"redisabs", "redissup"} {
			b.Run("load="+w.name+"/impl="+strat, func(b *testing.B) {
				var incs [2]incFunc
				for _, ct := range batchContenders {
					j := -1
					switch ct.name {
					case strat:
						j = 0
					case strat + "-alone":
						j = 1
					}
					if j >= 0 {
						inc, err := prepare(c, ct, w)
						if err != nil {
							b.Fatalf("%s: %v", ct.name, err)
						}
						incs[j] = inc
					}
				}
				var ns [2]time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					k := w.keys[i%len(w.keys)]
					for o := 0; o < 2; o++ {
						j := (o + i) % 2 // who goes first alternates
						start := time.Now()
						if ok, err := incs[j](ctx, k); err != nil || !ok {
							b.Fatalf("Inc(%q) = %v, %v", k, ok, err)
						}
						ns[j] += time.Since(start)
					}
				}
				b.ReportMetric(float64(ns[0].Nanoseconds())/float64(b.N), "batched-ns/op")
				b.ReportMetric(float64(ns[1].Nanoseconds())/float64(b.N), "alone-ns/op")
				b.ReportMetric(float64(ns[0])/float64(ns[1]), "batched/alone")
			})
		}
	}
}

// mixRounds is how many slices of every contender one sample of
// BenchmarkBatchingMix runs.
const mixRounds = 10

// BenchmarkBatchingMix is BenchmarkBatching's measure interleaved: per
// workload and goroutine count, one sample runs batched redisabs and
// redissup, both unbatched, and redis_rate in mixRounds rounds, each round
// a slice of b.N/mixRounds decisions per contender in an order that
// rotates round by round, so that a change of the machine's load falls on
// every contender alike (BenchmarkBatching runs them one after the other,
// seconds apart, always in the same order). Each contender has keys of its
// own. Per contender it reports
// ops/s over its slices and its server µs per decision (the EVALSHA
// time of INFO commandstats over its slices); per pair the median over
// the rounds of the ratio of the two slices' ops/s:
//
//	go test -run '^$' -bench 'BatchingMix$' -benchtime 200000x -count 3 | tee mix.txt
//	go run ./batchtable mix.txt
//
// MIX_NAMES=redisabs,redissup (a comma-separated list of contenders, the
// first the one the rounds' ratios divide by) runs only those. A name
// ending in @N is that contender built with N as the batcher's Direct
// (batching starts above N concurrent callers; @0 is the rule before
// Direct existed): redisabs@0 and redissup@0 are reported beside the
// others, with the ratios new ÷ old (abs/old, sup/old). MIX_GS=8,16,32
// runs those goroutine counts instead of 1, 8, 64 and 256.
func BenchmarkBatchingMix(b *testing.B) {
	c := requireServer(b)
	names := []string{"redisabs", "redissup", "redisabs-alone", "redissup-alone", "redis_rate", "redisabs@0", "redissup@0"}
	if v := os.Getenv("MIX_NAMES"); v != "" {
		names = strings.Split(v, ",")
	}
	gs := []int{1, 8, 64, 256}
	if v := os.Getenv("MIX_GS"); v != "" {
		gs = gs[:0]
		for _, f := range strings.Split(v, ",") {
			g, err := strconv.Atoi(f)
			if err != nil || g < 1 {
				b.Fatalf("MIX_GS: %q is not a goroutine count", f)
			}
			gs = append(gs, g)
		}
	}
	for _, w := range workloads[:2] { // hot, 10k
		b.Run("load="+w.name, func(b *testing.B) {
			for _, g := range gs {
				b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) {
					benchMix(b, c, w, g, names)
				})
			}
		})
	}
}

func benchMix(b *testing.B, c *redis.Client, w workload, g int, names []string) {
	if err := c.FlushAll(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	incs := make([]incFunc, len(names))
	keys := make([][]string, len(names))
	for i, name := range names {
		base, direct, withDirect := strings.Cut(name, "@")
		var ct contender
		for _, x := range batchContenders {
			if x.name == base {
				ct = x
			}
		}
		if ct.build == nil {
			b.Fatalf("no contender %q", name)
		}
		saved := redisprov.Direct
		if withDirect {
			n, err := strconv.Atoi(direct)
			if err != nil || n < 0 {
				b.Fatalf("contender %q: %q is not a Direct", name, direct)
			}
			redisprov.Direct = n
		}
		inc, err := ct.build(c, w.policy, nil)
		redisprov.Direct = saved
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		// Keys of its own: contenders of one strategy would otherwise
		// share hashes, and the first of them in a round would open the
		// buckets the second joins.
		ks := make([]string, len(w.keys))
		for j, k := range w.keys {
			ks[j] = strconv.Itoa(i) + ":" + k
		}
		n := max(len(ks), 2000)
		if _, err := parallel(poolSize, n, func(j int) (bool, error) {
			return inc(ctx, ks[j%len(ks)])
		}); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		incs[i], keys[i] = inc, ks
	}
	slice := max(b.N/mixRounds, 1)
	elapsed := make([]time.Duration, len(names))
	usec := make([]float64, len(names))
	calls := make([]int64, len(names))
	ratios := make([][]float64, len(names)) // per round, ops/s ÷ redisabs' in the round
	b.ResetTimer()
	for r := 0; r < mixRounds; r++ {
		ops := make([]float64, len(names))
		for o := range names {
			i := (o + r) % len(names)
			st0, err := commandStat(stats, "evalsha")
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			refused, err := parallel(g, slice, func(j int) (bool, error) {
				return incs[i](ctx, keys[i][(r*slice+j)%len(keys[i])])
			})
			d := time.Since(start)
			if err != nil {
				b.Fatalf("%s: %v", names[i], err)
			}
			if refused > 0 {
				b.Fatalf("%s: %d of %d calls refused; the workload is meant to be admitted", names[i], refused, slice)
			}
			st1, err := commandStat(stats, "evalsha")
			if err != nil {
				b.Fatal(err)
			}
			elapsed[i] += d
			usec[i] += st1.Usec - st0.Usec
			calls[i] += st1.Calls - st0.Calls
			ops[i] = float64(slice) / d.Seconds()
		}
		for i := range names {
			ratios[i] = append(ratios[i], ops[i]/ops[0])
		}
	}
	b.StopTimer()
	for i, name := range names {
		b.ReportMetric(float64(slice*mixRounds)/elapsed[i].Seconds(), name+"-ops/s")
		if calls[i] > 0 {
			b.ReportMetric(usec[i]/float64(calls[i]), name+"-server-µs/op")
		}
	}
	ratio := func(num, den, unit string) {
		i, j := slices.Index(names, num), slices.Index(names, den)
		if i < 0 || j < 0 {
			return
		}
		rs := make([]float64, mixRounds)
		for r := range rs {
			rs[r] = ratios[i][r] / ratios[j][r]
		}
		slices.Sort(rs)
		b.ReportMetric((rs[(mixRounds-1)/2]+rs[mixRounds/2])/2, unit)
	}
	ratio("redissup", "redisabs", "sup/abs")
	ratio("redisabs", "redis_rate", "abs/rate")
	ratio("redisabs", "redisabs-alone", "abs/alone")
	ratio("redissup", "redissup-alone", "sup/alone")
	ratio("redisabs", "redisabs@0", "abs/old")
	ratio("redissup", "redissup@0", "sup/old")
	ratio("redisabs@0", "redisabs-alone", "absold/alone")
	ratio("redissup@0", "redissup-alone", "supold/alone")
}
