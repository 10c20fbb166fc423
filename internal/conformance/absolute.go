package conformance

import (
	"context"
	"math"
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
	// A bucket opened at s lives until s + W + B (1100 ms here): ResetAfter
	// and RetryAfter count to that instant.
	return []table{
		{name: "clock jumps a year ahead and back", opts: second,
			steps: clockJumpSteps(allowed, 1, rejected(10, 0, ms(2199), ms(2199)))},
		{name: "capacity reached exactly then rejection", opts: second, steps: []step{
			inc("k", ten, 4, allowed(10, 6, ms(1100))),
			after(ms(50), inc("k", ten, 6, allowed(10, 0, ms(1050)))),
			after(ms(10), inc("k", ten, 1, rejected(10, 0, ms(1040), ms(1040)))),
			get("k", limiter.Usage{Used: 10, Limit: 10}),
		}},
		{name: "batch all or nothing", opts: second, steps: []step{
			inc("k", ten, 9, allowed(10, 1, ms(1100))),
			inc("k", ten, 2, rejected(10, 1, ms(1100), ms(1100))),
			inc("k", ten, 1, allowed(10, 0, ms(1100))),
			get("k", limiter.Usage{Used: 10, Limit: 10}),
		}},
		{name: "never when n exceeds capacity", opts: second, steps: []step{
			inc("k", ten, 11, never(10, 10, 0)),
			get("k", limiter.Usage{}),
			inc("k", ten, 3, allowed(10, 7, ms(1100))),
			after(ms(200), inc("k", ten, 11, never(10, 7, ms(900)))),
			inc("k", ten, math.MaxInt64, never(10, 7, ms(900))),
			inc("k", ten, 7, allowed(10, 0, ms(1100))),
			get("k", limiter.Usage{Used: 10, Limit: 10}),
		}},
		{name: "retry after exact across buckets", opts: second, steps: []step{
			inc("k", ten, 3, allowed(10, 7, ms(1100))),
			after(ms(200), inc("k", ten, 3, allowed(10, 4, ms(1100)))),
			after(ms(200), inc("k", ten, 4, allowed(10, 0, ms(1100)))),
			after(ms(100), inc("k", ten, 1, rejected(10, 0, ms(600), ms(1000)))),
			inc("k", ten, 5, rejected(10, 0, ms(800), ms(1000))),
			inc("k", ten, 8, rejected(10, 0, ms(1000), ms(1000))),
			inc("k", ten, 10, rejected(10, 0, ms(1000), ms(1000))),
			isAllowed("k", rejected(10, 0, ms(600), ms(1000))),
		}},
		{name: "sliding window frees capacity bucket by bucket", opts: second, steps: []step{
			inc("k", ten, 3, allowed(10, 7, ms(1100))),
			after(ms(200), inc("k", ten, 3, allowed(10, 4, ms(1100)))),
			after(ms(200), inc("k", ten, 4, allowed(10, 0, ms(1100)))),
			after(ms(699), inc("k", ten, 1, rejected(10, 0, ms(1), ms(401)))), // t=1099
			after(ms(1), get("k", limiter.Usage{Used: 7, Limit: 10})),         // t=1100: bucket 0 gone
			inc("k", ten, 3, allowed(10, 0, ms(1100))),
			inc("k", ten, 1, rejected(10, 0, ms(200), ms(1100))),
			after(ms(199), inc("k", ten, 1, rejected(10, 0, ms(1), ms(901)))),
			after(ms(1), inc("k", ten, 3, allowed(10, 0, ms(1100)))),    // t=1300
			after(ms(200), get("k", limiter.Usage{Used: 6, Limit: 10})), // t=1500: bucket 400 gone
			after(ms(700), get("k", limiter.Usage{Used: 3, Limit: 10})), // t=2200: bucket 1100 gone
			after(ms(200), get("k", limiter.Usage{})),                   // t=2400: all gone
		}},
		{name: "coalescing joins the newest bucket", opts: []limiter.Option{
			limiter.WithWindow(time.Second), limiter.WithBucket(100 * time.Millisecond),
		}, steps: []step{
			inc("k", limiter.PerSecond(100), 1, allowed(100, 99, ms(1100))),
			after(ms(99), inc("k", limiter.PerSecond(100), 1, allowed(100, 98, ms(1001)))),  // joins 0
			after(ms(1), inc("k", limiter.PerSecond(100), 1, allowed(100, 97, ms(1100)))),   // opens 100
			after(ms(50), inc("k", limiter.PerSecond(100), 1, allowed(100, 96, ms(1050)))),  // joins 100
			after(ms(100), inc("k", limiter.PerSecond(100), 1, allowed(100, 95, ms(1100)))), // opens 250
			after(ms(849), get("k", limiter.Usage{Used: 5, Limit: 100})),
			after(ms(1), get("k", limiter.Usage{Used: 3, Limit: 100})),   // t=1100: bucket 0 (2 units) gone
			after(ms(100), get("k", limiter.Usage{Used: 1, Limit: 100})), // t=1200: bucket 100 gone
			after(ms(150), get("k", limiter.Usage{})),                    // t=1350: all gone, key forgotten
		}},
		{name: "a late unit is held for a whole window", opts: second, steps: []step{
			// One unit opens bucket 0, nine join it at its last millisecond:
			// all ten count until 1100, so the span [99, 1099) never holds
			// more than 10 (a rule of now − start < W would admit ten more
			// at 1000).
			inc("k", ten, 1, allowed(10, 9, ms(1100))),
			after(ms(99), inc("k", ten, 9, allowed(10, 0, ms(1001)))),
			after(ms(901), inc("k", ten, 1, rejected(10, 0, ms(100), ms(100)))), // t=1000
			after(ms(99), inc("k", ten, 1, rejected(10, 0, ms(1), ms(1)))),      // t=1099
			after(ms(1), inc("k", ten, 10, allowed(10, 0, ms(1100)))),           // t=1100
		}},
		{name: "latest rate wins", opts: second, steps: []step{
			inc("k", ten, 5, allowed(10, 5, ms(1100))),
			inc("k", limiter.PerSecond(5), 1, rejected(5, 0, ms(1100), ms(1100))),
			isAllowed("k", rejected(5, 0, ms(1100), ms(1100))),
			get("k", limiter.Usage{Used: 5, Limit: 5}),
			inc("k", limiter.PerSecond(20), 1, allowed(20, 14, ms(1100))),
			isAllowed("k", allowed(20, 14, ms(1100))),
			inc("k", limiter.PerMinute(600), 4, allowed(10, 0, ms(1100))),
			isAllowed("k", rejected(10, 0, ms(1100), ms(1100))),
		}},
		{name: "is allowed on unknown key", opts: second, steps: []step{
			isAllowed("nobody", unknown),
			get("nobody", limiter.Usage{}),
			isAllowed("nobody", unknown),
		}},
		{name: "is allowed writes nothing", opts: second, steps: []step{
			inc("k", ten, 9, allowed(10, 1, ms(1100))),
			isAllowed("k", allowed(10, 1, ms(1100))),
			isAllowed("k", allowed(10, 1, ms(1100))),
			inc("k", ten, 1, allowed(10, 0, ms(1100))),
			after(ms(300), isAllowed("k", rejected(10, 0, ms(800), ms(800)))),
			get("k", limiter.Usage{Used: 10, Limit: 10}),
		}},
		{name: "peek decides for one unit and writes nothing", opts: second, steps: []step{
			inc("k", ten, 0, allowed(10, 10, 0)),
			get("k", limiter.Usage{}),
			isAllowed("k", unknown),
			inc("k", ten, 10, allowed(10, 0, ms(1100))),
			after(ms(100), inc("k", ten, 0, rejected(10, 0, ms(1000), ms(1000)))),
			inc("k", limiter.PerSecond(11), 0, allowed(11, 1, ms(1000))),
			isAllowed("k", rejected(10, 0, ms(1000), ms(1000))), // the peek stored nothing
			get("k", limiter.Usage{Used: 10, Limit: 10}),
		}},
		{name: "reset forgets the key", opts: second, steps: []step{
			inc("k", ten, 10, allowed(10, 0, ms(1100))),
			inc("other", ten, 2, allowed(10, 8, ms(1100))),
			reset("k"),
			get("k", limiter.Usage{}),
			isAllowed("k", unknown),
			inc("k", ten, 10, allowed(10, 0, ms(1100))),
			get("other", limiter.Usage{Used: 2, Limit: 10}),
			reset("never-seen"),
		}},
		{name: "idle key is forgotten after the window and a bucket", opts: second, steps: []step{
			inc("k", ten, 2, allowed(10, 8, ms(1100))),
			after(ms(1099), isAllowed("k", allowed(10, 8, ms(1)))),
			after(ms(1), isAllowed("k", unknown)),
			get("k", limiter.Usage{}),
		}},
		{name: "keys are independent and escaped", opts: second, steps: []step{
			inc("user:1", ten, 10, allowed(10, 0, ms(1100))),
			inc("user%3A1", ten, 1, allowed(10, 9, ms(1100))),
			inc("{user:1}", ten, 2, allowed(10, 8, ms(1100))),
			inc("2001:db8::1", ten, 3, allowed(10, 7, ms(1100))),
			inc("a b\tc\n", ten, 4, allowed(10, 6, ms(1100))),
			inc("ünïcødé/✓", ten, 5, allowed(10, 5, ms(1100))),
			inc("user:1", ten, 1, rejected(10, 0, ms(1100), ms(1100))),
			get("user%3A1", limiter.Usage{Used: 1, Limit: 10}),
			get("2001:db8::1", limiter.Usage{Used: 3, Limit: 10}),
		}},
		{name: "0.3 per second over 60 s is 18", opts: []limiter.Option{limiter.WithWindow(time.Minute)}, steps: []step{
			inc("k", limiter.PerSecond(0.3), 18, allowed(18, 0, ms(60600))),
			inc("k", limiter.PerSecond(0.3), 1, rejected(18, 0, ms(60600), ms(60600))),
		}},
		{name: "0.7 per second over 10 s is 7", opts: []limiter.Option{limiter.WithWindow(10 * time.Second)}, steps: []step{
			inc("k", limiter.PerSecond(0.7), 8, never(7, 7, 0)),
			inc("k", limiter.PerSecond(0.7), 7, allowed(7, 0, ms(10100))),
		}},
		{name: "one millisecond window", opts: []limiter.Option{limiter.WithWindow(time.Millisecond)}, steps: []step{
			inc("k", limiter.PerSecond(2000), 2, allowed(2, 0, ms(2))),
			inc("k", limiter.PerSecond(2000), 1, rejected(2, 0, ms(2), ms(2))),
			after(ms(1), inc("k", limiter.PerSecond(2000), 1, rejected(2, 0, ms(1), ms(1)))),
			after(ms(1), inc("k", limiter.PerSecond(2000), 1, allowed(2, 1, ms(2)))),
		}},
	}
}

