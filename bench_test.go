package sluice_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
)

// These benchmarks put sluice's local provider beside golang.org/x/time/rate
// in one file, so one run compares them on the same machine:
//
//	go test -run '^$' -bench . -benchmem -count 5 .
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

func contenders(b *testing.B) map[string]allowFunc {
	abs, err := local.NewAbsolute()
	if err != nil {
		b.Fatal(err)
	}
	sup, err := local.NewSuppressed(limiter.WithHardLimitFactor(1.5))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		abs.Close(context.Background())
		sup.Close(context.Background())
	})
	ctx := context.Background()
	single := newXRate()
	xm := &xMutex{m: make(map[string]*rate.Limiter)}
	xs := &xSync{}
	return map[string]allowFunc{
		"sluice-local-absolute": func(k string) bool {
			d, _ := abs.Inc(ctx, k, generous, 1)
			return d.Allowed
		},
		"sluice-local-suppressed": func(k string) bool {
			d, _ := sup.Inc(ctx, k, generous, 1)
			return d.Allowed
		},
		"xrate-map-mutex": xm.allow,
		"xrate-sync-map":  xs.allow,
		"xrate-single":    func(string) bool { return single.Allow() },
	}
}

var order = []string{"sluice-local-absolute", "sluice-local-suppressed", "xrate-map-mutex", "xrate-sync-map", "xrate-single"}

func run(b *testing.B, parallel bool, keyCount int) {
	for _, name := range order {
		b.Run(name, func(b *testing.B) {
			allow := contenders(b)[name]
			for _, k := range keys[:keyCount] { // warm: every key exists
				allow(k)
			}
			var refused atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			if !parallel {
				for i := 0; i < b.N; i++ {
					if !allow(keys[i%keyCount]) {
						refused.Add(1)
					}
				}
			} else {
				var seq atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					i := int(seq.Add(7919))
					for pb.Next() {
						i++
						if !allow(keys[i%keyCount]) {
							refused.Add(1)
						}
					}
				})
			}
			b.StopTimer()
			if refused.Load() != 0 {
				b.Fatalf("%d calls refused: the benchmark must measure admissions", refused.Load())
			}
		})
	}
}

func BenchmarkIncHotKey(b *testing.B)         { run(b, false, 1) }
func BenchmarkInc10kKeys(b *testing.B)        { run(b, false, manyKeys) }
func BenchmarkIncParallelHotKey(b *testing.B) { run(b, true, 1) }
func BenchmarkIncParallel10kKeys(b *testing.B) {
	run(b, true, manyKeys)
}

// BenchmarkIdleKeyMemory reports the heap held per key that saw one Inc and
// then went idle (before the sweep drops it).
func BenchmarkIdleKeyMemory(b *testing.B) {
	const n = 100_000
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "idle-user-" + strconv.Itoa(i)
	}
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		a, err := local.NewAbsolute(limiter.WithWindow(time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range ks {
			a.Inc(context.Background(), k, limiter.PerMinute(10), 1)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/key")
		runtime.KeepAlive(ks)
		a.Close(context.Background())
	}
}
