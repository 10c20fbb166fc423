// Command batchtable turns the output of BenchmarkBatching,
// BenchmarkBatchingMix and BenchmarkBatchingLone into the tables of
// docs/benchmarks.md (Redis throughput: batching): per workload and
// goroutine count, the median ops/s of every contender, the ratios the
// targets are stated in, and whether each target is met in that row.
//
//	go test -run '^$' -bench 'BatchingMix$' -benchtime 200000x -count 3 | tee testdata/batching-mix-5.txt
//	go test -run '^$' -bench BatchingLone -benchtime 20000x -count 5 | tee testdata/batching-lone-5.txt
//	go run ./batchtable testdata/batching-mix-5.txt testdata/batching-lone-5.txt
//
// The ratios of a BenchmarkBatchingMix row are the medians, over the
// samples, of each sample's median over its rounds (the contenders take
// turns round by round); the range is the samples'.
//
// Targets: batched redisabs ≥ 1.5 × redis_rate's ops/s at 64 and 256
// goroutines; batched redissup ≥ 0.9 × batched redisabs everywhere; a lone
// caller's latency batched within 5 % of unbatched.
package main

import (
	"bufio"
	"fmt"
	"github.com/sluice-go/sluice/bench/internal/stat"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var (
	batchRe = regexp.MustCompile(`^BenchmarkBatching/load=(\w+)/g=(\d+)/impl=([\w-]+?)(?:-\d+)?\s`)
	mixRe   = regexp.MustCompile(`^BenchmarkBatchingMix/load=(\w+)/g=(\d+)(?:-\d+)?\s`)
	loneRe  = regexp.MustCompile(`^BenchmarkBatchingLone/load=(\w+)/impl=([\w-]+?)(?:-\d+)?\s`)
)

// metric returns the value before unit on a benchmark line.
func metric(line, unit string) (float64, bool) {
	f := strings.Fields(line)
	for i := 1; i < len(f); i++ {
		if f[i] == unit {
			v, err := strconv.ParseFloat(f[i-1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

type key struct {
	load string
	g    int
	impl string
}

func main() {
	samples := map[key]map[string][]float64{} // metric unit → samples
	mix := map[key]map[string][]float64{}     // BenchmarkBatchingMix: impl ""
	var mixLoads []string
	mixGs := map[int]bool{}
	lone := map[[2]string][]float64{}
	var loads []string
	gs := map[int]bool{}
	for _, path := range os.Args[1:] {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if m := batchRe.FindStringSubmatch(line); m != nil {
				g, _ := strconv.Atoi(m[2])
				k := key{m[1], g, m[3]}
				if samples[k] == nil {
					samples[k] = map[string][]float64{}
				}
				for _, u := range []string{"ops/s", "server-µs/op", "trips/1k"} {
					if v, ok := metric(line, u); ok {
						samples[k][u] = append(samples[k][u], v)
					}
				}
				if !contains(loads, m[1]) {
					loads = append(loads, m[1])
				}
				gs[g] = true
			} else if m := mixRe.FindStringSubmatch(line); m != nil {
				g, _ := strconv.Atoi(m[2])
				k := key{m[1], g, ""}
				if mix[k] == nil {
					mix[k] = map[string][]float64{}
				}
				f := strings.Fields(line)
				for i := 1; i < len(f); i++ {
					if v, err := strconv.ParseFloat(f[i-1], 64); err == nil && strings.ContainsAny(f[i], "/") {
						mix[k][f[i]] = append(mix[k][f[i]], v)
					}
				}
				if !contains(mixLoads, m[1]) {
					mixLoads = append(mixLoads, m[1])
				}
				mixGs[g] = true
			} else if m := loneRe.FindStringSubmatch(line); m != nil {
				if v, ok := metric(line, "batched/alone"); ok {
					lone[[2]string{m[1], m[2]}] = append(lone[[2]string{m[1], m[2]}], v)
				}
			}
		}
		f.Close()
	}
	var gl []int
	for g := range gs {
		gl = append(gl, g)
	}
	sort.Ints(gl)
	med := func(load string, g int, impl, unit string) float64 {
		return stat.Median(samples[key{load, g, impl}][unit])
	}
	mark := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	for _, load := range loads {
		fmt.Printf("**%s**\n\n", load)
		fmt.Println("| goroutines | ops/s: abs · abs alone · sup · sup alone · redis_rate · PING | abs ÷ redis_rate | abs ÷ abs alone | sup ÷ abs | targets met | server µs per decision: abs · sup · redis_rate | round trips per 1,000: abs · sup |")
		fmt.Println("| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
		for _, g := range gl {
			o := func(impl string) float64 { return med(load, g, impl, "ops/s") }
			abs, rr, sup := o("redisabs"), o("redis_rate"), o("redissup")
			targets := "sup ≥ 0.9 abs: " + mark(sup >= 0.9*abs)
			if g >= 64 {
				targets = "abs ≥ 1.5 rate: " + mark(abs >= 1.5*rr) + "; " + targets
			}
			s := func(impl string) float64 { return med(load, g, impl, "server-µs/op") }
			t := func(impl string) float64 { return med(load, g, impl, "trips/1k") }
			fmt.Printf("| %d | %s · %s · %s · %s · %s · %s | %.2f | %.2f | %.2f | %s | %.2f · %.2f · %.2f | %.0f · %.0f |\n",
				g, thousands(abs), thousands(o("redisabs-alone")), thousands(sup), thousands(o("redissup-alone")), thousands(rr), thousands(o("ping")),
				abs/rr, abs/o("redisabs-alone"), sup/abs, targets,
				s("redisabs"), s("redissup"), s("redis_rate"), t("redisabs"), t("redissup"))
		}
		fmt.Println()
	}
	printMix(mix, mixLoads, mixGs, mark)
	if len(lone) > 0 {
		fmt.Println("| lone caller | batched ÷ unbatched latency, median (range) | within 5 % |")
		fmt.Println("| --- | ---: | --- |")
		var ks [][2]string
		for k := range lone {
			ks = append(ks, k)
		}
		sort.Slice(ks, func(i, j int) bool { return ks[i][0]+ks[i][1] < ks[j][0]+ks[j][1] })
		for _, k := range ks {
			v := append([]float64(nil), lone[k]...)
			sort.Float64s(v)
			m := stat.Median(v)
			fmt.Printf("| %s, %s | %.2f (%.2f–%.2f) | %s |\n", k[0], k[1], m, v[0], v[len(v)-1], mark(m <= 1.05))
		}
	}
}

// printMix prints the tables of BenchmarkBatchingMix.
func printMix(mix map[key]map[string][]float64, loads []string, gs map[int]bool, mark func(bool) string) {
	var gl []int
	for g := range gs {
		gl = append(gl, g)
	}
	sort.Ints(gl)
	withOld := false
	for _, ms := range mix {
		if len(ms["abs/old"]) > 0 {
			withOld = true
		}
	}
	for _, load := range loads {
		fmt.Printf("**%s**, interleaved\n\n", load)
		fmt.Println("| goroutines | ops/s: abs · sup · abs alone · sup alone · redis_rate | sup ÷ abs | abs ÷ redis_rate | abs ÷ abs alone | sup ÷ sup alone | server µs per decision: abs · sup · redis_rate | targets met |")
		fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
		for _, g := range gl {
			ms := mix[key{load, g, ""}]
			if ms == nil {
				continue
			}
			m := func(unit string) float64 { return stat.Median(ms[unit]) }
			sa, sr := m("sup/abs"), m("abs/rate")
			us := func(impl string) float64 { return m(impl + "-server-µs/op") }
			ua, up, ur := us("redisabs"), us("redissup"), us("redis_rate")
			targets := "sup ≥ 0.9 abs: " + mark(sa >= 0.9)
			if g >= 64 {
				targets = "abs ≥ 1.5 rate: " + mark(sr >= 1.5) + "; " + targets
			}
			targets += "; server µs ≤ rate: abs " + mark(ua <= ur) + ", sup " + mark(up <= ur)
			if len(ms["abs/alone"]) > 0 && len(ms["sup/alone"]) > 0 {
				targets += "; never loses (≥ 0.97 alone): " + mark(m("abs/alone") >= 0.97 && m("sup/alone") >= 0.97)
			}
			o := func(impl string) string { return thousands(m(impl + "-ops/s")) }
			fmt.Printf("| %d | %s · %s · %s · %s · %s | %s | %s | %s | %s | %.2f · %.2f · %.2f | %s |\n",
				g, o("redisabs"), o("redissup"), o("redisabs-alone"), o("redissup-alone"), o("redis_rate"),
				spread(ms["sup/abs"]), spread(ms["abs/rate"]), spread(ms["abs/alone"]), spread(ms["sup/alone"]), ua, up, ur, targets)
		}
		fmt.Println()
		if !withOld {
			continue
		}
		fmt.Printf("**%s**, the rule before Direct (batching from the third concurrent caller) in the same run\n\n", load)
		fmt.Println("| goroutines | ops/s: abs old · sup old | abs ÷ abs old | sup ÷ sup old | abs old ÷ abs alone | sup old ÷ sup alone |")
		fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: |")
		for _, g := range gl {
			ms := mix[key{load, g, ""}]
			if ms == nil {
				continue
			}
			o := func(impl string) string { return thousands(stat.Median(ms[impl+"-ops/s"])) }
			fmt.Printf("| %d | %s · %s | %s | %s | %s | %s |\n", g, o("redisabs@0"), o("redissup@0"),
				spread(ms["abs/old"]), spread(ms["sup/old"]), spread(ms["absold/alone"]), spread(ms["supold/alone"]))
		}
		fmt.Println()
	}
}

// spread formats the median of v and its range: 1.23 (1.10–1.30).
func spread(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	return fmt.Sprintf("%.2f (%.2f–%.2f)", stat.Median(v), v[0], v[len(v)-1])
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// thousands formats v rounded with commas: 12,345.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
