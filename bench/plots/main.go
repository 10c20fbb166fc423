// Command plots draws the figures of docs/benchmarks.md as SVG from the
// committed output of the benchmarks (go test's benchmark lines), so the
// pictures can be made again from the raw figures they show. Run in the
// bench module with -o naming the repository's docs/img (the command is
// in docs/benchmarks.md, Regenerating the plots):
//
//	go run ./plots -o DIR testdata/compare-5rounds-quiet.txt testdata/batching-mix-5.txt testdata/latency-3rounds.txt
//
// From BenchmarkInc (TestCompare: redisabs, redissup and redis_rate, one
// call per decision) it draws, per workload, decisions per second by
// goroutines (compare-LOAD-ops.svg) and the mean time a call takes,
// ns/op × goroutines (compare-LOAD-latency.svg); from BenchmarkLatency
// (TestLatency) the percentiles of a call's time (latency-LOAD-gG.svg);
// from BenchmarkMemory the
// bytes per active Redis key (memory.svg); from BenchmarkBatchingMix
// (both strategies batched and alone beside redis_rate) decisions per
// second by goroutines (batching-LOAD-ops.svg). Each point is the median
// of the samples of its row. The SVG is written by hand: the bench module
// takes no plotting dependency.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"github.com/sluice-go/sluice/bench/internal/stat"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// A sample is one benchmark line: its name's key=value parts and its
// metrics by unit.
type sample struct {
	bench   string            // "BenchmarkInc"
	params  map[string]string // "load" → "hot", "g" → "64", "impl" → "redisabs"
	metrics map[string]float64
}

var procSuffix = regexp.MustCompile(`-\d+$`)

// parse reads the benchmark lines of r; other lines are skipped.
func parse(r io.Reader) ([]sample, error) {
	var out []sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // not a result line
		}
		parts := strings.Split(procSuffix.ReplaceAllString(f[0], ""), "/")
		s := sample{bench: parts[0], params: map[string]string{}, metrics: map[string]float64{}}
		for _, p := range parts[1:] {
			if k, v, ok := strings.Cut(p, "="); ok {
				s.params[k] = v
			}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: metric %q: %v", f[0], f[i], err)
			}
			s.metrics[f[i+1]] = v
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// A series is one contender's points, x a category (goroutines, buckets).
type series struct {
	name   string
	points map[string][]float64 // x → samples
}

// chart is what one SVG shows.
type chart struct {
	title, xlabel, ylabel string
	bars                  bool // grouped bars instead of lines
	logY                  bool // a logarithmic y axis, a tick per power of ten
	xs                    []string
	series                []*series
}

