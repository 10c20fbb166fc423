package bench

import (
	"context"
	"flag"
	"fmt"
	"github.com/sluice-go/sluice/bench/internal/stat"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

var (
	hybridRounds = flag.Int("hybrid.rounds", 0, "TestHybridWindows: interleaved rounds; 0 skips it")
	hybridRowRE  = flag.String("hybrid.rows", "", "TestHybridWindows: a regexp the rows run must match (W=1s/load=10k, ...)")
	hybridCtRE   = flag.String("hybrid.contenders", "", "TestHybridWindows: a regexp the contenders run must match (hybrid-sup, redisabs-batched, ...)")
	hybridPerKey = flag.Int("hybrid.perkey", 0, "TestHybridWindows: decisions per key of each contender's timed run on the rows of many keys (0: -benchtime decides)")
)

// A hybridRow is one row of TestHybridWindows: a window W (B = W/100, the
// default) and a key set, 10,000 keys at 1,000 per W each or one hot key at
// 10^6 per second.
type hybridRow struct {
	window time.Duration
	w      workload
}

func (r hybridRow) name() string { return fmt.Sprintf("W=%v/load=%s", r.window, r.w.name) }

func hybridRows() []hybridRow {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	var rows []hybridRow
	for _, win := range []time.Duration{time.Minute, time.Second} {
		ms := int(win / time.Millisecond)
		rows = append(rows,
			hybridRow{win, workload{name: "10k", keys: keys,
				policy: policy{limiter.Every(1000, win), redis_rate.Limit{Rate: 1000, Burst: 1000, Period: win}}}},
			hybridRow{win, workload{name: "hot", keys: []string{"hot"},
				policy: policy{limiter.PerSecond(1e6), redis_rate.Limit{Rate: 1000 * ms, Burst: 1000 * ms, Period: win}}}},
		)
	}
	return rows
}

// hybridWindowContenders are the contenders of TestHybridWindows.
var hybridWindowContenders = []string{"hybrid", "hybrid-sup", "redisabs-batched", "redissup-batched", "redis_rate"}

// buildWindowContender returns the call of one contender at window win
// (B = W/100) and what closes it. Every sluice contender gets WithTimeout(5
// s), the shared client's bound, so that a loaded machine does not send it
// to the failure policy; redisabs and redissup are batched, their default.
func buildWindowContender(c *redis.Client, name string, win time.Duration, p policy) (incFunc, func(), error) {
	opts := []limiter.Option{limiter.WithTimeout(5 * time.Second), limiter.WithWindow(win)}
	var l limiter.Limiter
	var err error
	switch name {
	case "hybrid":
		l, err = hybrid.NewAbsolute(c, opts...)
	case "hybrid-sup":
		l, err = hybrid.NewSuppressed(c, append(opts, limiter.WithHardLimitFactor(hardLimitFactor))...)
	case "redisabs-batched":
		l, err = redisabs.New(c, opts...)
	case "redissup-batched":
		l, err = redissup.New(c, append(opts, limiter.WithHardLimitFactor(hardLimitFactor))...)
	case "redis_rate":
		rl := redis_rate.NewLimiter(c)
		return func(ctx context.Context, k string) (bool, error) {
			r, err := rl.Allow(ctx, k, p.limit)
			if err != nil {
				return false, err
			}
			return r.Allowed == 1, nil
		}, func() {}, nil
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

// TestHybridWindows is the driver behind docs/benchmarks.md, Hybrid,
// both strategies and both windows: each round runs every
// contender once on every row (W = 1 min and 1 s, 10,000 keys and one hot
// key, 64 goroutines), in an order rotated from round to round, on the
// run's one redis-server, after an empty Redis and a warm-up that touches
// every key once. It prints benchmark lines (ops/s, Redis script calls and
// commands per 1,000 decisions, %refused, and Redis keys per limiter key
// after the run) and, at the end, medians over the rounds and the ratios
// issue targets name:
//
//	go test -run TestHybridWindows -hybrid.rounds 3 -benchtime 3s -timeout 60m -v | tee windows.txt
//
// -hybrid.rows and -hybrid.contenders (regexps) run some of them;
// -hybrid.perkey N gives every contender N decisions per key on the rows of
// many keys (the same traffic per key, see benchmarkRow) instead of a run
// sized by -benchtime.
func TestHybridWindows(t *testing.T) {
	if *hybridRounds <= 0 {
		t.Skip("run with -hybrid.rounds N")
	}
	c := requireServer(t)
	const g = 64
	procs := runtime.GOMAXPROCS(0)
	ops := map[string][]float64{}
	rowRE, err := regexp.Compile(*hybridRowRE)
	if err != nil {
		t.Fatal(err)
	}
	ctRE, err := regexp.Compile(*hybridCtRE)
	if err != nil {
		t.Fatal(err)
	}
	var cts []string
	for _, ct := range hybridWindowContenders {
		if ctRE.MatchString(ct) {
			cts = append(cts, ct)
		}
	}
	var rows []hybridRow
	for _, row := range hybridRows() {
		if rowRE.MatchString(row.name()) {
			rows = append(rows, row)
		}
	}
	for r := 0; r < *hybridRounds; r++ {
		for _, row := range rows {
			for i := range cts {
				ct := cts[(i+r)%len(cts)]
				name := "HybridWindows/" + row.name() + "/impl=" + ct
				if err := c.FlushAll(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				inc, closeFn, err := buildWindowContender(c, ct, row.window, row.w.policy)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := parallel(poolSize, max(len(row.w.keys), 2000), func(i int) (bool, error) {
					return inc(ctx, row.w.keys[i%len(row.w.keys)])
				}); err != nil {
					t.Fatalf("%s: warm-up: %v", name, err)
				}
				res, err := benchmarkRow(row, func(b *testing.B) { measureDecisions(b, row.w, g, inc) })
				if err != nil {
					t.Fatal(err)
				}
				closeFn()
				if res.N == 0 {
					t.Fatalf("%s: the benchmark failed", name)
				}
				keys, err := c.DBSize(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				perKey := float64(keys) / float64(len(row.w.keys))
				fmt.Printf("Benchmark%s-%d\t%s\t%.3f rkeys/key\t%s\n", name, procs, res.String(), perKey, res.MemString())
				ops[name] = append(ops[name], res.Extra["ops/s"])
			}
		}
	}
	fmt.Printf("\n| row | hybrid ops/s | hybrid-sup ops/s | redisabs batched ops/s | redissup batched ops/s | redis_rate ops/s | sup/abs | sup/redisabs |\n")
	fmt.Printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, row := range rows {
		m := func(ct string) []float64 { return ops["HybridWindows/"+row.name()+"/impl="+ct] }
		abs, sup, ra, rs, rr := m("hybrid"), m("hybrid-sup"), m("redisabs-batched"), m("redissup-batched"), m("redis_rate")
		sa, sr := ratios(sup, abs), ratios(sup, ra)
		fmt.Printf("| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f (%s) | %.2f (%s) |\n", row.name(),
			stat.Median(abs), stat.Median(sup), stat.Median(ra), stat.Median(rs), stat.Median(rr), stat.Median(sa), spread(sa), stat.Median(sr), spread(sr))
	}
}

// benchmarkRow runs f as testing.Benchmark does, with -hybrid.perkey
// decisions per key on a row of many keys (the timed run's N set through
// -test.benchtime for the call). A run sized by time alone makes a fast
// contender make more decisions per key than a slow one: at W = 1 min the
// hybrids, at a million decisions a second, took their keys past the soft
// capacity when testing.Benchmark's estimate of N came from a faster
// earlier run (a 3 s run that lasted 71 s, 1,283 decisions per key), and
// were then measured on another regime than their rivals.
func benchmarkRow(row hybridRow, f func(b *testing.B)) (testing.BenchmarkResult, error) {
	if *hybridPerKey <= 0 || len(row.w.keys) < 2 {
		return testing.Benchmark(f), nil
	}
	bt := flag.Lookup("test.benchtime")
	old := bt.Value.String()
	if err := bt.Value.Set(fmt.Sprintf("%dx", *hybridPerKey*len(row.w.keys))); err != nil {
		return testing.BenchmarkResult{}, err
	}
	defer bt.Value.Set(old)
	return testing.Benchmark(f), nil
}
