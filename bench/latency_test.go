package bench

import (
	"flag"
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

var (
	latencyRounds = flag.Int("latency.rounds", 0, "TestLatency: interleaved rounds to run; 0 skips it")
	latencyCalls  = flag.Int("latency.calls", 20000, "TestLatency: timed calls per contender, goroutine count and round")
)

// latencyPercentiles are the percentiles TestLatency reports, by unit.
var latencyPercentiles = []struct {
	unit string
	q    float64
}{{"p50-µs", 0.50}, {"p90-µs", 0.90}, {"p99-µs", 0.99}, {"p99.9-µs", 0.999}}

// TestLatency times every call of the contenders of TestCompare (redisabs
// and redissup unbatched, redis_rate) on the 10k workload at 1, 8 and 64
// goroutines and prints the percentiles of the calls' durations as
// benchmark lines, one per round, contenders rotated from round to round
// so that the machine's noise falls on each alike. bench/plots draws them
// (docs/benchmarks.md):
//
//	go test -run TestLatency -latency.rounds 3 -v | tee testdata/latency.txt
func TestLatency(t *testing.T) {
	if *latencyRounds <= 0 {
		t.Skip("run with -latency.rounds N")
	}
	c := requireServer(t)
	printHeader(t, *latencyRounds)
	procs := runtime.GOMAXPROCS(0)
	var w workload
	for _, x := range workloads {
		if x.name == "10k" {
			w = x
		}
	}
	for r := 0; r < *latencyRounds; r++ {
		for _, g := range []int{1, 8, 64} {
			for _, ct := range rotate(latencyContenders, r) {
				inc, err := prepare(c, ct, w)
				if err != nil {
					t.Fatalf("%s: %v", ct.name, err)
				}
				d, refused, err := timeCalls(g, *latencyCalls, func(i int) (bool, error) {
					return inc(ctx, w.keys[i%len(w.keys)])
				})
				if err != nil || refused > 0 {
					t.Fatalf("%s, %d goroutines: %d refused, %v; the workload is meant to be admitted", ct.name, g, refused, err)
				}
				fmt.Printf("BenchmarkLatency/load=%s/g=%d/impl=%s-%d\t%d", w.name, g, ct.name, procs, len(d))
				for _, p := range latencyPercentiles {
					fmt.Printf("\t%.1f %s", percentile(d, p.q), p.unit)
				}
				fmt.Println()
			}
		}
	}
}

// latencyContenders are TestCompare's, each call bounded by 5 s instead of
// the default 250 ms, so that a loaded machine does not send calls to the
// failure policy: a degraded decision fails the test.
var latencyContenders = func() []contender {
	bounded := []limiter.Option{limiter.WithBatching(0), limiter.WithTimeout(5 * time.Second)}
	cs := []contender{sluiceContender("redisabs", false, bounded...), sluiceContender("redissup", true, bounded...)}
	for _, ct := range contenders {
		if ct.name == "redis_rate" {
			cs = append(cs, ct)
		}
	}
	return cs
}()

// timeCalls makes n calls f(i) from g goroutines (parallel) and returns
// each call's duration, sorted, and how many were refused.
func timeCalls(g, n int, f func(i int) (bool, error)) ([]time.Duration, int64, error) {
	d := make([]time.Duration, n)
	refused, err := parallel(g, n, func(i int) (bool, error) {
		start := time.Now()
		ok, err := f(i)
		d[i] = time.Since(start)
		return ok, err
	})
	if err != nil {
		return nil, 0, err
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d, refused, nil
}

// percentile returns the q-quantile of the sorted durations in µs (the
// nearest rank).
func percentile(d []time.Duration, q float64) float64 {
	i := int(q*float64(len(d))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(d) {
		i = len(d) - 1
	}
	return float64(d[i]) / float64(time.Microsecond)
}

func TestPercentile(t *testing.T) {
	d := make([]time.Duration, 1000)
	for i := range d {
		d[i] = time.Duration(i+1) * time.Microsecond
	}
	for q, want := range map[float64]float64{0.5: 500, 0.9: 900, 0.99: 990, 0.999: 999, 0: 1, 1: 1000} {
		if got := percentile(d, q); got != want {
			t.Errorf("percentile(1..1000 µs, %v) = %v, want %v", q, got, want)
		}
	}
}
