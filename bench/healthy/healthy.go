// Package healthy measures what a release costs a call to a healthy Redis
// against another release, in one process: two builds of sluice linked
// into one test binary (the older one under another module path), one
// redis-server, one client, and calls alternating between the sides in
// short blocks, so that the noise of a shared machine falls on both sides
// alike. docs/benchmarks.md, "Failure policy: the healthy path", reports
// it; TestHealthyAB in this package builds and runs it.
//
// This file is copied, as it is, into the generated module that links both
// releases, so it depends on neither: a Side reaches its release through
// the closures the generated code gives it.
package healthy

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Inc is one Inc(ctx, key, rate, 1) of a limiter set up for a workload.
type Inc func(ctx context.Context, key string) error

// Limiter is what both releases' providers offer: R is the release's
// limiter.Rate, D its limiter.Decision.
type Limiter[R, D any] interface {
	Inc(ctx context.Context, key string, rate R, n int64) (D, error)
	Close(ctx context.Context) error
}

// Bind turns l, at rate, into an Inc and the function that closes l.
func Bind[R, D any](l Limiter[R, D], rate R) (Inc, func()) {
	return func(ctx context.Context, key string) error {
			_, err := l.Inc(ctx, key, rate, 1)
			return err
		}, func() {
			l.Close(context.Background())
		}
}

// Side is one release (or one configuration of it).
type Side struct {
	Label string // shown in results: "base:c3df9f6"
	// New sets up provider "abs" (redisabs) or "sup" (redissup) on c
	// with the key prefix and otherwise the side's options, or "local"
	// (local.NewAbsolute, which ignores c and the prefix), bound to rate
	// (limiter.ParseRate's form).
	New func(c redis.UniversalClient, provider, rate, prefix string) (Inc, func(), error)
}

// Workload is a key pattern and a rate.
type Workload struct {
	Name string
	Rate string // limiter.ParseRate's form
	Key  func(i int) string
}

var keys10k = func() []string {
	k := make([]string, 10_000)
	for i := range k {
		k[i] = "user:" + strconv.Itoa(i)
	}
	return k
}()

// Workloads are the two of BenchmarkInc in limiter/redisabs: one hot key
// whose capacity is never reached (every call writes), and calls rotating
// over 10,000 keys at 1,000 per minute.
var Workloads = []Workload{
	{"HotKey", "1e9/s", func(int) string { return "hot" }},
	{"Keys10k", "1000/min", func(i int) string { return keys10k[i%len(keys10k)] }},
}

// Providers and Forms complete a benchmark's name: provider/workload/form.
// "local" is the in-process absolute provider: calls of about a hundred
// nanoseconds, so its blocks want a larger -perblock.
var (
	Providers = []string{"abs", "sup", "local"}
	Forms     = []string{"Serial", "Parallel"}
)

// Options of Compare.
type Options struct {
	Blocks   int            // blocks per side and benchmark
	PerBlock int            // calls per block
	Group    int            // blocks per printed benchmark line
	Only     *regexp.Regexp // nil: every benchmark
	// Ctx is the context of every call; nil: context.Background(). A
	// cancellable one measures the path of a request's context.
	Ctx context.Context
}

// Total is what one side did in one benchmark.
type Total struct {
	Calls   int64
	Elapsed time.Duration
	Mallocs uint64
	Bytes   uint64
	Blocks  []time.Duration // each block's time, in block order
}

// OpsPerSec is Calls over Elapsed.
func (t *Total) OpsPerSec() float64 { return float64(t.Calls) / t.Elapsed.Seconds() }

// Results maps a benchmark name, then a side's label, to its total.
type Results map[string]map[string]*Total

