package cleanup_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redisprov"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

var ctx = context.Background()

// fixed is a clock that reads one instant.
type fixed time.Time

func (f fixed) Now() time.Time { return time.Time(f) }

// stepClock is a clock moved by hand, safe for concurrent use.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// strategies are the two providers, built the same way.
var strategies = []string{key.Absolute, key.Suppressed}

func newLimiter(t testing.TB, strategy string, c redisabs.Client, opts ...limiter.Option) limiter.Limiter {
	t.Helper()
	// No per-call timeout: the cleaner's tests need every write to land,
	// and a call shed on a loaded machine writes nothing.
	opts = append([]limiter.Option{limiter.WithTimeout(0)}, opts...)
	var l limiter.Limiter
	var err error
	if strategy == key.Absolute {
		l, err = redisabs.New(c, opts...)
	} else {
		l, err = redissup.New(c, opts...)
	}
	if err != nil {
		t.Fatalf("%s: New: %v", strategy, err)
	}
	t.Cleanup(func() { l.Close(ctx) })
	return l
}

func newCleaner(t testing.TB, c cleanup.Client, opts ...cleanup.Option) *cleanup.Cleaner {
	t.Helper()
	cl, err := cleanup.New(c, opts...)
	if err != nil {
		t.Fatalf("cleanup.New: %v", err)
	}
	t.Cleanup(func() {
		if err := cl.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return cl
}

func hashName(t testing.TB, prefix, k, strategy string) string {
	t.Helper()
	n, err := key.Name(prefix, k, strategy, key.Hash)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func redisNow(t testing.TB, c redis.Cmdable) time.Time {
	t.Helper()
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now
}

// parallel runs f(i) for i in [0, n) on 8 goroutines and fails t on the
// first error.
func parallel(t testing.TB, n int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// incAll makes one Inc of 1 + i%3 units on every key, all admitted.
func incAll(t testing.TB, l limiter.Limiter, keys []string) {
	t.Helper()
	parallel(t, len(keys), func(i int) error {
		d, err := l.Inc(ctx, keys[i], limiter.PerMinute(1000), int64(1+i%3))
		if err != nil || !d.Allowed {
			return fmt.Errorf("Inc(%q) = %+v, %v; want allowed", keys[i], d, err)
		}
		return nil
	})
}

// pipe runs f for every key in pipelines of 1,000 and returns the commands.
func pipe[C redis.Cmder](t testing.TB, c redis.Cmdable, keys []string, f func(p redis.Pipeliner, k string) C) []C {
	t.Helper()
	out := make([]C, 0, len(keys))
	for i := 0; i < len(keys); i += 1000 {
		p := c.Pipeline()
		for _, k := range keys[i:min(i+1000, len(keys))] {
			out = append(out, f(p, k))
		}
		if _, err := p.Exec(ctx); err != nil && err != redis.Nil {
			t.Fatalf("pipeline: %v", err)
		}
	}
	return out
}

// hashView is a limiter hash taken apart in Go, independently of the
// scripts (docs/data-model.md).
type hashView struct {
	ok               bool // the meta fields were readable
	newest, oldest   int64
	ncount, ndec     int64
	used, declined   int64 // the stored totals u and x
	offered, refused map[int64]int64
}

func viewOf(strategy string, f map[string]string) hashView {
	v := hashView{offered: map[int64]int64{}, refused: map[int64]int64{}}
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	if strategy == key.Absolute {
		parts := strings.Fields(f["m"])
		if len(parts) != 5 {
			return v
		}
		v.used, v.oldest, v.newest, v.ncount = num(parts[1]), num(parts[2]), num(parts[3]), num(parts[4])
	} else {
		// "m" = "<u> <x> <o> <n> <nc> <nd>"
		parts := strings.Fields(f["m"])
		if len(parts) != 6 {
			return v
		}
		v.used, v.declined, v.oldest = num(parts[0]), num(parts[1]), num(parts[2])
		v.newest, v.ncount, v.ndec = num(parts[3]), num(parts[4]), num(parts[5])
	}
	v.ok = true
	for name, val := range f {
		switch {
		case name[0] >= '0' && name[0] <= '9':
			cnt, _ := redisprov.BucketValue(num(val))
			v.offered[num(name)] = cnt
		case name[0] == 'd' && strategy == key.Suppressed:
			v.refused[num(name[1:])] = num(val)
		}
	}
	return v
}

// dead returns the starts of the stored buckets dead at now.
func (v hashView) dead(now, span int64) []int64 {
	var out []int64
	for st := range v.offered {
		if now-st >= span {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// usage returns the accepted and declined units of the live buckets at now.
func (v hashView) usage(now, span int64) (used, declined int64) {
	if !v.ok || now-v.newest >= span {
		return 0, 0
	}
	used, declined = v.ncount, v.ndec
	for st, n := range v.offered {
		if now-st < span {
			used += n
			declined += v.refused[st]
		}
	}
	return used - declined, declined
}

// consistent reports whether the stored totals are what the stored buckets
// hold and o is the oldest stored start, as the providers keep them.
func (v hashView) consistent() error {
	u, x, o := v.ncount, v.ndec, v.newest
	for st, n := range v.offered {
		u += n
		x += v.refused[st]
		o = min(o, st)
	}
	if u != v.used || x != v.declined || o != v.oldest {
		return fmt.Errorf("stored u %d, x %d, o %d; buckets say u %d, x %d, o %d", v.used, v.declined, v.oldest, u, x, o)
	}
	return nil
}
