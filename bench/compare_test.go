package bench

import (
	"flag"
	"fmt"
	"github.com/sluice-go/sluice/bench/internal/stat"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
)

var rounds = flag.Int("rounds", 0, "TestCompare: interleaved rounds to run; 0 skips it")

// TestCompare is the driver behind docs/benchmarks.md. Each round runs
// every contender once per workload and parallelism, in an order rotated
// from round to round, then measures memory per key the same way, so the
// noise of a shared machine falls on every contender alike. It prints
// benchmark lines (benchstat reads them) and, at the end, medians over the
// rounds, the per-round ratios and the targets:
//
//	go test -run TestCompare -rounds 9 -timeout 90m -v | tee compare.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /impl compare.txt
func TestCompare(t *testing.T) {
	if *rounds <= 0 {
		t.Skip("run with -rounds N")
	}
	c := requireServer(t)
	printHeader(t, *rounds)
	procs := runtime.GOMAXPROCS(0)
	incs := map[string][]testing.BenchmarkResult{}
	mems := map[string][]memSample{}
	for r := 0; r < *rounds; r++ {
		for _, w := range workloads {
			for _, g := range w.goroutines {
				for _, ct := range rotate(contenders, r) {
					name := incName(w.name, g, ct.name)
					inc, err := prepare(c, ct, w)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					res := testing.Benchmark(func(b *testing.B) { measure(b, c, w, g, inc) })
					if res.N == 0 {
						t.Fatalf("%s: the benchmark failed", name)
					}
					fmt.Printf("Benchmark%s-%d\t%s\t%s\n", name, procs, res.String(), res.MemString())
					incs[name] = append(incs[name], res)
				}
			}
		}
		for _, k := range luaCalls {
			name := luaName(k)
			w, inc, err := prepareLuaCost(c, luaCostScript(k))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			res := testing.Benchmark(func(b *testing.B) { measure(b, c, w, luaCostGoroutines, inc) })
			if res.N == 0 {
				t.Fatalf("%s: the benchmark failed", name)
			}
			fmt.Printf("Benchmark%s-%d\t%s\t%s\n", name, procs, res.String(), res.MemString())
			incs[name] = append(incs[name], res)
		}
		for _, buckets := range []int{1, 5} {
			for _, ct := range rotate(contenders, r) {
				name := memName(buckets, ct.name)
				m, err := memoryPerKey(c, ct, buckets)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				fmt.Printf("Benchmark%s-%d\t1\t%.1f bytes/key\t%.1f used-bytes/key\t%.1f usage-bytes/key\n",
					name, procs, m.PerKey, m.Used, m.Usage)
				mems[name] = append(mems[name], m)
			}
		}
	}
	printSummary(incs, mems)
}

func incName(w string, g int, ct string) string {
	return fmt.Sprintf("Inc/load=%s/g=%d/impl=%s", w, g, ct)
}
func memName(buckets int, ct string) string {
	return fmt.Sprintf("Memory/buckets=%d/impl=%s", buckets, ct)
}
func luaName(k int) string { return fmt.Sprintf("LuaCost/calls=%d", k) }

// rotate returns cs starting at its r-th element (mod len).
func rotate(cs []contender, r int) []contender {
	r %= len(cs)
	return append(append([]contender(nil), cs[r:]...), cs[:r]...)
}

// printHeader prints the configuration lines benchstat reads, and the rounds.
func printHeader(t *testing.T, rounds int) {
	t.Helper()
	v, err := info(stats, "server", "redis_version")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("goos: %s\ngoarch: %s\npkg: github.com/sluice-go/sluice/bench\n", runtime.GOOS, runtime.GOARCH)
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				fmt.Printf("cpu: %s\n", strings.TrimSpace(v))
				break
			}
		}
	}
	fmt.Printf("go: %s\nredis: %s\nrounds: %d\n", runtime.Version(), v, rounds)
}

// metric returns metric unit of each result ("ns/op" is the built-in one).
func metric(rs []testing.BenchmarkResult, unit string) []float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		if unit == "ns/op" {
			xs[i] = float64(r.T.Nanoseconds()) / float64(r.N)
		} else {
			xs[i] = r.Extra[unit]
		}
	}
	return xs
}

// ratios returns a[i]/b[i]: the same round's results, side by side.
func ratios(a, b []float64) []float64 {
	n := min(len(a), len(b))
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = a[i] / b[i]
	}
	return xs
}