// Compare runs every benchmark (provider/workload/form) on every side, in
// blocks of opt.PerBlock calls: block k runs each side once, in an order
// rotated by k, so that consecutive blocks of two sides are a pair measured
// back to back. Serial is one goroutine; Parallel is GOMAXPROCS goroutines
// sharing the block's calls. Each side's limiter is warmed up first (2,000
// calls: scripts loaded, connections open, keys created). It writes
// benchmark lines (benchstat reads them, -col /rev) to w, one per side and
// opt.Group blocks, then a summary, and returns the totals.
func Compare(w io.Writer, c redis.UniversalClient, sides []Side, opt Options) (Results, error) {
	ctx := opt.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	procs := runtime.GOMAXPROCS(0)
	res := Results{}
	var names []string
	for _, p := range Providers {
		for _, wl := range Workloads {
			for fi, form := range Forms {
				name := p + "/" + wl.Name + "/" + form
				if opt.Only != nil && !opt.Only.MatchString(name) {
					continue
				}
				names = append(names, name)
				incs := make([]Inc, len(sides))
				for i, s := range sides {
					prefix := prefixOf(i, name)
					inc, closeFn, err := s.New(c, p, wl.Rate, prefix)
					if err != nil {
						return nil, fmt.Errorf("%s %s: %w", s.Label, name, err)
					}
					defer closeFn()
					for j := 0; j < warmUp; j++ {
						if err := inc(ctx, wl.Key(j)); err != nil {
							return nil, fmt.Errorf("%s %s: warm-up: %w", s.Label, name, err)
						}
					}
					incs[i] = inc
				}
				res[name] = map[string]*Total{}
				for _, s := range sides {
					res[name][s.Label] = &Total{}
				}
				goroutines := 1
				if fi == 1 {
					goroutines = procs
				}
				var ms runtime.MemStats
				for k := 0; k < opt.Blocks; k++ {
					for j := range sides {
						i := (j + k) % len(sides)
						t := res[name][sides[i].Label]
						runtime.ReadMemStats(&ms)
						m0, b0 := ms.Mallocs, ms.TotalAlloc
						d, err := block(ctx, incs[i], wl, goroutines, opt.PerBlock, k*opt.PerBlock)
						if err != nil {
							return nil, fmt.Errorf("%s %s: %w", sides[i].Label, name, err)
						}
						runtime.ReadMemStats(&ms)
						t.Calls += int64(opt.PerBlock)
						t.Elapsed += d
						t.Mallocs += ms.Mallocs - m0
						t.Bytes += ms.TotalAlloc - b0
						t.Blocks = append(t.Blocks, d)
					}
					if g := opt.Group; g > 0 && (k+1)%g == 0 {
						for _, s := range sides {
							printGroup(w, name, s.Label, procs, res[name][s.Label], k+1-g, k+1, opt.PerBlock)
						}
					}
				}
			}
		}
	}
	Summary(w, names, sides, res)
	return res, nil
}

// warmUp is the calls each side's limiter makes before a benchmark.
const warmUp = 2_000

// prefixOf is the key prefix of side i in benchmark name: keys of
// different processes, sides and benchmarks never meet.
func prefixOf(i int, name string) string {
	return fmt.Sprintf("ab%d:%d:%s", os.Getpid(), i, name)
}

