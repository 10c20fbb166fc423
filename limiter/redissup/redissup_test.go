package redissup_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
	"github.com/sluice-go/sluice/limiter/redissup"
)

var ctx = context.Background()

func mustInc(t testing.TB, l limiter.Limiter, k string, rate limiter.Rate, n int64) limiter.Decision {
	t.Helper()
	d, err := l.Inc(ctx, k, rate, n)
	if err != nil {
		t.Fatalf("Inc(%q, %d): %v", k, n, err)
	}
	return d
}

func mustGet(t testing.TB, l limiter.Limiter, k string) limiter.Usage {
	t.Helper()
	u, err := l.Get(ctx, k)
	if err != nil {
		t.Fatalf("Get(%q): %v", k, err)
	}
	return u
}

// hashOf is the Redis key of k's suppressed hash.
func hashOf(t testing.TB, prefix, k string) string {
	t.Helper()
	h, err := key.Name(prefix, k, key.Suppressed, key.Hash)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// miniAt returns a miniredis, a client and a fake clock that miniredis
// follows (TIME and TTLs).
func miniAt(t testing.TB) (*miniredis.Miniredis, *redis.Client, *conformance.Clock) {
	t.Helper()
	mr, c := redistest.Mini(t)
	clk := conformance.NewClock()
	clk.Drive(mr)
	return mr, c, clk
}

func TestNewRejectsNilClient(t *testing.T) {
	var typed *redis.Client
	for _, c := range []struct {
		name   string
		client redissup.Client
	}{{"nil interface", nil}, {"typed nil", typed}} {
		if _, err := redissup.New(c.client); !errors.Is(err, limiter.ErrInvalidConfig) {
			t.Errorf("New(%s) error = %v, want ErrInvalidConfig", c.name, err)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	_, c := redistest.Mini(t)
	conformance.ConfigErrors(t, func(opts ...limiter.Option) error {
		l, err := redissup.New(c, opts...)
		if err == nil {
			l.Close(ctx)
		} else if !strings.HasPrefix(err.Error(), "redissup: ") {
			t.Errorf("New error %q lacks the package prefix", err)
		}
		return err
	})
}

// TestErrorsMatchLocal feeds both providers the same bad input and requires
// the same sentinel (or none) from each, and the same number of draws: a
// call refused for bad input draws nothing.
func TestErrorsMatchLocal(t *testing.T) {
	_, c := redistest.Mini(t)
	rs, ls := conformance.NewSeq(0.5), conformance.NewSeq(0.5)
	r := newLimiter(t, c, limiter.WithWindow(time.Second), limiter.WithHardLimitFactor(1.5), limiter.WithRandom(rs.Float64))
	l, err := local.NewSuppressed(limiter.WithWindow(time.Second), limiter.WithHardLimitFactor(1.5), limiter.WithRandom(ls.Float64))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	sentinels := []error{key.ErrInvalid, limiter.ErrInvalidRate, limiter.ErrCapacityTooSmall,
		limiter.ErrInvalidCost, limiter.ErrInvalidConfig, limiter.ErrClosed}
	long := strings.Repeat("k", key.MaxLen+1)
	ok := limiter.PerSecond(10)
	cases := []struct {
		name string
		key  string
		rate limiter.Rate
		n    int64
	}{
		{"empty key and bad cost", "", ok, -1},
		{"long key and bad rate", long, limiter.Rate{}, 1},
		{"bad cost and bad rate", "k", limiter.PerSecond(-1), -1},
		{"bad rate", "k", limiter.PerSecond(0), 1},
		{"small capacity", "k", limiter.PerSecond(0.1), 0},
		{"largest cost is fine", "k", ok, math.MaxInt64},
		{"hard capacity too big", "k", limiter.PerSecond(float64(int64(1) << 50)), 1},
		{"longest key is fine", strings.Repeat("k", key.MaxLen), ok, 1},
	}
	compare := func(name string, er, el error) {
		t.Helper()
		if (er == nil) != (el == nil) {
			t.Errorf("%s: redissup error %v, local error %v", name, er, el)
		}
		for _, s := range sentinels {
			if errors.Is(er, s) != errors.Is(el, s) {
				t.Errorf("%s: errors.Is(%v, %v) = %v for redissup, %v for local (%v)", name, er, s, errors.Is(er, s), errors.Is(el, s), el)
			}
		}
		if er != nil && !strings.HasPrefix(er.Error(), "redissup: ") {
			t.Errorf("%s: error %q lacks the package prefix", name, er)
		}
	}
	run := func() {
		for _, c := range cases {
			_, er := r.Inc(ctx, c.key, c.rate, c.n)
			_, el := l.Inc(ctx, c.key, c.rate, c.n)
			compare("Inc "+c.name, er, el)
			if rs.Draws() != ls.Draws() {
				t.Errorf("Inc %s: redissup drew %d numbers, local %d", c.name, rs.Draws(), ls.Draws())
			}
			_, er = r.IsAllowed(ctx, c.key)
			_, el = l.IsAllowed(ctx, c.key)
			compare("IsAllowed "+c.name, er, el)
			_, er = r.Get(ctx, c.key)
			_, el = l.Get(ctx, c.key)
			compare("Get "+c.name, er, el)
			compare("Reset "+c.name, r.Reset(ctx, c.key), l.Reset(ctx, c.key))
		}
	}
	run()
	if rs.Draws() != 2 {
		t.Errorf("valid Incs drew %d numbers, want 2", rs.Draws())
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	run() // closed: ErrClosed first, as local
	if err := r.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestHashLayout pins the fields of docs/data-model.md step by step: the
// meta fields "m" (totals, oldest start, the newest bucket) and "k"
// (capacities, cached factor, the RetryAfter cursor), older buckets as
// fields, declined counts, the deletion of dead buckets and of a dead key.
func TestHashLayout(t *testing.T) {
	const w, b = time.Second, 100 * time.Millisecond
	mr, c, clk := miniAt(t)
	prefix := redistest.Prefix(t)
	l := newLimiter(t, c, limiter.WithPrefix(prefix), limiter.WithWindow(w), limiter.WithBucket(b),
		limiter.WithHardLimitFactor(1.5), limiter.WithRandom(conformance.NewSeq(0.5).Float64))
	h := hashOf(t, prefix, "k")
	rate := limiter.PerSecond(10) // S = 10, H = 15
	t0 := conformance.Start.UnixMilli()
	// meta is "m": u x o n nc nd.
	meta := func(u, x, o, n, nc, nd int64) string { return fmt.Sprint(u, x, o, n, nc, nd) }
	ms := func(v int64) string { return strconv.FormatInt(v, 10) }
	// A closed bucket's value: the units offered in it, and the link to the
	// next bucket's start.
	closed := func(offered, link int64) string { return strconv.FormatInt(offered<<32+link, 10) }
	check := func(step string, want map[string]string, ttl time.Duration) {
		t.Helper()
		if len(want) > 0 {
			want["v"] = "s2 1000 100" // the record: layout 2, W and B
		}
		got, err := c.HGetAll(ctx, h).Result()
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: HGETALL =\n\t%v\nwant\t%v", step, got, want)
		}
		if len(want) > 0 && mr.TTL(h) != ttl {
			t.Errorf("%s: TTL = %v, want %v", step, mr.TTL(h), ttl)
		}
	}

	mustInc(t, l, "k", rate, 10)
	check("Inc 10", map[string]string{"m": meta(10, 0, t0, t0, 10, 0), "k": "10 15 0 0"}, w+b)

	// Between soft and hard: the factor (0: 10 observed over 1 s at 10/s)
	// is computed and cached with its time.
	clk.Advance(100 * time.Millisecond)
	t1 := t0 + 100
	if d := mustInc(t, l, "k", rate, 2); !d.Allowed || !d.Suppressed {
		t.Fatalf("Inc(k, 2) = %s, want suppressed and admitted", conformance.Format(d))
	}
	check("Inc 2", map[string]string{"m": meta(12, 0, t0, t1, 2, 0), "k": "10 15 0 " + ms(t1), ms(t0): closed(10, 100)}, w+b)

	// Beyond hard: refused, counted as observed and declined in the same
	// bucket. Its RetryAfter needs 12 + 6 - 10 = 8 accepted units to
	// expire: t0's bucket frees 10, so the cursor at the end of "k" rests
	// on it (rd 0: the oldest bucket, rb 0, ra 10, its link 100). A join
	// leaves the TTL set when t1's bucket opened.
	clk.Advance(50 * time.Millisecond)
	if d := mustInc(t, l, "k", rate, 6); d.Allowed {
		t.Fatalf("Inc(k, 6) = %s, want refused", conformance.Format(d))
	}
	check("Inc 6 refused", map[string]string{"m": meta(18, 6, t0, t1, 8, 6), "k": "10 15 0 " + ms(t1) + " 0 0 10 100",
		ms(t0): closed(10, 100)}, w+b-50*time.Millisecond)

	// t0's bucket dies W + B after it opened: the write deletes it and
	// recomputes the totals, and drops the cursor, which rested on it.
	clk.Advance(950 * time.Millisecond)
	t2 := t0 + 1100
	mustInc(t, l, "k", rate, 1)
	check("oldest bucket dead", map[string]string{"m": meta(9, 6, t1, t2, 1, 0), "k": "10 15 0 " + ms(t1),
		ms(t1): closed(8, 1000), "d" + ms(t1): "6"}, w+b)

	// t1's bucket dies with its declined units: "x" drops to 0.
	clk.Advance(100 * time.Millisecond)
	t3 := t0 + 1200
	mustInc(t, l, "k", rate, 1)
	check("declined bucket dead", map[string]string{"m": meta(2, 0, t2, t3, 1, 0), "k": "10 15 0 " + ms(t1),
		ms(t2): closed(1, 100)}, w+b)

	// A peek writes nothing; the latest rate is stored.
	mustInc(t, l, "k", limiter.PerSecond(20), 0)
	check("peek", map[string]string{"m": meta(2, 0, t2, t3, 1, 0), "k": "10 15 0 " + ms(t1), ms(t2): closed(1, 100)}, w+b)
	mustInc(t, l, "k", limiter.PerSecond(20), 1)
	check("new rate", map[string]string{"m": meta(3, 0, t2, t3, 2, 0), "k": "20 30 0 " + ms(t1), ms(t2): closed(1, 100)}, w+b)
}

// TestDeadKeyStartsAfresh checks on real Redis, where the hash outlives the
// fake clock's window, that a key with only dead buckets is an absent key:
// its cached factor and capacities are forgotten, and the next write
// replaces the hash.
func TestDeadKeyStartsAfresh(t *testing.T) {
	c := realClient(t)
	clk := conformance.NewClock()
	prefix := redistest.Prefix(t)
	l := newLimiter(t, c, limiter.WithPrefix(prefix), limiter.WithWindow(time.Second), limiter.WithClock(clk.Now),
		limiter.WithHardLimitFactor(2), limiter.WithSuppressionCache(time.Hour), limiter.WithRandom(conformance.NewSeq(0.5).Float64))
	h := hashOf(t, prefix, "k")
	rate := limiter.PerSecond(10)
	mustInc(t, l, "k", rate, 10)
	mustInc(t, l, "k", rate, 11) // beyond hard: refused, observed 21
	// f = 1 − 10/21, computed and cached for an hour; draw 0.5 refuses.
	if d := mustInc(t, l, "k", rate, 1); d.Allowed || d.SuppressionFactor != 0.52381 {
		t.Fatalf("Inc(k, 1) = %s, want refused at factor 0.52381", conformance.Format(d))
	}
	if k := c.HGet(ctx, h, "k").Val(); !strings.HasPrefix(k, "10 20 523810 ") {
		t.Fatalf("k = %q, want the cached factor 523810", k)
	}
	clk.Advance(time.Second + 10*time.Millisecond) // W + B (B = W/100)
	if d, err := l.IsAllowed(ctx, "k"); err != nil || d != (limiter.Decision{Allowed: true}) {
		t.Fatalf("IsAllowed on a dead key = %s, %v; want an unknown key", conformance.Format(d), err)
	}
	if u := mustGet(t, l, "k"); u != (limiter.Usage{}) {
		t.Fatalf("Get on a dead key = %+v, want zero", u)
	}
	// 12 is above soft: the remembered factor would refuse it at draw 0.5.
	if d := mustInc(t, l, "k", rate, 12); !d.Allowed || d.SuppressionFactor != 0 {
		t.Fatalf("Inc(k, 12) on a dead key = %s, want admitted with factor 0", conformance.Format(d))
	}
	now := strconv.FormatInt(clk.Now().UnixMilli(), 10)
	want := map[string]string{"m": "12 0 " + now + " " + now + " 12 0", "k": "10 20 0 " + now, "v": "s2 1000 10"}
	if got := c.HGetAll(ctx, h).Val(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("HGETALL = %v, want %v", got, want)
	}
}

// TestReadOnlyCallsWriteNothing checks that IsAllowed, Get and peeks leave
// the hash and its TTL as they are, even when they find dead buckets or a
// dead key, and create nothing for an unknown key.
func TestReadOnlyCallsWriteNothing(t *testing.T) {
	c := realClient(t)
	clk := conformance.NewClock()
	prefix := redistest.Prefix(t)
	l := newLimiter(t, c, limiter.WithPrefix(prefix), limiter.WithWindow(time.Second), limiter.WithClock(clk.Now),
		limiter.WithHardLimitFactor(1.5), limiter.WithRandom(conformance.NewSeq(0.5).Float64))
	h := hashOf(t, prefix, "k")
	rate := limiter.PerSecond(10)
	mustInc(t, l, "k", rate, 10)
	clk.Advance(500 * time.Millisecond)
	mustInc(t, l, "k", rate, 3)
	mustInc(t, l, "k", rate, 6)
	readOnly := func(stage string) {
		t.Helper()
		before := c.HGetAll(ctx, h).Val()
		ttl := c.PTTL(ctx, h).Val()
		if _, err := l.IsAllowed(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		mustGet(t, l, "k")
		mustInc(t, l, "k", rate, 0)
		mustInc(t, l, "k", limiter.PerSecond(50), 0)
		if after := c.HGetAll(ctx, h).Val(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("%s: read-only calls changed the hash from %v to %v", stage, before, after)
		}
		if after := c.PTTL(ctx, h).Val(); after > ttl || after <= 0 {
			t.Errorf("%s: read-only calls moved PTTL from %v to %v", stage, ttl, after)
		}
	}
	readOnly("live")
	clk.Advance(600 * time.Millisecond) // the first bucket is dead
	readOnly("dead bucket")
	clk.Advance(time.Second) // every bucket is dead
	readOnly("dead key")

	u := "unknown"
	if _, err := l.IsAllowed(ctx, u); err != nil {
		t.Fatal(err)
	}
	mustGet(t, l, u)
	mustInc(t, l, u, rate, 0)
	if n := c.Exists(ctx, hashOf(t, prefix, u)).Val(); n != 0 {
		t.Errorf("read-only calls created the hash of an unknown key")
	}
}

// keysUnder lists the Redis keys under prefix.
func keysUnder(t testing.TB, c *redis.Client, prefix string) []string {
	t.Helper()
	keys, err := c.Keys(ctx, prefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestTTL checks on miniredis, whose TTLs follow the fake clock, the
// expiry rule of docs/data-model.md: only a write that opens a bucket sets
// the TTL, so every key expires exactly W + B after its newest bucket
// opened (when that bucket dies, never before), with 0 < PTTL ≤ W + B, and
// W + B of silence leaves nothing behind.
func TestTTL(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	const w, b = time.Second, 100 * time.Millisecond
	mr, c, clk := miniAt(t)
	prefix := redistest.Prefix(t)
	l := newLimiter(t, c, limiter.WithPrefix(prefix), limiter.WithWindow(w), limiter.WithBucket(b),
		limiter.WithHardLimitFactor(1.5), limiter.WithRandom(conformance.NewRand(3)))
	rng := rand.New(rand.NewPCG(3, 3))
	keys := []string{"a", "b:c", "{d}"}
	for i := 0; i < 600; i++ {
		clk.Advance(time.Duration(rng.IntN(60)) * time.Millisecond)
		k := keys[rng.IntN(len(keys))]
		mustInc(t, l, k, limiter.PerSecond(10), int64(rng.IntN(4)))
		for _, rk := range mr.Keys() {
			ttl := mr.TTL(rk)
			if ttl <= 0 || ttl > w+b {
				t.Fatalf("step %d: TTL(%s) = %v, want in (0, %v]", i, rk, ttl, w+b)
			}
			// "m" is "<u> <x> <o> <n> <nc> <nd>".
			meta := strings.Fields(mr.HGet(rk, "m"))
			if len(meta) != 6 {
				t.Fatalf("step %d: HGET %s m = %q, want six numbers", i, rk, mr.HGet(rk, "m"))
			}
			n, err := strconv.ParseInt(meta[3], 10, 64)
			if err != nil {
				t.Fatalf("step %d: HGET %s m: %v", i, rk, err)
			}
			if want := time.UnixMilli(n).Add(w + b).Sub(clk.Now()); ttl != want {
				t.Fatalf("step %d: TTL(%s) = %v, want %v: W + B after the newest bucket opened", i, rk, ttl, want)
			}
		}
	}
	if len(mr.Keys()) == 0 {
		t.Fatal("no key written")
	}
	clk.Advance(w + b)
	if left := mr.Keys(); len(left) != 0 {
		t.Fatalf("after W + B of silence, keys remain: %v", left)
	}
}

// TestTTLRealRedis checks the same on a real server with its own clock and
// a short window: every key has 0 < PTTL ≤ W + B, and all are gone soon
// after W + B of silence.
func TestTTLRealRedis(t *testing.T) {
	const w, b = 200 * time.Millisecond, 10 * time.Millisecond
	c := realClient(t)
	prefix := redistest.Prefix(t)
	l := newLimiter(t, c, limiter.WithPrefix(prefix), limiter.WithWindow(w), limiter.WithBucket(b),
		limiter.WithHardLimitFactor(1.5), limiter.WithSuppressionCache(0))
	rate := limiter.PerSecond(50) // S = 10, H = 15
	keys := []string{"a", "b:c", "{d}"}
	refused := 0
	for i := 0; i < 90; i++ {
		d := mustInc(t, l, keys[i%len(keys)], rate, 1)
		if !d.Allowed {
			refused++
		}
		for _, rk := range keysUnder(t, c, prefix) {
			if ttl := c.PTTL(ctx, rk).Val(); ttl <= 0 || ttl > w+b {
				t.Fatalf("call %d: PTTL(%s) = %v, want in (0, %v]", i, rk, ttl, w+b)
			}
		}
	}
	if refused == 0 {
		t.Errorf("no call was refused: the hashes never held declined counts")
	}
	deadline := time.Now().Add(w + b + 2*time.Second)
	for len(keysUnder(t, c, prefix)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("keys remain long after W + B of silence: %v", keysUnder(t, c, prefix))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTTLWithClock checks the TTL of a limiter that sends its own clock:
// W + B plus a minute, since Redis counts TTLs in real time and a fake clock
// may stand still (see redisprov.TTLMs).
func TestTTLWithClock(t *testing.T) {
	const w, b = 200 * time.Millisecond, 10 * time.Millisecond
	c := realClient(t)
	prefix := redistest.Prefix(t)
	l := newLimiter(t, c, limiter.WithPrefix(prefix), limiter.WithWindow(w), limiter.WithBucket(b),
		limiter.WithClock(conformance.NewClock().Now))
	mustInc(t, l, "k", limiter.PerSecond(50), 1)
	if ttl := c.PTTL(ctx, hashOf(t, prefix, "k")).Val(); ttl <= w+b || ttl > w+b+time.Minute {
		t.Fatalf("PTTL = %v, want in (%v, %v]", ttl, w+b, w+b+time.Minute)
	}
}

// TestMemory measures MEMORY USAGE of one key's hash on real Redis. The
// design's budget is 350 bytes for a 10/min policy after 5 requests.
func TestMemory(t *testing.T) {
	c := realClient(t)
	for _, tc := range []struct {
		name   string
		calls  int
		factor float64
		budget int64
	}{
		{"10/min, 5 requests", 5, 1, 350},
		{"10/min F=1.5, 20 requests (suppressed, factor cached)", 20, 1.5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := conformance.NewClock()
			prefix := redistest.Prefix(t)
			l := newLimiter(t, c, limiter.WithPrefix(prefix), limiter.WithClock(clk.Now),
				limiter.WithHardLimitFactor(tc.factor), limiter.WithRandom(conformance.NewRand(1)))
			for i := 0; i < tc.calls; i++ {
				mustInc(t, l, "user:12345", limiter.PerMinute(10), 1)
				clk.Advance(time.Second)
			}
			h := hashOf(t, prefix, "user:12345")
			n, err := c.MemoryUsage(ctx, h).Result()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: MEMORY USAGE %d bytes, %d fields, %s", h, n, c.HLen(ctx, h).Val(), c.ObjectEncoding(ctx, h).Val())
			if tc.budget > 0 && n > tc.budget {
				t.Errorf("MEMORY USAGE = %d bytes, want ≤ %d", n, tc.budget)
			}
		})
	}
}

// TestScriptFlush checks that a flushed script cache costs one EVAL, not an
// error, and that the call behind it counts once.
func TestScriptFlush(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	l := newLimiter(t, c)
	rate := limiter.PerMinute(10)
	mustInc(t, l, "k", rate, 1)
	for i, call := range []func() (int64, error){
		func() (int64, error) { d, err := l.Inc(ctx, "k", rate, 1); return d.Remaining, err },
		func() (int64, error) { d, err := l.IsAllowed(ctx, "k"); return d.Remaining, err },
		func() (int64, error) { u, err := l.Get(ctx, "k"); return 10 - u.Used, err },
	} {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := call(); err != nil || got != 8 {
			t.Fatalf("call %d after SCRIPT FLUSH: remaining %d, %v; want 8", i, got, err)
		}
	}
}

// TestServerDown: a stopped or frozen Redis gives every call a wrapped
// error within the context's deadline, and no panic.
func TestServerDown(t *testing.T) {
	conformance.RunOutage(t, "redissup", func(t *testing.T, c *redis.Client) limiter.Limiter {
		return newLimiter(t, c, limiter.WithFailurePolicy(limiter.FailError))
	})
}

// TestCloseLeavesClientOpen checks that Close does not close the caller's
// client.
func TestCloseLeavesClientOpen(t *testing.T) {
	_, c := redistest.Mini(t)
	l := newLimiter(t, c)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("client unusable after Close: %v", err)
	}
}

// TestLargeCounts drives a key with costs of 2^40 at a capacity near 2^50
// and requires the local provider's decisions: counts stay exact in Lua's
// doubles and travel as integers.
func TestLargeCounts(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, p := range providers[:2] {
		t.Run(p.name, func(t *testing.T) {
			clk := conformance.NewClock()
			opts := []limiter.Option{limiter.WithWindow(time.Second), limiter.WithBucket(10 * time.Millisecond),
				limiter.WithHardLimitFactor(1.5), limiter.WithSuppressionCache(0)}
			ref := localFactory(t, clk, with(opts, limiter.WithRandom(conformance.NewRand(5)))...)
			defer ref.Close(ctx)
			got := p.f(t, clk, with(opts, limiter.WithRandom(conformance.NewRand(5)))...)
			defer got.Close(ctx)
			rate := limiter.PerSecond(float64(int64(1) << 49)) // S = 2^49, H = 1.5 × 2^49
			refused := 0
			for i := 0; i < 1000; i++ {
				clk.Advance(time.Millisecond)
				n := bigCost - int64(i)
				a, b := mustInc(t, ref, "k", rate, n), mustInc(t, got, "k", rate, n)
				if !sameDecision(a, b) {
					t.Fatalf("call %d: Inc(k, %d) = %s, want %s", i, n, conformance.Format(b), conformance.Format(a))
				}
				if !a.Allowed {
					refused++
				}
			}
			if ua, ub := mustGet(t, ref, "k"), mustGet(t, got, "k"); ua != ub {
				t.Fatalf("Get(k) = %+v, want %+v", ub, ua)
			}
			if refused == 0 {
				t.Fatal("no call refused: the trace never left the soft capacity")
			}
		})
	}
}

// TestManyBuckets is a differential trace with the most buckets per
// window accepted (W/B = 500, B = 1 ms), so that the scripts' scans and long
// RetryAfter walks run on big hashes.
func TestManyBuckets(t *testing.T) {
	c := realClient(t)
	clk := conformance.NewClock()
	// W/B = 500, the largest accepted (settings.MaxBuckets).
	opts := []limiter.Option{limiter.WithWindow(500 * time.Millisecond), limiter.WithBucket(time.Millisecond),
		limiter.WithHardLimitFactor(2), limiter.WithSuppressionCache(0)}
	ref := localFactory(t, clk, with(opts, limiter.WithRandom(conformance.NewRand(9)))...)
	defer ref.Close(ctx)
	prefix := redistest.Prefix(t)
	got := newLimiter(t, c, with(opts, limiter.WithRandom(conformance.NewRand(9)), limiter.WithClock(clk.Now), limiter.WithPrefix(prefix))...)
	rate := limiter.PerSecond(1000) // S = 500, H = 1000
	compare := func(i int, n int64) {
		t.Helper()
		a, b := mustInc(t, ref, "k", rate, n), mustInc(t, got, "k", rate, n)
		if !sameDecision(a, b) {
			t.Fatalf("call %d: Inc(k, %d) = %s, want %s", i, n, conformance.Format(b), conformance.Format(a))
		}
		if i%10 != 0 {
			return
		}
		da, _ := ref.IsAllowed(ctx, "k")
		db, err := got.IsAllowed(ctx, "k")
		if err != nil || !sameDecision(da, db) {
			t.Fatalf("call %d: IsAllowed(k) = %s, %v, want %s", i, conformance.Format(db), err, conformance.Format(da))
		}
	}
	// One call per bucket for a window and a third: after the first window
	// every call finds a dead bucket and scans the hash.
	for i := 0; i < 700; i++ {
		clk.Advance(time.Millisecond)
		compare(i, int64(1+i%3))
	}
	fields := c.HLen(ctx, hashOf(t, prefix, "k")).Val()
	// A gap of 400 ms kills four fifths of the buckets at once: hundreds
	// of fields go in one write.
	clk.Advance(400 * time.Millisecond)
	compare(0, 1)
	if ua, ub := mustGet(t, ref, "k"), mustGet(t, got, "k"); ua != ub {
		t.Fatalf("Get(k) = %+v, want %+v", ub, ua)
	}
	after := c.HLen(ctx, hashOf(t, prefix, "k")).Val()
	t.Logf("hash fields: %d before the gap, %d after", fields, after)
	if fields < 500 || after > fields/3 {
		t.Errorf("hash fields: %d before the gap, %d after; want W/B = 500 or more, then a fifth", fields, after)
	}
}

// TestEarlierLayoutIsAbsent: a hash written before the meta fields were
// packed into "m" and "k" (separate fields n, nc, nd, u, ...) reads as
// absent, and the next Inc replaces it whole: its bucket fields, which
// have this layout's format, must not be counted.
func TestEarlierLayoutIsAbsent(t *testing.T) {
	mr, c, clk := miniAt(t)
	prefix := redistest.Prefix(t)
	l := newLimiter(t, c, limiter.WithPrefix(prefix), limiter.WithWindow(time.Second),
		limiter.WithBucket(100*time.Millisecond), limiter.WithHardLimitFactor(1.5))
	h := hashOf(t, prefix, "k")
	now := strconv.FormatInt(clk.Now().UnixMilli(), 10)
	mr.HSet(h, now, "9", "d"+now, "2", "u", "9", "x", "2", "o", now, "n", now, "nc", "0", "nd", "0", "c", "10", "hc", "15",
		"f", "0", "ft", "0")
	if d, err := l.IsAllowed(ctx, "k"); err != nil || d != (limiter.Decision{Allowed: true}) {
		t.Fatalf("IsAllowed on an earlier-layout hash = %s, %v; want an unknown key", conformance.Format(d), err)
	}
	if u := mustGet(t, l, "k"); u != (limiter.Usage{}) {
		t.Fatalf("Get on an earlier-layout hash = %+v, want zero", u)
	}
	if d := mustInc(t, l, "k", limiter.PerSecond(10), 1); !d.Allowed || d.Remaining != 9 {
		t.Fatalf("Inc on an earlier-layout hash = %s, want allowed with 9 remaining", conformance.Format(d))
	}
	want := map[string]string{"m": "1 0 " + now + " " + now + " 1 0", "k": "10 15 0 0", "v": "s2 1000 100"}
	if got := c.HGetAll(ctx, h).Val(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("HGETALL = %v, want %v", got, want)
	}
}

// TestSteadyTrafficFollowsLinks is the regression test of a key under steady
// traffic reading its whole hash on every other call (see the test of the
// same name in redisabs): a dead bucket costs one HMGET of its offered and
// declined units, never an HGETALL. Decisions are checked against the
// local provider throughout.
func TestSteadyTrafficFollowsLinks(t *testing.T) {
	c := redistest.Counted(t)
	clk := conformance.NewClock()
	opts := []limiter.Option{limiter.WithWindow(time.Second), limiter.WithBucket(10 * time.Millisecond),
		limiter.WithHardLimitFactor(1.5), limiter.WithRandom(conformance.NewSeq(0.5).Float64)}
	prefix := redistest.Prefix(t)
	lr := newLimiter(t, c, with(opts, limiter.WithPrefix(prefix), limiter.WithClock(clk.Now))...)
	ll := localFactory(t, clk, opts...)
	defer ll.Close(ctx)
	rate := limiter.PerSecond(1000) // below the soft capacity: every call writes
	const calls = 600               // 3.6 s of traffic, 6 ms apart: 2.6 windows of deaths
	conformance.RunSteady(t, clk, lr, ll, rate, 6*time.Millisecond, calls)
	if n := redistest.CommandCalls(t, c, "hgetall"); n != 0 {
		t.Errorf("HGETALL ran %d times in %d calls of steady traffic, want 0", n, calls)
	}
	// Buckets die from the first second on, one per 10 ms: about 260 in
	// all, each read by the call after its death with one HMGET, or one
	// HGET while the hash holds no declined unit (besides every call's
	// HMGET of the meta fields).
	if n := redistest.CommandCalls(t, c, "hmget") + redistest.CommandCalls(t, c, "hget"); n < calls+200 || n > 2*calls {
		t.Errorf("HMGET and HGET ran %d times, want one per call and one per dead bucket (about %d)", n, calls+260)
	}
}

// bigCost is a cost far above any capacity the tests use.
const bigCost = int64(1) << 40

// TestOverloadedRetryAfterReadsNoHash is the regression test of a refused
// call's RetryAfter reading the whole hash whenever the oldest bucket alone
// did not free enough (48–53 µs of Redis time a call on an overloaded hot
// key): the RetryAfter cursor answers most refusals without a read and moves one
// bucket at a time. A key offered 10× its soft capacity for three windows
// is checked against the local provider call for call (RetryAfter
// included), and must read its hash whole (HGETALL) on very few calls;
// it is also the regression test of the factor's scan of the last second
// (every factor computed on such a key read the whole hash).
func TestOverloadedRetryAfterReadsNoHash(t *testing.T) {
	c := redistest.Counted(t)
	clk := conformance.NewClock()
	opts := []limiter.Option{limiter.WithWindow(time.Second), limiter.WithBucket(10 * time.Millisecond),
		limiter.WithHardLimitFactor(1.5)}
	prefix := redistest.Prefix(t)
	// One identically seeded random source per provider: the same draws.
	lr := newLimiter(t, c, with(opts, limiter.WithPrefix(prefix), limiter.WithClock(clk.Now),
		limiter.WithRandom(conformance.NewRand(11)))...)
	ll := localFactory(t, clk, with(opts, limiter.WithRandom(conformance.NewRand(11)))...)
	defer ll.Close(ctx)
	rate := limiter.PerSecond(100) // S = 100, H = 150: offered 1,000/s
	const calls = 3000             // 3 s, one call a millisecond
	refused := 0
	for i := 0; i < calls; i++ {
		clk.Advance(time.Millisecond)
		dr := mustInc(t, lr, "k", rate, 1)
		dl := mustInc(t, ll, "k", rate, 1)
		if dr != dl {
			t.Fatalf("call %d: Inc = %s from Redis, %s from local", i, conformance.Format(dr), conformance.Format(dl))
		}
		if !dr.Allowed {
			refused++
			if dr.RetryAfter <= 0 {
				t.Fatalf("call %d: refused with RetryAfter %v", i, dr.RetryAfter)
			}
		}
	}
	if refused < calls/2 {
		t.Fatalf("%d of %d calls refused: the key is not overloaded", refused, calls)
	}
	t.Logf("%d calls, %d refused: %d HGETALL, %d HMGET, %d HGET", calls, refused, redistest.CommandCalls(t, c, "hgetall"),
		redistest.CommandCalls(t, c, "hmget"), redistest.CommandCalls(t, c, "hget"))
	// Before the cursor, most refusals read the whole hash; before the
	// factor read the units of its last second along the links, so did
	// nearly every computation of the factor (once per 100 ms cache
	// period, 18 times in these 3 s): with W = 1 s and B = 10 ms the
	// oldest live bucket is nearly always more than R = 1 s old, and only
	// it (or it and the next) must be taken out of the total.
	if n := redistest.CommandCalls(t, c, "hgetall"); n > calls/1000 {
		t.Errorf("HGETALL ran %d times in %d calls (%d refused), want at most %d", n, calls, refused, calls/1000)
	}
	// Reads beside every call's HMGET of the meta fields: one per dead
	// bucket (about 200) and a few per bucket the cursor steps on.
	if n := redistest.CommandCalls(t, c, "hmget") - calls; n > calls/2 {
		t.Errorf("%d HMGETs of buckets in %d calls, want at most %d", n, calls, calls/2)
	}
}