// RunAbsolute runs the absolute strategy's step tables, error checks and
// concurrency check against providers built by f.
func RunAbsolute(t *testing.T, f Factory) {
	runAbsolute(t, f, concurrentCalls)
}

// RunAbsoluteMini is RunAbsolute for miniredis, whose gopher-lua opens a
// Lua state per script call in the test's own process (one to two
// milliseconds of CPU under the race detector, 12 s for the concurrency
// check's 6,400 calls): the concurrency check's 64 goroutines make 25
// calls each, 1,600 against C = 1,000, still exactly C admitted, while
// the servers (a server, a cluster, a ring: the set-ups where a script
// could be split or interleaved) run the whole 6,400. The step tables,
// the errors and the guarantee's 5,000-call traces run whole.
func RunAbsoluteMini(t *testing.T, f Factory) {
	runAbsolute(t, f, concurrentCallsMini)
}

// The concurrency check: 64 goroutines share concurrentCalls Inc(1) on one
// key with C = 1,000 (concurrentCallsMini on miniredis).
const (
	concurrentGoroutines = 64
	concurrentCalls      = 6400
	concurrentCallsMini  = 1600
)

func runAbsolute(t *testing.T, f Factory, calls int) {
	t.Run("Tables", func(t *testing.T) { runTables(t, f, absoluteTables()) })
	t.Run("Errors", func(t *testing.T) { RunErrors(t, f) })
	t.Run("Concurrent", func(t *testing.T) { RunConcurrent(t, f, concurrentGoroutines, calls/concurrentGoroutines, 1000) })
	t.Run("Guarantee", func(t *testing.T) { RunGuarantee(t, f) })
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
