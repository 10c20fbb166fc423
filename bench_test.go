package sluice_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
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

// BenchmarkLocal is the matrix of docs/benchmarks.md, Local: heap (none,
// or a million live pointers), keys (one hot key, 10,000 walked
// round-robin), g (1 goroutine, or 64 through RunParallel), limiter
// (fresh: an empty limiter per run, every key's first touch timed; warm:
// every key touched before the timer starts) and impl, the contender,
// innermost so that -count alternates the contenders on every row.
func BenchmarkLocal(b *testing.B) {
	for _, heap := range []string{"none", "1M"} {
		b.Run("heap="+heap, func(b *testing.B) {
			setBallast(heap == "1M")
			defer setBallast(false)
			for _, kn := range []int{1, manyKeys} {
				name := "hot"
				if kn > 1 {
					name = "10k"
				}
				b.Run("keys="+name, func(b *testing.B) {
					for _, g := range []int{1, 64} {
						b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) {
							for _, fresh := range []bool{true, false} {
								state := map[bool]string{true: "fresh", false: "warm"}[fresh]
								b.Run("limiter="+state, func(b *testing.B) {
									for _, ct := range contenders {
										b.Run("impl="+ct.name, func(b *testing.B) { runLocal(b, ct, keys[:kn], g, fresh) })
									}
								})
							}
						})
					}
				})
			}
		})
	}
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
	b.ReportAllocs()
	b.ResetTimer()
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
	if refused.Load() != 0 {
		b.Fatalf("%d calls refused: the benchmark must measure admissions", refused.Load())
	}
}

// BenchmarkLocalDraw is the suppressed strategy's one random draw per call
// with the default source, as local.Suppressed makes it: the cost a
// suppressed Inc pays beyond an absolute one by definition.
func BenchmarkLocalDraw(b *testing.B) {
	var sum int64
	for i := 0; i < b.N; i++ {
		sum += window.DrawPPM(rand.Float64())
	}
	if b.N > 1000 && sum == 0 {
		b.Fatal("every draw was 0")
	}
}

// BenchmarkLocalKeyMemory reports, for each contender, what a key that saw
// one call holds: heap bytes and heap objects per key, and the time a full
// GC cycle spends per key (a forced GC with 100,000 keys live, less one
// without them, over 100,000). Objects are what the collector traces one
// by one; the pointers inside them are in docs/benchmarks.md.
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
