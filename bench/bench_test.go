package bench

import (
	"fmt"
	"testing"
)

// BenchmarkInc measures one admitted decision per call, for each contender,
// workload and number of goroutines, on the run's one redis-server:
//
//	go test -run '^$' -bench Inc -benchmem -count 3 | tee inc.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /impl inc.txt
//
// -count repeats a contender back to back; TestCompare interleaves them,
// which is what docs/benchmarks.md reports.
func BenchmarkInc(b *testing.B) {
	c := requireServer(b)
	for _, w := range workloads {
		b.Run("load="+w.name, func(b *testing.B) {
			for _, g := range w.goroutines {
				b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) {
					for _, ct := range contenders {
						inc, err := prepare(c, ct, w)
						if err != nil {
							b.Fatalf("%s: %v", ct.name, err)
						}
						b.Run("impl="+ct.name, func(b *testing.B) { measure(b, c, w, g, inc) })
					}
				})
			}
		})
	}
}

// BenchmarkMemory reports bytes per active key of 10,000 keys at 10 per
// minute, 5 requests each: the INFO memory used_memory delta less the
// connections' buffers (bytes/key; see memoryPerKey), the raw used_memory
// delta and the mean MEMORY USAGE of a key. One
// iteration fills the 10,000 keys; ns/op is that time and means nothing
// else.
//
//	go test -run '^$' -bench Memory -count 3
func BenchmarkMemory(b *testing.B) {
	c := requireServer(b)
	for _, buckets := range []int{1, 5} {
		b.Run(fmt.Sprintf("buckets=%d", buckets), func(b *testing.B) {
			for _, ct := range contenders {
				b.Run("impl="+ct.name, func(b *testing.B) {
					var sum memSample
					for i := 0; i < b.N; i++ {
						m, err := memoryPerKey(c, ct, buckets)
						if err != nil {
							b.Fatal(err)
						}
						sum.PerKey += m.PerKey
						sum.Used += m.Used
						sum.Usage += m.Usage
					}
					n := float64(b.N)
					b.ReportMetric(sum.PerKey/n, "bytes/key")
					b.ReportMetric(sum.Used/n, "used-bytes/key")
					b.ReportMetric(sum.Usage/n, "usage-bytes/key")
				})
			}
		})
	}
}
