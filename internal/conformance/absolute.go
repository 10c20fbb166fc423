package conformance

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// W = 1 s and B = 100 ms unless a table says otherwise; 10/s gives C = 10.
var (
	second = []limiter.Option{limiter.WithWindow(time.Second), limiter.WithBucket(100 * time.Millisecond)}
	ten    = limiter.PerSecond(10)
)

func absoluteTables() []table {
	return []table{
		{name: "capacity reached exactly then rejection", opts: second, steps: []step{
			inc("k", ten, 4, allowed(10, 6, ms(1000))),
			after(ms(50), inc("k", ten, 6, allowed(10, 0, ms(950)))),
			after(ms(10), inc("k", ten, 1, rejected(10, 0, ms(940), ms(940)))),
			get("k", limiter.Usage{Used: 10, Limit: 10}),
		}},
		{name: "batch all or nothing", opts: second, steps: []step{
			inc("k", ten, 9, allowed(10, 1, ms(1000))),
			inc("k", ten, 2, rejected(10, 1, ms(1000), ms(1000))),
			inc("k", ten, 1, allowed(10, 0, ms(1000))),
			get("k", limiter.Usage{Used: 10, Limit: 10}),
		}},
		{name: "never when n exceeds capacity", opts: second, steps: []step{
			inc("k", ten, 11, never(10, 10, 0)),
			get("k", limiter.Usage{}),
			inc("k", ten, 3, allowed(10, 7, ms(1000))),
			after(ms(200), inc("k", ten, 11, never(10, 7, ms(800)))),
			inc("k", ten, 7, allowed(10, 0, ms(1000))),
		}},
		{name: "retry after exact across buckets", opts: second, steps: []step{
			inc("k", ten, 3, allowed(10, 7, ms(1000))),
			after(ms(200), inc("k", ten, 3, allowed(10, 4, ms(1000)))),
			after(ms(200), inc("k", ten, 4, allowed(10, 0, ms(1000)))),
			after(ms(100), inc("k", ten, 1, rejected(10, 0, ms(500), ms(900)))),
			inc("k", ten, 5, rejected(10, 0, ms(700), ms(900))),
			inc("k", ten, 8, rejected(10, 0, ms(900), ms(900))),
			inc("k", ten, 10, rejected(10, 0, ms(900), ms(900))),
			isAllowed("k", rejected(10, 0, ms(500), ms(900))),
		}},
		{name: "sliding window frees capacity bucket by bucket", opts: second, steps: []step{
			inc("k", ten, 3, allowed(10, 7, ms(1000))),
			after(ms(200), inc("k", ten, 3, allowed(10, 4, ms(1000)))),
			after(ms(200), inc("k", ten, 4, allowed(10, 0, ms(1000)))),
			after(ms(599), inc("k", ten, 1, rejected(10, 0, ms(1), ms(401)))),
			after(ms(1), get("k", limiter.Usage{Used: 7, Limit: 10})),
			inc("k", ten, 3, allowed(10, 0, ms(1000))),
			inc("k", ten, 1, rejected(10, 0, ms(200), ms(1000))),
			after(ms(199), inc("k", ten, 1, rejected(10, 0, ms(1), ms(801)))),
			after(ms(1), inc("k", ten, 3, allowed(10, 0, ms(1000)))),
			after(ms(200), get("k", limiter.Usage{Used: 6, Limit: 10})),
			after(ms(600), get("k", limiter.Usage{Used: 3, Limit: 10})),
			after(ms(200), get("k", limiter.Usage{})),
		}},
		{name: "coalescing joins the newest bucket", opts: []limiter.Option{
			limiter.WithWindow(time.Second), limiter.WithBucket(100 * time.Millisecond),
		}, steps: []step{
			inc("k", limiter.PerSecond(100), 1, allowed(100, 99, ms(1000))),
			after(ms(99), inc("k", limiter.PerSecond(100), 1, allowed(100, 98, ms(901)))),   // joins 0
			after(ms(1), inc("k", limiter.PerSecond(100), 1, allowed(100, 97, ms(1000)))),   // opens 100
			after(ms(50), inc("k", limiter.PerSecond(100), 1, allowed(100, 96, ms(950)))),   // joins 100
			after(ms(100), inc("k", limiter.PerSecond(100), 1, allowed(100, 95, ms(1000)))), // opens 250
			after(ms(749), get("k", limiter.Usage{Used: 5, Limit: 100})),
			after(ms(1), get("k", limiter.Usage{Used: 3, Limit: 100})),   // t=1000: bucket 0 (2 units) gone
			after(ms(100), get("k", limiter.Usage{Used: 1, Limit: 100})), // t=1100: bucket 100 gone
			after(ms(150), get("k", limiter.Usage{})),                    // t=1250: all gone, key forgotten
		}},
		{name: "latest rate wins", opts: second, steps: []step{
			inc("k", ten, 5, allowed(10, 5, ms(1000))),
			inc("k", limiter.PerSecond(5), 1, rejected(5, 0, ms(1000), ms(1000))),
			isAllowed("k", rejected(5, 0, ms(1000), ms(1000))),
			get("k", limiter.Usage{Used: 5, Limit: 5}),
			inc("k", limiter.PerSecond(20), 1, allowed(20, 14, ms(1000))),
			isAllowed("k", allowed(20, 14, ms(1000))),
			inc("k", limiter.PerMinute(600), 4, allowed(10, 0, ms(1000))),
			isAllowed("k", rejected(10, 0, ms(1000), ms(1000))),
		}},
		{name: "is allowed on unknown key", opts: second, steps: []step{
			isAllowed("nobody", unknown),
			get("nobody", limiter.Usage{}),
			isAllowed("nobody", unknown),
		}},
		{name: "is allowed writes nothing", opts: second, steps: []step{
			inc("k", ten, 9, allowed(10, 1, ms(1000))),
			isAllowed("k", allowed(10, 1, ms(1000))),
			isAllowed("k", allowed(10, 1, ms(1000))),
			inc("k", ten, 1, allowed(10, 0, ms(1000))),
			after(ms(300), isAllowed("k", rejected(10, 0, ms(700), ms(700)))),
			get("k", limiter.Usage{Used: 10, Limit: 10}),
		}},
		{name: "peek decides for one unit and writes nothing", opts: second, steps: []step{
			inc("k", ten, 0, allowed(10, 10, 0)),
			get("k", limiter.Usage{}),
			isAllowed("k", unknown),
			inc("k", ten, 10, allowed(10, 0, ms(1000))),
			after(ms(100), inc("k", ten, 0, rejected(10, 0, ms(900), ms(900)))),
			inc("k", limiter.PerSecond(11), 0, allowed(11, 1, ms(900))),
			isAllowed("k", rejected(10, 0, ms(900), ms(900))), // the peek stored nothing
			get("k", limiter.Usage{Used: 10, Limit: 10}),
		}},
		{name: "reset forgets the key", opts: second, steps: []step{
			inc("k", ten, 10, allowed(10, 0, ms(1000))),
			inc("other", ten, 2, allowed(10, 8, ms(1000))),
			reset("k"),
			get("k", limiter.Usage{}),
			isAllowed("k", unknown),
			inc("k", ten, 10, allowed(10, 0, ms(1000))),
			get("other", limiter.Usage{Used: 2, Limit: 10}),
			reset("never-seen"),
		}},
		{name: "idle key is forgotten after the window", opts: second, steps: []step{
			inc("k", ten, 2, allowed(10, 8, ms(1000))),
			after(ms(999), isAllowed("k", allowed(10, 8, ms(1)))),
			after(ms(1), isAllowed("k", unknown)),
			get("k", limiter.Usage{}),
		}},
		{name: "keys are independent and escaped", opts: second, steps: []step{
			inc("user:1", ten, 10, allowed(10, 0, ms(1000))),
			inc("user%3A1", ten, 1, allowed(10, 9, ms(1000))),
			inc("{user:1}", ten, 2, allowed(10, 8, ms(1000))),
			inc("2001:db8::1", ten, 3, allowed(10, 7, ms(1000))),
			inc("a b\tc\n", ten, 4, allowed(10, 6, ms(1000))),
			inc("ünïcødé/✓", ten, 5, allowed(10, 5, ms(1000))),
			inc("user:1", ten, 1, rejected(10, 0, ms(1000), ms(1000))),
			get("user%3A1", limiter.Usage{Used: 1, Limit: 10}),
			get("2001:db8::1", limiter.Usage{Used: 3, Limit: 10}),
		}},
		{name: "0.3 per second over 60 s is 18", opts: []limiter.Option{limiter.WithWindow(time.Minute)}, steps: []step{
			inc("k", limiter.PerSecond(0.3), 18, allowed(18, 0, ms(60000))),
			inc("k", limiter.PerSecond(0.3), 1, rejected(18, 0, ms(60000), ms(60000))),
		}},
		{name: "0.7 per second over 10 s is 7", opts: []limiter.Option{limiter.WithWindow(10 * time.Second)}, steps: []step{
			inc("k", limiter.PerSecond(0.7), 8, never(7, 7, 0)),
			inc("k", limiter.PerSecond(0.7), 7, allowed(7, 0, ms(10000))),
		}},
		{name: "one millisecond window", opts: []limiter.Option{limiter.WithWindow(time.Millisecond)}, steps: []step{
			inc("k", limiter.PerSecond(2000), 2, allowed(2, 0, ms(1))),
			inc("k", limiter.PerSecond(2000), 1, rejected(2, 0, ms(1), ms(1))),
			after(ms(1), inc("k", limiter.PerSecond(2000), 1, allowed(2, 1, ms(1)))),
		}},
	}
}