// block makes n calls of inc on g goroutines, keys from index from on, and
// returns the time they took.
func block(ctx context.Context, inc Inc, wl Workload, g, n, from int) (time.Duration, error) {
	if g == 1 {
		start := time.Now()
		for i := from; i < from+n; i++ {
			if err := inc(ctx, wl.Key(i)); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}
	var wg sync.WaitGroup
	errs := make([]error, g)
	start := time.Now()
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := from + w; i < from+n; i += g {
				if err := inc(ctx, wl.Key(i)); err != nil {
					errs[w] = err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	d := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return d, nil
}

// printGroup writes blocks [from, to) of t as one benchmark line; the
// allocation figures are the side's totals so far.
func printGroup(w io.Writer, name, label string, procs int, t *Total, from, to, perBlock int) {
	var d time.Duration
	for _, b := range t.Blocks[from:to] {
		d += b
	}
	n := (to - from) * perBlock
	fmt.Fprintf(w, "BenchmarkHealthyInc/%s/rev=%s-%d\t%d\t%.0f ns/op\t%.0f ops/s\t%.0f B/op\t%.1f allocs/op\n",
		name, label, procs, n, float64(d.Nanoseconds())/float64(n), float64(n)/d.Seconds(),
		float64(t.Bytes)/float64(t.Calls), float64(t.Mallocs)/float64(t.Calls))
}

// Ratios returns, for each block, the ops/s of side over those of ref in
// the same block (ref's time over side's), sorted.
func Ratios(side, ref *Total) []float64 {
	rs := make([]float64, len(side.Blocks))
	for k := range rs {
		rs[k] = float64(ref.Blocks[k]) / float64(side.Blocks[k])
	}
	sort.Float64s(rs)
	return rs
}

// Quantile is the q-quantile of sorted xs (nearest rank).
func Quantile(xs []float64, q float64) float64 {
	i := int(q*float64(len(xs)-1) + 0.5)
	return xs[i]
}

// Summary writes, per benchmark and side, the ops/s over all blocks, the
// median ns/op of a block, bytes and allocations per call, and for every
// side after the first its ops/s over the first side's: of the totals, and
// the median and quartiles of the per-block ratios.
func Summary(w io.Writer, names []string, sides []Side, res Results) {
	fmt.Fprintf(w, "\n%-22s %-22s %9s %9s %7s %7s  %-8s %s\n", "benchmark", "side", "ops/s", "ns/op",
		"B/op", "allocs", "÷ first", "per-block ratio: median [q1, q3]")
	for _, name := range names {
		ref := res[name][sides[0].Label]
		for _, s := range sides {
			t := res[name][s.Label]
			bs := make([]float64, len(t.Blocks))
			for k, b := range t.Blocks {
				bs[k] = float64(b.Nanoseconds())
			}
			sort.Float64s(bs)
			perBlock := float64(t.Calls) / float64(len(t.Blocks))
			line := fmt.Sprintf("%-22s %-22s %9.0f %9.0f %7.0f %7.1f", name, s.Label, t.OpsPerSec(),
				Quantile(bs, 0.5)/perBlock, float64(t.Bytes)/float64(t.Calls), float64(t.Mallocs)/float64(t.Calls))
			if t != ref {
				rs := Ratios(t, ref)
				line += fmt.Sprintf("  %-8.3f %.3f [%.3f, %.3f]", t.OpsPerSec()/ref.OpsPerSec(),
					Quantile(rs, 0.5), Quantile(rs, 0.25), Quantile(rs, 0.75))
			}
			fmt.Fprintln(w, line)
		}
	}
}

// StartRedis starts redis-server, persistence off, on a free loopback port
// and waits until it answers PING. stop kills it and removes its directory.
func StartRedis() (addr string, stop func(), err error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, fmt.Errorf("healthy: redis-server is not on PATH")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "sluice-healthy-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", dir+"/redis.log")
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop = func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
	}
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for i := 0; ; i++ {
		if err = c.Ping(context.Background()).Err(); err == nil {
			return addr, stop, nil
		}
		if i == 100 {
			stop()
			return "", nil, fmt.Errorf("healthy: redis-server on %s does not answer: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Header writes the machine and versions: goos, goarch, cpu (benchstat
// reads these three), then CPUs, GOMAXPROCS, Go and Redis versions and the
// load average.
func Header(w io.Writer, c *redis.Client) {
	ver := "unknown"
	if info, err := c.Info(context.Background(), "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				ver = v
			}
		}
	}
	fmt.Fprintf(w, "goos: %s\ngoarch: %s\ncpu: %s\n", runtime.GOOS, runtime.GOARCH, cpuModel())
	fmt.Fprintf(w, "# %d CPUs, GOMAXPROCS %d, %s, redis-server %s, load average %s\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), ver, loadAvg())
}

// Footer writes the load average at the end of the run.
func Footer(w io.Writer) { fmt.Fprintf(w, "# load average at the end: %s\n", loadAvg()) }

// loadAvg is the first three fields of /proc/loadavg, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// cpuModel is the first "model name" of /proc/cpuinfo, or "unknown".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// NewClient is the client every side shares, set up as docs/operations.md
// advises (no retries of an increment; context deadlines honoured on the
// sockets), with 16 connections opened ahead.
func NewClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  addr,
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
		PoolSize:              16,
		MinIdleConns:          16,
	})
}
