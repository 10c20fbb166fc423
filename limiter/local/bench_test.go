package local_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/limiter/local"

	"github.com/sluice-go/sluice/limiter"
)

// The root package's bench_test.go puts admissions beside
// golang.org/x/time/rate. These measure the provider's other paths, which
// have no counterpart there:
//
//	go test -run '^$' -bench . -benchmem ./limiter/local
//
// Each benchmark fails if a call decides differently from what it claims
// to measure, so a figure never describes the wrong path.

var benchCtx = context.Background()

// full returns an absolute limiter whose key "hot" holds a full window of
// 100 buckets (capacity 100 over 1 s, one unit every 10 ms).
func full(b *testing.B) *local.Absolute {
	b.Helper()
	clk := conformance.NewClock()
	a, err := local.NewAbsolute(limiter.WithClock(clk.Now), limiter.WithWindow(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close(benchCtx) })
	for i := 0; i < 100; i++ {
		if d, err := a.Inc(benchCtx, "hot", limiter.PerSecond(100), 1); err != nil || !d.Allowed {
			b.Fatalf("filling: Inc = %+v, %v", d, err)
		}
		clk.Advance(10 * time.Millisecond)
	}
	clk.Advance(-10 * time.Millisecond) // stay inside the window of the last bucket
	return a
}

// BenchmarkIncRefused: a refusal on a full window of 100 buckets, with its
// exact RetryAfter.
func BenchmarkIncRefused(b *testing.B) {
	a := full(b)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if d, _ := a.Inc(benchCtx, "hot", limiter.PerSecond(100), 1); d.Allowed || d.RetryAfter <= 0 {
			b.Fatalf("Inc on a full window = %+v, want a refusal with a RetryAfter", d)
		}
	}
}

// BenchmarkIsAllowed: IsAllowed on the same full window.
func BenchmarkIsAllowed(b *testing.B) {
	a := full(b)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if d, _ := a.IsAllowed(benchCtx, "hot"); d.Allowed || d.Limit != 100 {
			b.Fatalf("IsAllowed on a full window = %+v, want refused with Limit 100", d)
		}
	}
}

// BenchmarkGet: Get on the same full window.
func BenchmarkGet(b *testing.B) {
	a := full(b)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if u, _ := a.Get(benchCtx, "hot"); u.Used != 100 {
			b.Fatalf("Get on a full window = %+v, want Used 100", u)
		}
	}
}

// BenchmarkSuppressedOverload: the suppressed strategy above its soft
// capacity, where every call reads or computes the factor and draws (or is
// refused at the hard capacity); 10,000 keys, each first offered twice its
// soft capacity.
func BenchmarkSuppressedOverload(b *testing.B) {
	clk := conformance.NewClock()
	s, err := local.NewSuppressed(limiter.WithClock(clk.Now), limiter.WithWindow(time.Second), limiter.WithHardLimitFactor(4))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(benchCtx)
	const n = 10_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	rate := limiter.PerSecond(100) // soft 100, hard 400 per key
	for i := 0; i < 2*100; i++ {   // each key twice over its soft capacity
		for _, k := range keys {
			s.Inc(benchCtx, k, rate, 1)
		}
		clk.Advance(time.Millisecond)
	}
	b.ReportAllocs()
	b.ResetTimer()
	suppressed := 0
	for i := 0; i < b.N; i++ {
		d, _ := s.Inc(benchCtx, keys[i%n], rate, 1)
		if d.Suppressed {
			suppressed++
		}
	}
	if b.N >= n && suppressed == 0 {
		b.Fatal("no call was above the soft capacity")
	}
}

// BenchmarkIncAdmitted: an admitted Inc through the Limiter interface on
// a known key, both strategies (the suppressed one below its soft
// capacity, where the default source draws nothing), on one hot key and
// on 10,000 keys walked round-robin; for the profiles of the two paths
// side by side (the root package's TestLocalCompare puts them beside
// x/time/rate):
//
//	go test -run '^$' -bench IncAdmitted -count 10 ./limiter/local
func BenchmarkIncAdmitted(b *testing.B) {
	for _, n := range []int{1, 10_000} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = "user-" + strconv.Itoa(i)
		}
		for _, strategy := range []string{"absolute", "suppressed"} {
			b.Run("keys="+strconv.Itoa(n)+"/strategy="+strategy, func(b *testing.B) {
				var l limiter.Limiter
				var err error
				if strategy == "absolute" {
					l, err = local.NewAbsolute()
				} else {
					l, err = local.NewSuppressed(limiter.WithHardLimitFactor(1.5))
				}
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close(benchCtx)
				rate := limiter.PerSecond(1e9)
				for _, k := range keys {
					l.Inc(benchCtx, k, rate, 1)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if d, _ := l.Inc(benchCtx, keys[i%n], rate, 1); !d.Allowed {
						b.Fatalf("Inc = %+v, want an admission", d)
					}
				}
			})
		}
	}
}
