package sluice_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
)

// These benchmarks put sluice's local provider beside golang.org/x/time/rate
// in one file, so one run compares them on the same machine, contenders
// alternated within every row:
//
//	go test -run '^$' -bench 'Local' -benchmem -benchtime 200ms -count 10 . | tee local.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /impl local.txt
//
// Every call is admitted on both sides (a generous rate), so both measure
// the bookkeeping of an admission, not the cheap refusal path.

const manyKeys = 10_000

var keys = func() []string {
	k := make([]string, manyKeys)
	for i := range k {
		k[i] = "user-" + strconv.Itoa(i)
	}
	return k
}()

var generous = limiter.PerSecond(1e7)

func newXRate() *rate.Limiter { return rate.NewLimiter(rate.Limit(1e9), 1_000_000_000) }

// xMutex is x/time/rate limiters in a map behind one mutex.
type xMutex struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func (x *xMutex) allow(k string) bool {
	x.mu.Lock()
	l := x.m[k]
	if l == nil {
		l = newXRate()
		x.m[k] = l
	}
	x.mu.Unlock()
	return l.Allow()
}

// xSync is x/time/rate limiters in a sync.Map.
type xSync struct{ m sync.Map }

func (x *xSync) allow(k string) bool {
	v, ok := x.m.Load(k)
	if !ok {
		v, _ = x.m.LoadOrStore(k, newXRate())
	}
	return v.(*rate.Limiter).Allow()
}

type allowFunc func(k string) bool

// contender is one limiter of the comparison: build returns its call on a
// new, empty limiter and what releases it.
type contender struct {
	name  string
	build func(tb testing.TB) (allowFunc, func())
}

var ctx = context.Background()

// sluiceContender builds a local limiter with opts, called through the
// limiter.Limiter interface (as x/time/rate's Allow is called through a
// func value).
func sluiceContender(name string, newL func(...limiter.Option) (limiter.Limiter, error), opts ...limiter.Option) contender {
	return contender{name, func(tb testing.TB) (allowFunc, func()) {
		l, err := newL(opts...)
		if err != nil {
			tb.Fatal(err)
		}
		return func(k string) bool {
			d, _ := l.Inc(ctx, k, generous, 1)
			return d.Allowed
		}, func() { l.Close(ctx) }
	}}
}

var contenders = []contender{
	sluiceContender("sluice-local-absolute", func(o ...limiter.Option) (limiter.Limiter, error) { return local.NewAbsolute(o...) }),
	sluiceContender("sluice-local-suppressed", func(o ...limiter.Option) (limiter.Limiter, error) { return local.NewSuppressed(o...) },
		limiter.WithHardLimitFactor(1.5)),
	{"xrate-map-mutex", func(testing.TB) (allowFunc, func()) {
		x := &xMutex{m: make(map[string]*rate.Limiter)}
		return x.allow, func() {}
	}},
	{"xrate-sync-map", func(testing.TB) (allowFunc, func()) {
		x := &xSync{}
		return x.allow, func() {}
	}},
}

// ballast is the large live heap of the heap=1M rows: a million small
// objects reached through a million pointers, which every GC cycle marks.
var ballast []*[2]*int

func setBallast(on bool) {
	ballast = nil
	if on {
		ballast = make([]*[2]*int, 1_000_000)
		for i := range ballast {
			ballast[i] = new([2]*int)
		}
	}
	runtime.GC()
}

// localRow is one row of the local comparison.
type localRow struct {
	heap  bool // a million live pointers beside the limiter
	keys  int  // 1 (hot) or manyKeys, walked round-robin
	g     int  // goroutines: 1, or 64 through RunParallel
	fresh bool // an empty limiter per run, every first touch timed; else warm
}

func (r localRow) String() string {
	heap, keys, state := "none", "hot", "warm"
	if r.heap {
		heap = "1M"
	}
	if r.keys > 1 {
		keys = "10k"
	}
	if r.fresh {
		state = "fresh"
	}
	return fmt.Sprintf("heap=%s/keys=%s/g=%d/limiter=%s", heap, keys, r.g, state)
}

func localRows() []localRow {
	var rows []localRow
	for _, heap := range []bool{false, true} {
		for _, kn := range []int{1, manyKeys} {
			for _, g := range []int{1, 64} {
				for _, fresh := range []bool{true, false} {
					rows = append(rows, localRow{heap, kn, g, fresh})
				}
			}
		}
	}
	return rows
}