// RunAbsolute runs the absolute strategy's step tables, error checks and
// concurrency check against providers built by f.
func RunAbsolute(t *testing.T, f Factory) {
	t.Run("Tables", func(t *testing.T) { runTables(t, f, absoluteTables()) })
	t.Run("Errors", func(t *testing.T) { RunErrors(t, f) })
	t.Run("Concurrent", func(t *testing.T) { RunConcurrent(t, f, 64, 100, 1000) })
}

// RunConcurrent has g goroutines each call Inc(1) n times on one key whose
// capacity is c, and requires exactly min(c, g×n) admissions.
func RunConcurrent(t *testing.T, f Factory, g, n int, c int64) {
	t.Helper()
	l := f(t, NewClock(), limiter.WithWindow(time.Minute))
	defer closeLimiter(t, l)
	rate := limiter.PerMinute(float64(c))
	var admitted, errs atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < n; j++ {
				d, err := l.Inc(context.Background(), "hot", rate, 1)
				if err != nil {
					errs.Add(1)
					continue
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	want := min(c, int64(g*n))
	if errs.Load() != 0 || admitted.Load() != want {
		t.Fatalf("%d goroutines × %d Inc(1) with C = %d: admitted %d (errors %d), want exactly %d",
			g, n, c, admitted.Load(), errs.Load(), want)
	}
	u, err := l.Get(context.Background(), "hot")
	if err != nil || u.Used != want {
		t.Fatalf("Get(hot) = %+v, %v; want Used %d", u, err, want)
	}
}
