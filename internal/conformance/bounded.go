package conformance

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/limiter"
)

// Bounds of RunBoundedWork and RunBoundedPing (docs/algorithms.md, Bounded
// work).
const (
	// BoundedBudget bounds the Redis time of one script call at the
	// largest W/B accepted (settings.MaxBuckets), in its worst state: the
	// fastest of five runs. The design target is about 1 ms, which the
	// measured worst meets on a quiet machine (docs/benchmarks.md, Bounded
	// work). A loaded machine (packages' suites in parallel under the race
	// detector, two cores) stretches a millisecond script several times
	// over (6.8 ms in one CI run), and stretches long calls more than
	// short ones, so a state over the budget fails only if it is also
	// over BoundedRatio times the reference read measured beside it. The
	// bound catches a script whose worst state grows faster than the
	// hash, which costs tens of milliseconds at this W/B and hundreds of
	// reference reads, not a loaded machine.
	BoundedBudget = 5 * time.Millisecond
	// BoundedRatio bounds a worst state's fastest run against the fastest
	// of the reference reads run on the same server just before each of
	// its runs: a script that reads the key's hash (HGETALL) and touches
	// every field once, the least any walk of the whole window costs. The
	// worst state measures 3–4 references on a quiet machine.
	BoundedRatio = 40
	// BoundedNoise is the most four of a state's five runs may take,
	// scheduling noise of a loaded machine included. One run may take
	// longer: the five runs do the same work on the same restored state,
	// and a redis-server descheduled for one of them (82 ms in one run of
	// make test with four packages on two cores) says nothing about the
	// script; a state whose work varies between runs fails it twice.
	BoundedNoise = 50 * time.Millisecond
	// BoundedPing is how long 99% of the PINGs from another client may wait
	// while four clients run worst-case refusals; BoundedPingMax bounds
	// the slowest, scheduling noise included. Both are loose, over ten
	// times what was measured (p99 up to 8.5 ms, the slowest 55 ms on a
	// shared 2-core machine at load 5; docs/benchmarks.md, Bounded work),
	// so the test catches a script that holds Redis, not a loaded machine.
	BoundedPing    = 100 * time.Millisecond
	BoundedPingMax = 600 * time.Millisecond
)