// BenchmarkLocal is the matrix of docs/benchmarks.md, Local provider against x/time/rate: heap (none,
// or a million live pointers), keys (one hot key, 10,000 walked
// round-robin), g (1 goroutine, or 64 through RunParallel), limiter
// (fresh: an empty limiter per run, every key's first touch timed; warm:
// every key touched before the timer starts) and impl, the contender.
// -count repeats each contender back to back; TestLocalCompare alternates
// them, which is what docs/benchmarks.md reports.
func BenchmarkLocal(b *testing.B) {
	for _, row := range localRows() {
		b.Run(row.String(), func(b *testing.B) {
			setBallast(row.heap)
			defer setBallast(false)
			for _, ct := range contenders {
				b.Run("impl="+ct.name, func(b *testing.B) { runLocal(b, ct, keys[:row.keys], row.g, row.fresh) })
			}
		})
	}
}

var (
	localRounds = flag.Int("local.rounds", 0, "TestLocalCompare: rounds of the local comparison; 0 skips it")
	localRowsRE = flag.String("local.rows", "", "TestLocalCompare: only the rows whose name matches this regular expression")
)

// TestLocalCompare is the driver behind docs/benchmarks.md, Local provider against x/time/rate: each
// round runs every contender once on every row of BenchmarkLocal, in an
// order rotated from round to round, plus the suppressed strategy's draw
// alone, so the noise of a shared machine falls on every contender alike.
// It prints benchmark lines (benchstat reads them) and, at the end, per
// row the ratios of the medians over the rounds: local absolute against
// the better x/time/rate variant, and local suppressed against local
// absolute plus the draw:
//
//	go test -run TestLocalCompare -local.rounds 10 -benchtime 200ms -timeout 60m -v . | tee local.txt
//
// -local.rows takes a regular expression and keeps only the rows whose
// name matches, for more rounds on the rows in question.
func TestLocalCompare(t *testing.T) {
	if *localRounds <= 0 {
		t.Skip("run with -local.rounds N")
	}
	procs := runtime.GOMAXPROCS(0)
	ns, cpu := map[string][]float64{}, map[string][]float64{}
	sample := func(name string, f func(b *testing.B)) {
		res := testing.Benchmark(f)
		if res.N == 0 {
			t.Fatalf("%s: the benchmark failed", name)
		}
		fmt.Printf("Benchmark%s-%d\t%s\t%s\n", name, procs, res.String(), res.MemString())
		ns[name] = append(ns[name], float64(res.T.Nanoseconds())/float64(res.N))
		cpu[name] = append(cpu[name], res.Extra["cpu-ns/op"])
	}
	re, err := regexp.Compile(*localRowsRE)
	if err != nil {
		t.Fatalf("-local.rows: %v", err)
	}
	var rows []localRow
	for _, row := range localRows() {
		if re.MatchString(row.String()) {
			rows = append(rows, row)
		}
	}
	for r := 0; r < *localRounds; r++ {
		for _, row := range rows {
			setBallast(row.heap)
			for i := range contenders {
				ct := contenders[(i+r)%len(contenders)]
				sample("Local/"+row.String()+"/impl="+ct.name, func(b *testing.B) { runLocal(b, ct, keys[:row.keys], row.g, row.fresh) })
			}
			// The draw is measured serially, once per row (under the
			// serial row's name, which a 64-goroutine row reads too).
			if serial := (localRow{row.heap, row.keys, 1, row.fresh}); row.g == 1 || !re.MatchString(serial.String()) {
				sample("LocalDraw/"+serial.String(), BenchmarkLocalDraw)
			}
		}
		setBallast(false)
	}
	for _, m := range []struct {
		what string
		of   map[string][]float64
		wall bool
	}{{"ns/op (wall)", ns, true}, {"cpu-ns/op (CPU time of the process per call)", cpu, false}} {
		med := func(name string) float64 { return median(m.of[name]) }
		fmt.Printf("\nmedians of %d rounds, %s; abs/x: local absolute over the better x/time/rate; sup/(a+d): local suppressed over local absolute plus the draw\n", *localRounds, m.what)
		fmt.Printf("%-40s %8s %8s %8s %8s %6s %7s %8s\n", "row", "abs", "sup", "x-mutex", "x-sync", "draw", "abs/x", "sup/(a+d)")
		for _, row := range rows {
			p := "Local/" + row.String() + "/impl="
			abs, sup := med(p+"sluice-local-absolute"), med(p+"sluice-local-suppressed")
			xm, xs := med(p+"xrate-map-mutex"), med(p+"xrate-sync-map")
			// The draw at 64 goroutines is the serial draw's: it is per
			// call and touches no shared state (a per-P generator). In CPU
			// time it costs the same at any parallelism.
			dr := med("LocalDraw/" + localRow{row.heap, row.keys, 1, row.fresh}.String())
			if row.g > 1 && m.wall {
				dr /= float64(procs)
			}
			fmt.Printf("%-40s %8.1f %8.1f %8.1f %8.1f %6.1f %7.3f %8.3f\n", row, abs, sup, xm, xs, dr, abs/min(xm, xs), sup/(abs+dr))
		}
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	n := len(s)
	return (s[n/2-1] + s[n/2]) / 2
}

// runLocal times b.N calls of ct over ks from g goroutines.
func runLocal(b *testing.B, ct contender, ks []string, g int, fresh bool) {
	allow, release := ct.build(b)
	defer release()
	if !fresh {
		for _, k := range ks {
			allow(k)
		}
	}
	var refused atomic.Int64
	// Each contender starts on a collected heap: the garbage of the one
	// before it (its limiter and keys) is not collected on its time.
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	if g == 1 {
		for i := 0; i < b.N; i++ {
			if !allow(ks[i%len(ks)]) {
				refused.Add(1)
			}
		}
	} else {
		b.SetParallelism((g + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		var seq atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(seq.Add(7919))
			for pb.Next() {
				i++
				if !allow(ks[i%len(ks)]) {
					refused.Add(1)
				}
			}
		})
	}
	b.StopTimer()
	// CPU time per call, over every thread of the process (so at 64
	// goroutines about GOMAXPROCS times the wall time): what other
	// processes on the machine take does not count.
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	if refused.Load() != 0 {
		b.Fatalf("%d calls refused: the benchmark must measure admissions", refused.Load())
	}
}

// BenchmarkLocalDraw is the suppressed strategy's one random draw per call
// with the default source, as local.Suppressed makes it: the cost a
// suppressed Inc pays beyond an absolute one by definition.
func BenchmarkLocalDraw(b *testing.B) {
	var sum int64
	cpu := processCPU()
	for i := 0; i < b.N; i++ {
		sum += window.DrawPPM(rand.Float64())
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	if b.N > 1000 && sum == 0 {
		b.Fatal("every draw was 0")
	}
}

// BenchmarkLocalKeyMemory reports, for each contender, what a key that saw
// one call holds: heap bytes and heap objects per key, and the time a full
// GC cycle spends per key (a forced GC with 100,000 keys live, less one
// without them, over 100,000). Objects are what the collector traces one
// by one; docs/benchmarks.md (Memory per key) lists the pointers inside them.
func BenchmarkLocalKeyMemory(b *testing.B) {
	const n = 100_000
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "idle-user-" + strconv.Itoa(i)
	}
	gcTime := func() time.Duration {
		best := time.Duration(1 << 62)
		for i := 0; i < 5; i++ {
			t := time.Now()
			runtime.GC()
			best = min(best, time.Since(t))
		}
		return best
	}
	for _, ct := range contenders {
		b.Run("impl="+ct.name, func(b *testing.B) {
			var bytes, objs, gcNs float64
			for i := 0; i < b.N; i++ {
				var before, after runtime.MemStats
				base := gcTime()
				runtime.ReadMemStats(&before)
				allow, release := ct.build(b)
				for _, k := range ks {
					allow(k)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				held := gcTime()
				bytes += float64(after.HeapAlloc-before.HeapAlloc) / n
				objs += float64(after.HeapObjects-before.HeapObjects) / n
				gcNs += float64(held-base) / n
				release()
				runtime.KeepAlive(allow)
			}
			b.ReportMetric(bytes/float64(b.N), "bytes/key")
			b.ReportMetric(objs/float64(b.N), "objects/key")
			b.ReportMetric(gcNs/float64(b.N), "gc-ns/key")
			runtime.KeepAlive(ks)
		})
	}
}