func spread(xs []float64) string {
	if len(xs) == 0 {
		return ""
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return fmt.Sprintf("%.2f–%.2f", s[0], s[len(s)-1])
}

// printSummary prints Markdown tables of medians over the rounds and the
// targets of issues 3 and 4.
func printSummary(incs map[string][]testing.BenchmarkResult, mems map[string][]memSample) {
	fmt.Printf("\n| workload | goroutines | redisabs ops/s | redissup ops/s | redis_rate ops/s | abs/rate (per round) | sup/abs (per round) |\n")
	fmt.Printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, w := range workloads {
		for _, g := range w.goroutines {
			abs := metric(incs[incName(w.name, g, "redisabs")], "ops/s")
			sup := metric(incs[incName(w.name, g, "redissup")], "ops/s")
			rr := metric(incs[incName(w.name, g, "redis_rate")], "ops/s")
			ar, sa := ratios(abs, rr), ratios(sup, abs)
			fmt.Printf("| %s | %d | %.0f | %.0f | %.0f | %.2f (%s) | %.2f (%s) |\n", w.name, g,
				stat.Median(abs), stat.Median(sup), stat.Median(rr), stat.Median(ar), spread(ar), stat.Median(sa), spread(sa))
		}
	}
	fmt.Printf("\n| workload | goroutines | server µs/call abs · sup · rate | server CPU µs/call abs · sup · rate | client CPU µs/call abs · sup · rate | client allocs/op abs · sup · rate | client B/op abs · sup · rate |\n")
	fmt.Printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, w := range workloads {
		for _, g := range w.goroutines {
			var srv, cpu, self, allocs, bytes []string
			for _, ct := range contenders {
				rs := incs[incName(w.name, g, ct.name)]
				srv = append(srv, fmt.Sprintf("%.2f", stat.Median(metric(rs, "server-µs/op"))))
				cpu = append(cpu, fmt.Sprintf("%.1f", stat.Median(metric(rs, "server-cpu-µs/op"))))
				self = append(self, fmt.Sprintf("%.1f", stat.Median(metric(rs, "client-cpu-µs/op"))))
				var a, m []float64
				for _, r := range rs {
					a = append(a, float64(r.AllocsPerOp()))
					m = append(m, float64(r.AllocedBytesPerOp()))
				}
				allocs = append(allocs, fmt.Sprintf("%.0f", stat.Median(a)))
				bytes = append(bytes, fmt.Sprintf("%.0f", stat.Median(m)))
			}
			fmt.Printf("| %s | %d | %s | %s | %s | %s | %s |\n", w.name, g,
				strings.Join(srv, " · "), strings.Join(cpu, " · "), strings.Join(self, " · "),
				strings.Join(allocs, " · "), strings.Join(bytes, " · "))
		}
	}
	fmt.Printf("\n| script of k HINCRBYs, %d goroutines | server µs/call | server CPU µs/call | client CPU µs/call |\n", luaCostGoroutines)
	fmt.Printf("| --- | ---: | ---: | ---: |\n")
	for _, k := range luaCalls {
		rs := incs[luaName(k)]
		fmt.Printf("| k = %d | %.2f | %.1f | %.1f |\n", k, stat.Median(metric(rs, "server-µs/op")),
			stat.Median(metric(rs, "server-cpu-µs/op")), stat.Median(metric(rs, "client-cpu-µs/op")))
	}

	fmt.Printf("\n| memory, 10,000 keys at 10/min, 5 requests each | redisabs | redissup | redis_rate |\n")
	fmt.Printf("| --- | ---: | ---: | ---: |\n")
	for _, buckets := range []int{1, 5} {
		for _, row := range []struct {
			what string
			get  func(memSample) float64
		}{
			{"used_memory − mem_clients_normal, delta per key", func(m memSample) float64 { return m.PerKey }},
			{"raw used_memory delta per key", func(m memSample) float64 { return m.Used }},
			{"MEMORY USAGE of a key", func(m memSample) float64 { return m.Usage }},
		} {
			var cells []string
			for _, ct := range contenders {
				var xs []float64
				for _, m := range mems[memName(buckets, ct.name)] {
					xs = append(xs, row.get(m))
				}
				cells = append(cells, fmt.Sprintf("%.0f (%s)", stat.Median(xs), spread0(xs)))
			}
			fmt.Printf("| %d bucket(s), %s | %s |\n", buckets, row.what, strings.Join(cells, " | "))
		}
	}

	// Targets.
	const w, g = "10k", 64
	abs := incs[incName(w, g, "redisabs")]
	sup := incs[incName(w, g, "redissup")]
	rr := incs[incName(w, g, "redis_rate")]
	ar := stat.Median(ratios(metric(abs, "ops/s"), metric(rr, "ops/s")))
	sa := stat.Median(ratios(metric(sup, "ops/s"), metric(abs, "ops/s")))
	absUs, rrUs := stat.Median(metric(abs, "server-µs/op")), stat.Median(metric(rr, "server-µs/op"))
	var worstMem float64
	for _, buckets := range []int{1, 5} {
		var p []float64
		for _, m := range mems[memName(buckets, "redisabs")] {
			p = append(p, m.PerKey)
		}
		worstMem = max(worstMem, stat.Median(p))
	}
	fmt.Printf("\n| target (%s, %d goroutines) | measured | result |\n| --- | ---: | --- |\n", w, g)
	fmt.Printf("| redisabs ops/s ≥ 1.0 × redis_rate | %.2f × | %s |\n", ar, passFail(ar >= 1.0))
	fmt.Printf("| redisabs server µs per Inc ≤ redis_rate's | %.2f vs %.2f µs | %s |\n", absUs, rrUs, passFail(absUs <= rrUs))
	fmt.Printf("| redisabs ≤ 350 bytes per active key (worse of 1 and 5 buckets) | %.0f B | %s |\n", worstMem, passFail(worstMem <= 350))
	fmt.Printf("| redissup ops/s ≥ 0.9 × redisabs | %.2f × | %s |\n", sa, passFail(sa >= 0.9))
}

// spread0 is spread for figures printed without decimals.
func spread0(xs []float64) string {
	if len(xs) == 0 {
		return ""
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return fmt.Sprintf("%.0f–%.0f", s[0], s[len(s)-1])
}

func passFail(ok bool) string {
	if ok {
		return "pass"
	}
	return "MISS"
}