// collect gathers the samples of bench into charts keyed by load: x is the
// param xparam, the series the param "impl" (value of metric unit), or,
// where implSuffix is set, every metric named "IMPL"+implSuffix.
func collect(samples []sample, bench, xparam, unit, implSuffix string, value func(s sample, v float64) float64) map[string]*chart {
	charts := map[string]*chart{}
	seriesOf := map[string]map[string]*series{}
	for _, s := range samples {
		if s.bench != bench {
			continue
		}
		load, x := s.params["load"], s.params[xparam]
		c := charts[load]
		if c == nil {
			c = &chart{}
			charts[load] = c
			seriesOf[load] = map[string]*series{}
		}
		add := func(name string, v float64) {
			se := seriesOf[load][name]
			if se == nil {
				se = &series{name: name, points: map[string][]float64{}}
				seriesOf[load][name] = se
				c.series = append(c.series, se)
			}
			se.points[x] = append(se.points[x], value(s, v))
		}
		if implSuffix == "" {
			if v, ok := s.metrics[unit]; ok {
				add(s.params["impl"], v)
			}
		} else {
			for u, v := range s.metrics {
				if name := strings.TrimSuffix(u, implSuffix); name != u && !strings.Contains(name, "-server") {
					add(name, v)
				}
			}
		}
		if !contains(c.xs, x) {
			c.xs = append(c.xs, x)
		}
	}
	for _, c := range charts {
		sortNumeric(c.xs)
		sort.Slice(c.series, func(i, j int) bool { return c.series[i].name < c.series[j].name })
	}
	return charts
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func sortNumeric(xs []string) {
	sort.Slice(xs, func(i, j int) bool {
		a, errA := strconv.ParseFloat(xs[i], 64)
		b, errB := strconv.ParseFloat(xs[j], 64)
		if errA == nil && errB == nil {
			return a < b
		}
		return xs[i] < xs[j]
	})
}

// palette gives each contender the same colour in every chart.
var palette = map[string]string{
	"redisabs":       "#1f77b4",
	"redissup":       "#ff7f0e",
	"redis_rate":     "#2ca02c",
	"redisabs-alone": "#9ecae1",
	"redissup-alone": "#fdae6b",
}

var spare = []string{"#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

func colour(name string, i int) string {
	if c, ok := palette[name]; ok {
		return c
	}
	return spare[i%len(spare)]
}

// niceMax rounds v up to 1, 2, 2.5 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func label(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func esc(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	return r.Replace(s)
}

// svg renders c: 640 × 400, the plot area left of a legend.
func (c *chart) svg(w io.Writer) {
	const (
		width, height          = 640, 400
		left, right, top, bott = 70, 150, 40, 50
	)
	pw, ph := float64(width-left-right), float64(height-top-bott)
	ymax := 0.0
	for _, se := range c.series {
		for _, v := range se.points {
			ymax = math.Max(ymax, stat.Median(v))
		}
	}
	ymax = niceMax(ymax)
	y := func(v float64) float64 { return float64(top) + ph - v/ymax*ph }
	ticks := []float64{0, ymax / 5, 2 * ymax / 5, 3 * ymax / 5, 4 * ymax / 5, ymax}
	if c.logY {
		lo, hi := math.Inf(1), 0.0
		for _, se := range c.series {
			for _, v := range se.points {
				lo, hi = math.Min(lo, stat.Median(v)), math.Max(hi, stat.Median(v))
			}
		}
		l0, l1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if l1 <= l0 {
			l1 = l0 + 1
		}
		y = func(v float64) float64 { return float64(top) + ph - (math.Log10(v)-l0)/(l1-l0)*ph }
		ticks = ticks[:0]
		for e := l0; e <= l1; e++ {
			ticks = append(ticks, math.Pow(10, e))
		}
	}
	slot := pw / float64(len(c.xs))
	xc := func(i int) float64 { return float64(left) + slot*(float64(i)+0.5) }

	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(w, `<text x="%d" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", left, esc(c.title))
	for _, v := range ticks {
		fmt.Fprintf(w, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, float64(left)+pw, y(v), y(v))
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, label(v))
	}
	fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%d" y2="%.1f" stroke="black"/>`+"\n", left, left, top, float64(top)+ph)
	fmt.Fprintf(w, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, float64(left)+pw, float64(top)+ph, float64(top)+ph)
	for i, x := range c.xs {
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", xc(i), float64(top)+ph+16, esc(x))
	}
	fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", float64(left)+pw/2, height-10, esc(c.xlabel))
	fmt.Fprintf(w, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", float64(top)+ph/2, esc(c.ylabel))

	n := float64(len(c.series))
	for si, se := range c.series {
		col := colour(se.name, si)
		if c.bars {
			bw := slot * 0.8 / n
			for i, x := range c.xs {
				v, ok := se.points[x]
				if !ok {
					continue
				}
				m := stat.Median(v)
				bx := xc(i) - slot*0.4 + bw*float64(si)
				fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s, %s: %s</title></rect>`+"\n",
					bx, y(m), bw-2, float64(top)+ph-y(m), col, esc(se.name), esc(x), strconv.FormatFloat(m, 'f', 1, 64))
				fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`+"\n", bx+(bw-2)/2, y(m)-3, strconv.FormatFloat(m, 'f', 0, 64))
			}
		} else {
			var pts []string
			for i, x := range c.xs {
				v, ok := se.points[x]
				if !ok {
					continue
				}
				m := stat.Median(v)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xc(i), y(m)))
				fmt.Fprintf(w, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s, %s: %s</title></circle>`+"\n",
					xc(i), y(m), col, esc(se.name), esc(x), strconv.FormatFloat(m, 'f', 1, 64))
			}
			fmt.Fprintf(w, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), col)
		}
		ly := top + 10 + 20*si
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="14" height="10" fill="%s"/>`+"\n", width-right+14, ly, col)
		fmt.Fprintf(w, `<text x="%d" y="%d">%s</text>`+"\n", width-right+34, ly+10, esc(se.name))
	}
	fmt.Fprintln(w, "</svg>")
}

// charts builds every chart the samples allow, by output file name.
func charts(samples []sample) map[string]*chart {
	out := map[string]*chart{}
	ident := func(_ sample, v float64) float64 { return v }
	for load, c := range collect(samples, "BenchmarkInc", "g", "ops/s", "", ident) {
		c.title = "Decisions per second, one call each (" + load + " workload)"
		c.xlabel, c.ylabel = "goroutines", "decisions/s (median of rounds)"
		out["compare-"+load+"-ops.svg"] = c
	}
	latency := func(s sample, nsPerOp float64) float64 {
		g, _ := strconv.ParseFloat(s.params["g"], 64)
		return nsPerOp * g / 1000
	}
	for load, c := range collect(samples, "BenchmarkInc", "g", "ns/op", "", latency) {
		c.title = "Mean time of a call (" + load + " workload)"
		c.xlabel, c.ylabel = "goroutines", "µs per call (ns/op × goroutines)"
		out["compare-"+load+"-latency.svg"] = c
	}
	mem := collect(samples, "BenchmarkMemory", "buckets", "bytes/key", "", ident)
	if c := mem[""]; c != nil {
		c.title = "Redis memory per active key"
		c.xlabel, c.ylabel = "buckets in use (5 requests per key)", "bytes per key"
		c.bars = true
		out["memory.svg"] = c
	}
	for name, c := range latencyCharts(samples) {
		out[name] = c
	}
	for load, c := range collect(samples, "BenchmarkBatchingMix", "g", "", "-ops/s", ident) {
		c.title = "Decisions per second, batched and alone (" + load + ")"
		c.xlabel, c.ylabel = "goroutines", "decisions/s (median of samples)"
		out["batching-"+load+"-ops.svg"] = c
	}
	return out
}

// percentileUnits are the metrics of TestLatency, in the order drawn.
var percentileUnits = []string{"p50-µs", "p90-µs", "p99-µs", "p99.9-µs"}

// latencyCharts draws, per workload and goroutine count of
// BenchmarkLatency (TestLatency), each contender's percentiles of a call's
// duration on a logarithmic axis: latency-LOAD-gG.svg.
func latencyCharts(samples []sample) map[string]*chart {
	out := map[string]*chart{}
	seriesOf := map[string]map[string]*series{}
	for _, s := range samples {
		if s.bench != "BenchmarkLatency" {
			continue
		}
		name := "latency-" + s.params["load"] + "-g" + s.params["g"] + ".svg"
		c := out[name]
		if c == nil {
			c = &chart{
				title:  "Time of a call, " + s.params["g"] + " goroutines (" + s.params["load"] + ")",
				xlabel: "percentile (median of rounds)", ylabel: "µs per call (log scale)",
				logY: true,
			}
			for _, u := range percentileUnits {
				c.xs = append(c.xs, strings.TrimSuffix(u, "-µs"))
			}
			out[name] = c
			seriesOf[name] = map[string]*series{}
		}
		impl := s.params["impl"]
		se := seriesOf[name][impl]
		if se == nil {
			se = &series{name: impl, points: map[string][]float64{}}
			seriesOf[name][impl] = se
			c.series = append(c.series, se)
		}
		for _, u := range percentileUnits {
			if v, ok := s.metrics[u]; ok && v > 0 {
				x := strings.TrimSuffix(u, "-µs")
				se.points[x] = append(se.points[x], v)
			}
		}
	}
	for _, c := range out {
		sort.Slice(c.series, func(i, j int) bool { return c.series[i].name < c.series[j].name })
	}
	return out
}

// run reads the files, writes every chart into dir and returns the names
// it wrote, sorted.
func run(dir string, files []string) ([]string, error) {
	var all []sample
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		s, err := parse(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", p, err)
		}
		all = append(all, s...)
	}
	cs := charts(all)
	for name, c := range cs {
		if !c.bars && len(c.xs) < 2 {
			delete(cs, name) // one goroutine count: no line to draw
		}
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("no BenchmarkInc, BenchmarkMemory or BenchmarkBatchingMix lines in %v", files)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var names []string
	for name, c := range cs {
		var b strings.Builder
		c.svg(&b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

func main() {
	dir := flag.String("o", ".", "directory the SVG files are written to")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: plots -o DIR BENCHMARK-OUTPUT...")
		os.Exit(2)
	}
	names, err := run(*dir, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, n := range names {
		fmt.Println(filepath.Join(*dir, n))
	}
}