// RedisFactory builds a Redis provider on c; opts come last and win.
type RedisFactory func(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter

// boundedKey is a key filled to the worst state at W/B = settings.MaxBuckets.
type boundedKey struct {
	l          limiter.Limiter
	clk        *Clock
	rate       limiter.Rate
	c, h       int64 // the capacity (soft) and the hard capacity
	w, b       time.Duration
	keys       []string // "k", and for the suppressed strategy "d" with declined fields
	redisKeyOf map[string]string
}

// fillBounded starts the limiter on a private server whose SLOWLOG records
// every command, and fills each key with one unit per bucket for a whole
// window: W/B + 1 live buckets holding C = W/B + 1 units, the newest
// opened now. The absolute strategy runs W = 500 ms, B = 1 ms; the
// suppressed one W = 1.5 s, B = 3 ms (the factor's recent span is then
// 1 s, shorter than W), S = W/B + 1, H = 2S, no factor cache and a draw of
// 0, so that a call between S and H is refused and walks for RetryAfter.
// Key "d" also gets a refused call of H units in every bucket, so that
// every bucket has its declined field too (2 (W/B + 1) bucket fields).
func fillBounded(t *testing.T, s Strategy, f RedisFactory) (*boundedKey, *redis.Client) {
	t.Helper()
	srv := redistest.StartServer(t, "--slowlog-log-slower-than", "0", "--slowlog-max-len", "1024")
	c := redis.NewClient(srv.Options())
	t.Cleanup(func() { c.Close() })
	n := int64(settings.MaxBuckets)
	bk := &boundedKey{clk: NewClock(), c: n + 1, h: 2 * (n + 1), keys: []string{"k"}}
	opts := []limiter.Option{limiter.WithClock(bk.clk.Now)}
	if s == AbsoluteStrategy {
		bk.w, bk.b = time.Duration(n)*time.Millisecond, time.Millisecond
	} else {
		bk.w, bk.b = time.Duration(3*n)*time.Millisecond, 3*time.Millisecond
		bk.keys = append(bk.keys, "d")
		opts = append(opts, limiter.WithHardLimitFactor(2), limiter.WithSuppressionCache(0),
			limiter.WithRandom(func() float64 { return 0 }))
	}
	bk.rate = limiter.Every(float64(bk.c), bk.w)
	bk.l = f(t, c, append(opts, limiter.WithWindow(bk.w), limiter.WithBucket(bk.b))...)
	t.Cleanup(func() { bk.l.Close(context.Background()) })
	ctx := context.Background()
	for i := int64(0); i <= n; i++ {
		if i > 0 {
			bk.clk.Advance(bk.b)
		}
		for _, k := range bk.keys {
			if d, err := bk.l.Inc(ctx, k, bk.rate, 1); err != nil || !d.Allowed {
				t.Fatalf("fill: Inc(%q, 1) = %s, %v; want allowed", k, Format(d), err)
			}
			if k == "d" {
				if d, err := bk.l.Inc(ctx, k, bk.rate, bk.h); err != nil || d.Allowed {
					t.Fatalf("fill: Inc(%q, %d) = %s, %v; want refused", k, bk.h, Format(d), err)
				}
			}
		}
	}
	// Each key is one hash; the private server holds nothing else.
	bk.redisKeyOf = map[string]string{}
	all, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range bk.keys {
		for _, rk := range all {
			if strings.Contains(rk, "{"+k+"}") {
				bk.redisKeyOf[k] = rk
			}
		}
		if bk.redisKeyOf[k] == "" {
			t.Fatalf("no Redis key for %q among %q", k, all)
		}
	}
	return bk, c
}

// referenceRead is the least a walk of a whole window costs: read the
// key's hash and touch every field once (RunBoundedWork's BoundedRatio).
var referenceRead = redis.NewScript(`
local h = redis.call('HGETALL', KEYS[1])
local n = 0
for i = 2, #h, 2 do n = n + #h[i] end
return n`)

// scriptTimes returns the durations of the script calls (EVALSHA, EVAL) in
// the slow log, and empties it.
func scriptTimes(t *testing.T, c *redis.Client) []time.Duration {
	t.Helper()
	ctx := context.Background()
	logs, err := c.SlowLogGet(ctx, -1).Result()
	if err != nil {
		t.Fatalf("SLOWLOG GET: %v", err)
	}
	if err := c.Do(ctx, "SLOWLOG", "RESET").Err(); err != nil {
		t.Fatalf("SLOWLOG RESET: %v", err)
	}
	var out []time.Duration
	for _, l := range logs {
		if len(l.Args) > 0 && (strings.EqualFold(l.Args[0], "evalsha") || strings.EqualFold(l.Args[0], "eval")) {
			out = append(out, l.Duration)
		}
	}
	return out
}

// RunBoundedWork drives every worst state of a Redis provider of strategy
// s at the largest W/B accepted and checks each script call's Redis time in
// SLOWLOG: refusals with n = 2, C/2, C (and H) on a key saturated one unit
// per bucket, whose RetryAfter walks up to the whole window; a request that
// can never fit; peeks and IsAllowed; Get; the suppressed factor over a
// full window; and IsAllowed, Get and Inc once half of the buckets, then
// all but the newest, have died. Each state is restored (DUMP, RESTORE)
// and run five times, each after a reference read of the hash: the fastest
// run must be within BoundedBudget or BoundedRatio reference reads, and
// all but the slowest within BoundedNoise.
func RunBoundedWork(t *testing.T, s Strategy, f RedisFactory) {
	bk, c := fillBounded(t, s, f)
	ctx := context.Background()
	type call struct {
		name string
		run  func(k string) error
	}
	incN := func(name string, n int64) call {
		return call{name, func(k string) error { _, err := bk.l.Inc(ctx, k, bk.rate, n); return err }}
	}
	isAllowed := call{"IsAllowed", func(k string) error { _, err := bk.l.IsAllowed(ctx, k); return err }}
	get := call{"Get", func(k string) error { _, err := bk.l.Get(ctx, k); return err }}
	full := []call{incN("Inc(1)", 1), incN("Inc(2)", 2), incN("Inc(C/2)", bk.c/2), incN("Inc(C)", bk.c),
		incN("Inc(C+1)", bk.c+1), incN("Inc(0)", 0), isAllowed, get}
	if s == SuppressedStrategy {
		full = append(full, incN("Inc(H)", bk.h), incN("Inc(H+1)", bk.h+1))
	}
	dying := []call{isAllowed, get, incN("Inc(0)", 0), incN("Inc(1)", 1), incN("Inc(C)", bk.c)}
	var worst, worstRef time.Duration
	var worstState string
	var typical []time.Duration
	measure := func(phase string, calls []call) {
		for _, k := range bk.keys {
			rk := bk.redisKeyOf[k]
			dump, err := c.Dump(ctx, rk).Result()
			if err != nil {
				t.Fatalf("DUMP %s: %v", rk, err)
			}
			for _, cl := range calls {
				var runs, refs []time.Duration
				for i := 0; i < 5; i++ {
					if err := c.RestoreReplace(ctx, rk, 0, dump).Err(); err != nil {
						t.Fatalf("RESTORE %s: %v", rk, err)
					}
					scriptTimes(t, c)
					if err := referenceRead.Run(ctx, c, []string{rk}).Err(); err != nil {
						t.Fatalf("reference read of %s: %v", rk, err)
					}
					if d := scriptTimes(t, c); len(d) > 0 {
						refs = append(refs, slices.Max(d))
					}
					if err := cl.run(k); err != nil {
						t.Fatalf("%s: %s on %q: %v", phase, cl.name, k, err)
					}
					// One script call; two when the server answered its
					// EVALSHA with NOSCRIPT and the script ran by EVAL.
					d := scriptTimes(t, c)
					if len(d) == 0 || len(d) > 2 {
						t.Fatalf("%s: %s on %q: %d script calls in SLOWLOG, want 1", phase, cl.name, k, len(d))
					}
					runs = append(runs, slices.Max(d))
				}
				slices.Sort(runs)
				ref := slices.Min(refs)
				state := phase + ", key " + k + ": " + cl.name
				typical = append(typical, runs[2])
				if runs[0] > worst {
					worst, worstState, worstRef = runs[0], state, ref
				}
				if runs[0] > BoundedBudget && runs[0] > BoundedRatio*ref {
					t.Errorf("%s: Redis time %v (reference read %v); want the fastest within %v or %d references",
						state, runs, ref, BoundedBudget, BoundedRatio)
				}
				if runs[3] > BoundedNoise {
					t.Errorf("%s: Redis time %v, want four of five runs within %v", state, runs, BoundedNoise)
				}
			}
		}
	}
	measure("full window", full)
	bk.clk.Advance(bk.w / 2)
	measure("half the buckets dead", dying)
	bk.clk.Advance(bk.w / 2)
	measure("all but the newest dead", dying)
	slices.Sort(typical)
	t.Logf("W/B = %d: %d states; Redis time per call: median %v, worst (fastest of 5) %v in %q, %.1f reference reads (%v)",
		settings.MaxBuckets, len(typical), typical[len(typical)/2], worst, worstState,
		float64(worst)/float64(max(worstRef, 1)), worstRef)
}

// RunBoundedPing runs four clients that refuse in the worst state (a
// saturated key at the largest W/B, each refusal's RetryAfter walking the
// whole window) for about two seconds, while another client sends PING
// every 5 ms: 99% of the PINGs must be answered within BoundedPing, all
// within BoundedPingMax, and no script call may take over BoundedNoise.
func RunBoundedPing(t *testing.T, s Strategy, f RedisFactory) {
	bk, c := fillBounded(t, s, f)
	ctx := context.Background()
	// Absolute: C units on key "k", refused, RetryAfter walks every bucket.
	// Suppressed: C - 1 units on key "d", between S and H: a factor over
	// the whole window (the declined units make it near 1), refused, and
	// RetryAfter walks all but one bucket.
	k, n := "k", bk.c
	if s == SuppressedStrategy {
		k, n = "d", bk.c-1
	}
	if d, err := bk.l.Inc(ctx, k, bk.rate, n); err != nil || d.Allowed || d.RetryAfter < bk.w/2 {
		t.Fatalf("Inc(%q, %d) = %s, %v; want refused with RetryAfter over %v", k, n, Format(d), err, bk.w/2)
	}
	scriptTimes(t, c)
	const run = 2 * time.Second
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	refusals := 0
	var failed error
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := 0
			defer func() { mu.Lock(); refusals += done; mu.Unlock() }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := bk.l.Inc(ctx, k, bk.rate, n)
				if err != nil || d.Allowed {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				done++
			}
		}()
	}
	pinger := redis.NewClient(c.Options())
	defer pinger.Close()
	var pings []time.Duration
	deadline := time.Now().Add(run)
	for time.Now().Before(deadline) {
		start := time.Now()
		if err := pinger.Ping(ctx).Err(); err != nil {
			t.Errorf("PING: %v", err)
		}
		pings = append(pings, time.Since(start))
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if failed != nil {
		t.Fatalf("a refuser stopped: %v", failed)
	}
	slices.Sort(pings)
	scripts := scriptTimes(t, c) // the latest 1024 script calls
	slices.Sort(scripts)
	t.Logf("W/B = %d, 4 refusers, %d refusals in %v; %d PINGs: median %v, p99 %v, max %v; script calls (latest %d): median %v, max %v",
		settings.MaxBuckets, refusals, run, len(pings), pings[len(pings)/2], pings[len(pings)*99/100], pings[len(pings)-1],
		len(scripts), scripts[len(scripts)/2], scripts[len(scripts)-1])
	if refusals < 100 {
		t.Errorf("%d refusals in %v, want the refusers to keep Redis busy", refusals, run)
	}
	if p := pings[len(pings)*99/100]; p > BoundedPing {
		t.Errorf("PING p99 %v, want within %v", p, BoundedPing)
	}
	if m := pings[len(pings)-1]; m > BoundedPingMax {
		t.Errorf("slowest PING %v, want within %v", m, BoundedPingMax)
	}
	if m := scripts[len(scripts)-1]; m > BoundedNoise {
		t.Errorf("slowest script call %v, want within %v", m, BoundedNoise)
	}
}
