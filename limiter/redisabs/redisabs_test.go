package redisabs_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

var ctx = context.Background()

// hashOf is the Redis key of k's hash under l's prefix.
func hashOf(t testing.TB, prefix, k string) string {
	t.Helper()
	h, err := key.Name(prefix, k, key.Absolute, key.Hash)
	if err != nil {
		t.Fatalf("key.Name(%q, %q): %v", prefix, k, err)
	}
	return h
}

// miniAt returns a miniredis whose TIME and TTLs follow a fresh fake clock,
// a client for it and the clock.
func miniAt(t *testing.T) (*miniredis.Miniredis, *redis.Client, *conformance.Clock) {
	t.Helper()
	mr, c := redistest.Mini(t)
	clk := conformance.NewClock()
	clk.Drive(mr)
	return mr, c, clk
}

func mustInc(t *testing.T, l limiter.Limiter, k string, rate limiter.Rate, n int64) limiter.Decision {
	t.Helper()
	d, err := l.Inc(ctx, k, rate, n)
	if err != nil {
		t.Fatalf("Inc(%q, %v, %d): %v", k, rate, n, err)
	}
	return d
}

func mustGet(t *testing.T, l limiter.Limiter, k string) limiter.Usage {
	t.Helper()
	u, err := l.Get(ctx, k)
	if err != nil {
		t.Fatalf("Get(%q): %v", k, err)
	}
	return u
}

func TestNewRejectsNilClient(t *testing.T) {
	var typed *redis.Client
	for _, c := range []struct {
		name   string
		client redisabs.Client
	}{{"nil interface", nil}, {"typed nil", typed}} {
		if _, err := redisabs.New(c.client); !errors.Is(err, limiter.ErrInvalidConfig) {
			t.Errorf("New(%s) error = %v, want ErrInvalidConfig", c.name, err)
		}
	}
}

// TestErrorsMatchLocal feeds both providers the same bad input and requires
// the same sentinel (or none) from each.
func TestErrorsMatchLocal(t *testing.T) {
	_, c := redistest.Mini(t)
	r := newLimiter(t, c, limiter.WithWindow(time.Second))
	l, err := local.NewAbsolute(limiter.WithWindow(time.Second))
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
		{"huge rate", "k", limiter.PerSecond(1e16), 1},
		{"longest key is fine", strings.Repeat("k", key.MaxLen), ok, 1},
	}
	compare := func(name string, er, el error) {
		t.Helper()
		if (er == nil) != (el == nil) {
			t.Errorf("%s: redisabs error %v, local error %v", name, er, el)
		}
		for _, s := range sentinels {
			if errors.Is(er, s) != errors.Is(el, s) {
				t.Errorf("%s: errors.Is(%v, %v) = %v for redisabs, %v for local (%v)", name, er, s, errors.Is(er, s), errors.Is(el, s), el)
			}
		}
		if er != nil && !strings.HasPrefix(er.Error(), "redisabs: ") {
			t.Errorf("%s: error %q lacks the package prefix", name, er)
		}
	}
	run := func() {
		for _, c := range cases {
			_, er := r.Inc(ctx, c.key, c.rate, c.n)
			_, el := l.Inc(ctx, c.key, c.rate, c.n)
			compare("Inc "+c.name, er, el)
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

// newestStart reads the start (Unix ms) of the newest bucket from the meta
// field of hash h, "<c> <u> <o> <n> <nc>".
func newestStart(t *testing.T, c redis.Cmdable, h string) int64 {
	t.Helper()
	m, err := c.HGet(ctx, h, "m").Result()
	if err != nil {
		t.Fatalf("HGET %s m: %v", h, err)
	}
	f := strings.Fields(m)
	if len(f) != 5 {
		t.Fatalf("HGET %s m = %q, want five numbers", h, m)
	}
	n, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		t.Fatalf("HGET %s m = %q: %v", h, m, err)
	}
	return n
}

// TestTTL checks on miniredis, whose TTLs run on the fake clock, the expiry
// rule of docs/data-model.md: only a write that opens a bucket sets the
// TTL, so after every call the hash expires exactly W + B after its newest
// bucket opened (when that bucket dies, never before), its PTTL is in
// (0, W + B], and W + B after the last admitted unit nothing is left.
func TestTTL(t *testing.T) {
	const w, b = time.Second, 100 * time.Millisecond
	mr, c, clk := miniAt(t)
	prefix := redistest.Prefix(t)
	l, err := redisabs.New(c, limiter.WithPrefix(prefix), limiter.WithWindow(w), limiter.WithBucket(b))
	if err != nil {
		t.Fatal(err)
	}
	h := hashOf(t, prefix, "k")
	rng := rand.New(rand.NewPCG(7, 7))
	var lastAdmitted time.Time
	joins, opens := 0, 0
	for i := 0; i < 500; i++ {
		clk.Advance(time.Duration(rng.IntN(300)) * time.Millisecond)
		rate := limiter.PerSecond(float64(1 + rng.IntN(12)))
		n := int64(rng.IntN(4))
		var before int64
		if mr.Exists(h) {
			before = newestStart(t, c, h)
		}
		if d := mustInc(t, l, "k", rate, n); d.Allowed && n > 0 {
			lastAdmitted = clk.Now()
			if newestStart(t, c, h) == before {
				joins++
			} else {
				opens++
			}
		}
		if !mr.Exists(h) {
			continue // a refused call or peek on an absent key
		}
		now := clk.Now()
		ttl := mr.TTL(h)
		if ttl <= 0 || ttl > w+b {
			t.Fatalf("step %d: after Inc(k, %v, %d) PTTL = %v, want in (0, %v]", i, rate, n, ttl, w+b)
		}
		dies := time.UnixMilli(newestStart(t, c, h)).Add(w + b)
		if want := dies.Sub(now); ttl != want {
			t.Fatalf("step %d: after Inc(k, %v, %d) PTTL = %v, want %v: W + B after the newest bucket opened", i, rate, n, ttl, want)
		}
		if end := lastAdmitted.Add(w + b).Sub(now); ttl > end {
			t.Fatalf("step %d: PTTL = %v, past W + B after the last admitted unit (%v)", i, ttl, end)
		}
	}
	if joins == 0 || opens == 0 {
		t.Fatalf("%d joins and %d opens: the trace must have both", joins, opens)
	}
	// A last admission that joins the newest bucket: the hash goes W + B
	// after that bucket opened, before W + B after the admission.
	clk.Advance(w + b)
	mustInc(t, l, "k", limiter.PerSecond(1000), 1)
	opened := clk.Now()
	clk.Advance(b / 2)
	if d := mustInc(t, l, "k", limiter.PerSecond(1000), 1); !d.Allowed {
		t.Fatalf("Inc(k) refused: %+v", d)
	}
	if got := newestStart(t, c, h); got != opened.UnixMilli() {
		t.Fatalf("newest bucket %d, want the join of %d", got, opened.UnixMilli())
	}
	if ttl := mr.TTL(h); ttl != w+b-b/2 {
		t.Fatalf("after a join PTTL = %v, want %v", ttl, w+b-b/2)
	}
	clk.Advance(w + b - b/2 - time.Millisecond)
	if !mr.Exists(h) {
		t.Fatal("hash gone while its newest bucket is live")
	}
	clk.Advance(time.Millisecond)
	if mr.Exists(h) {
		t.Fatalf("hash still there W + B after its newest bucket opened (PTTL %v)", mr.TTL(h))
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Fatalf("keys left after W + B of silence: %q", keys)
	}
}

// TestTTLRealRedis checks the same rule on a real server with its own clock
// and a short window, under calls that both join and open buckets: after
// every call 0 < PTTL ≤ W + B and the hash lives at least until its newest
// bucket dies, and W + B after the last admitted unit it is gone.
func TestTTLRealRedis(t *testing.T) {
	const w, b = 200 * time.Millisecond, 20 * time.Millisecond
	c := realClient(t).(*redis.Client)
	prefix := redistest.Prefix(t)
	l, err := redisabs.New(c, limiter.WithPrefix(prefix), limiter.WithWindow(w), limiter.WithBucket(b))
	if err != nil {
		t.Fatal(err)
	}
	h := hashOf(t, prefix, "k")
	rng := rand.New(rand.NewPCG(5, 5))
	starts := map[int64]bool{}
	var written time.Time
	for i := 0; i < 40; i++ {
		time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
		if d := mustInc(t, l, "k", limiter.PerSecond(1000), 1); !d.Allowed {
			t.Fatalf("Inc %d refused: %+v", i, d)
		}
		written = time.Now()
		pttl, err := c.PTTL(ctx, h).Result()
		if err != nil {
			t.Fatal(err)
		}
		now, err := c.Time(ctx).Result() // read after PTTL: now is no earlier than its instant
		if err != nil {
			t.Fatal(err)
		}
		n := newestStart(t, c, h)
		starts[n] = true
		if pttl <= 0 || pttl > w+b {
			t.Fatalf("after Inc %d PTTL = %v, want in (0, %v]", i, pttl, w+b)
		}
		// 2 ms: TIME and the script's expiry instant may round apart.
		if live := time.UnixMilli(n).Add(w + b).Sub(now); pttl < live-2*time.Millisecond {
			t.Fatalf("after Inc %d PTTL = %v, but the newest bucket is live %v more", i, pttl, live)
		}
	}
	if len(starts) < 2 || len(starts) == 40 {
		t.Fatalf("%d buckets for 40 calls: the trace must both join and open", len(starts))
	}
	time.Sleep(time.Until(written.Add(w + b + time.Millisecond)))
	if n, err := c.Exists(ctx, h).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS %s W + B after the last admitted unit = %d, %v; want 0", h, n, err)
	}
	if u := mustGet(t, l, "k"); u != (limiter.Usage{}) {
		t.Fatalf("Get(k) after expiry = %+v, want zero", u)
	}
}

// trickyKeys must all be distinct limiter keys; several pairs would collide
// under a naive escaping.
var trickyKeys = []string{
	"a:b", "a%3Ab", "a%b", "a%25b", "{a}", "%7Ba%7D", "a}b{", "{}", "a b", "a_b", "a\tb", "a\nb",
	"2001:db8::1", "::1", "[2001:db8::1]:8080", "fe80::1%eth0", "user@example.com",
	"https://example.com/a?b=c&d=%20", "*", "?", "[a]", `a\b`, "ü:ß", "a", "A",
}

func TestKeysDoNotCollide(t *testing.T) {
	for _, b := range []struct {
		name   string
		client func(testing.TB) redisabs.Client
	}{
		{"Mini", func(t testing.TB) redisabs.Client { _, c := redistest.Mini(t); return c }},
		{"Real", realClient},
		{"Cluster", clusterClient},
	} {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			prefix := redistest.Prefix(t)
			l, err := redisabs.New(c, limiter.WithPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			rate := limiter.PerMinute(1000)
			for i, k := range trickyKeys {
				if d := mustInc(t, l, k, rate, int64(i+1)); !d.Allowed || d.Remaining != 1000-int64(i+1) {
					t.Fatalf("Inc(%q, %d) = %+v, want allowed with %d remaining", k, i+1, d, 1000-(i+1))
				}
			}
			for i, k := range trickyKeys {
				if u := mustGet(t, l, k); u.Used != int64(i+1) || u.Limit != 1000 {
					t.Errorf("Get(%q) = %+v, want Used %d Limit 1000", k, u, i+1)
				}
				h := hashOf(t, prefix, k)
				if n, err := c.(redis.Cmdable).Exists(ctx, h).Result(); err != nil || n != 1 {
					t.Errorf("EXISTS %q = %d, %v; want 1", h, n, err)
				}
				p, err := key.Parse(h)
				if err != nil || p.Key != k {
					t.Errorf("key.Parse(%q) = %+v, %v; want key %q", h, p, err, k)
				}
			}
			if err := l.Reset(ctx, "a:b"); err != nil {
				t.Fatal(err)
			}
			if u := mustGet(t, l, "a%3Ab"); u.Used != 2 {
				t.Errorf("Get(a%%3Ab) after Reset(a:b) = %+v, want Used 2", u)
			}
		})
	}
}

// TestOneSlotPerKey checks with CLUSTER KEYSLOT that every Redis key of a
// limiter key, under either strategy, hashes to the slot of its escaped key.
func TestOneSlotPerKey(t *testing.T) {
	c := redistest.Cluster(t)
	prefix := redistest.Prefix(t)
	for _, k := range trickyKeys {
		want, err := c.ClusterKeySlot(ctx, key.Escape(k)).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, strategy := range []string{key.Absolute, key.Suppressed} {
			for _, suffix := range []string{key.Hash, key.Aux} {
				name, err := key.Name(prefix, k, strategy, suffix)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.ClusterKeySlot(ctx, name).Result()
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("CLUSTER KEYSLOT %q = %d, want %d (slot of %q)", name, got, want, key.Escape(k))
				}
			}
			// The hashes of a set's limits share the key's slot.
			for _, limit := range []string{"per-second", "daily", "a.b_c-1"} {
				name, err := key.LimitName(prefix, k, strategy, limit)
				if err != nil {
					t.Fatal(err)
				}
				if got, err := c.ClusterKeySlot(ctx, name).Result(); err != nil || got != want {
					t.Errorf("CLUSTER KEYSLOT %q = %d, %v, want %d (slot of %q)", name, got, err, want, key.Escape(k))
				}
			}
		}
	}
}

// TestReadOnlyCallsWriteNothing checks that IsAllowed, Get and a peek leave
// the hash and its TTL exactly as they were, even when they see dead
// buckets or a key with no live bucket.
func TestReadOnlyCallsWriteNothing(t *testing.T) {
	mr, c, clk := miniAt(t)
	prefix := redistest.Prefix(t)
	l, err := redisabs.New(c, limiter.WithPrefix(prefix), limiter.WithWindow(time.Second), limiter.WithBucket(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	h := hashOf(t, prefix, "k")
	ten := limiter.PerSecond(10)
	mustInc(t, l, "k", ten, 4)
	clk.Advance(500 * time.Millisecond)
	mustInc(t, l, "k", ten, 6)
	for _, adv := range []time.Duration{0, 599 * time.Millisecond, time.Millisecond, 499 * time.Millisecond} {
		clk.Advance(adv)
		before, _ := mr.HKeys(h)
		ttl := mr.TTL(h)
		dump := map[string]string{}
		for _, f := range before {
			dump[f] = mr.HGet(h, f)
		}
		if _, err := l.IsAllowed(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		mustGet(t, l, "k")
		mustInc(t, l, "k", ten, 0)
		mustInc(t, l, "k", limiter.PerSecond(3), 0) // another capacity: not stored either
		after, _ := mr.HKeys(h)
		if len(after) != len(before) || mr.TTL(h) != ttl {
			t.Fatalf("at +%v: read-only calls changed the hash: fields %q → %q, TTL %v → %v", clk.Now().Sub(conformance.Start), before, after, ttl, mr.TTL(h))
		}
		for f, v := range dump {
			if got := mr.HGet(h, f); got != v {
				t.Fatalf("at +%v: field %q changed from %q to %q", clk.Now().Sub(conformance.Start), f, v, got)
			}
		}
	}
	// At +1.6 s, W + B after the newest bucket opened, every bucket is
	// dead and the hash's TTL (W + B from that opening) has run out.
	clk.Advance(time.Millisecond)
	if mr.Exists(h) {
		t.Fatal("hash outlived its newest bucket")
	}
	if u := mustGet(t, l, "k"); u != (limiter.Usage{}) {
		t.Fatalf("Get(k) with only dead buckets = %+v, want zero", u)
	}
}

// TestDeadBucketsAreDeleted checks that a write drops the dead buckets it
// finds, hundreds at once (W/B = 500, the most accepted), and that a
// refused Inc whose key turns out empty deletes the hash.
func TestDeadBucketsAreDeleted(t *testing.T) {
	c := realClient(t).(*redis.Client)
	clk := conformance.NewClock()
	prefix := redistest.Prefix(t)
	w, b := 500*time.Millisecond, time.Millisecond
	l, err := redisabs.New(c, limiter.WithPrefix(prefix), limiter.WithWindow(w), limiter.WithBucket(b), limiter.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	h := hashOf(t, prefix, "k")
	rate := limiter.PerSecond(2000) // C = 1000
	for i := 0; i < 480; i++ {
		mustInc(t, l, "k", rate, 1)
		clk.Advance(time.Millisecond)
	}
	if n := c.HLen(ctx, h).Val(); n != 479+2 {
		t.Fatalf("HLEN = %d, want 481 (479 closed buckets, the meta field, which holds the newest, and the record)", n)
	}
	// The clock reads +480 ms; at +965 ms (a bucket lives W + B = 501 ms)
	// the buckets opened at 0 to 464 ms are dead and the 15 opened at 465
	// to 479 ms are live.
	clk.Advance(485 * time.Millisecond)
	if u := mustGet(t, l, "k"); u.Used != 15 {
		t.Fatalf("Get(k) = %+v, want Used 15", u)
	}
	d := mustInc(t, l, "k", rate, 1)
	if !d.Allowed || d.Remaining != 1000-16 {
		t.Fatalf("Inc(k, 1) = %+v, want allowed with 984 remaining", d)
	}
	if n := c.HLen(ctx, h).Val(); n != 15+2 {
		t.Fatalf("HLEN after the write = %d, want 17 (15 closed buckets, the meta field and the record)", n)
	}
	if u := mustGet(t, l, "k"); u.Used != 16 || u.Limit != 1000 {
		t.Fatalf("Get(k) = %+v, want Used 16 Limit 1000", u)
	}
	// A refused call (n > C) on a key whose buckets are all dead deletes it.
	clk.Advance(w + b)
	if d := mustInc(t, l, "k", rate, 2000); !d.Never {
		t.Fatalf("Inc(k, 2000) = %+v, want Never", d)
	}
	if n := c.Exists(ctx, h).Val(); n != 0 {
		t.Fatalf("hash with only dead buckets survived a write")
	}
}

// TestListpack checks the encoding claim of docs/data-model.md: a full
// window holds W/B + 1 buckets (a bucket lives W + B), W/B of them closed
// fields and the newest in the meta field, beside the record "v", so the
// hash stays a listpack while W/B + 2 ≤ hash-max-listpack-entries (512 by
// default) and becomes a hashtable beyond.
func TestListpack(t *testing.T) {
	c := realClient(t).(*redis.Client)
	cfg, err := c.ConfigGet(ctx, "hash-max-listpack-entries").Result()
	if err != nil {
		t.Fatal(err)
	}
	var max int
	if _, err := fmt.Sscan(cfg["hash-max-listpack-entries"], &max); err != nil || max < 8 {
		t.Fatalf("hash-max-listpack-entries = %q", cfg["hash-max-listpack-entries"])
	}
	// At the largest W/B accepted (settings.MaxBuckets) a full hash holds
	// MaxBuckets + 2 fields: a listpack under the default limit of 512.
	largest := "listpack"
	if settings.MaxBuckets+2 > max {
		largest = "hashtable"
	}
	for _, tc := range []struct {
		buckets int
		want    string
	}{{100, "listpack"}, {128, "listpack"}, {settings.MaxBuckets, largest}} {
		t.Run(fmt.Sprint(tc.buckets), func(t *testing.T) {
			clk := conformance.NewClock()
			prefix := redistest.Prefix(t)
			b := 10 * time.Millisecond
			w := time.Duration(tc.buckets) * b
			l, err := redisabs.New(c, limiter.WithPrefix(prefix), limiter.WithWindow(w), limiter.WithBucket(b), limiter.WithClock(clk.Now))
			if err != nil {
				t.Fatal(err)
			}
			// Two windows of one call per bucket: the hash stays full.
			for i := 0; i < 2*tc.buckets; i++ {
				mustInc(t, l, "k", limiter.PerSecond(1000), 1)
				clk.Advance(b)
			}
			h := hashOf(t, prefix, "k")
			// W/B closed buckets, the meta field, which holds the newest, and the record
			if n := c.HLen(ctx, h).Val(); n != int64(tc.buckets)+2 {
				t.Fatalf("HLEN = %d, want %d", n, tc.buckets+2)
			}
			if enc := c.ObjectEncoding(ctx, h).Val(); enc != tc.want {
				t.Fatalf("W/B = %d with hash-max-listpack-entries %d: OBJECT ENCODING = %q, want %q", tc.buckets, max, enc, tc.want)
			}
			t.Logf("W/B = %d: %s, MEMORY USAGE %d bytes", tc.buckets, tc.want, c.MemoryUsage(ctx, h).Val())
		})
	}
}

// TestScriptFlush checks that a flushed script cache costs one EVAL, not
// an error, and that the call behind it counts once.
func TestScriptFlush(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	l := newLimiter(t, c)
	rate := limiter.PerMinute(10)
	mustInc(t, l, "k", rate, 1)
	if u := mustGet(t, l, "k"); u.Used != 1 {
		t.Fatalf("Get(k) = %+v, want Used 1", u)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d := mustInc(t, l, "k", rate, 1); !d.Allowed || d.Remaining != 8 {
		t.Fatalf("Inc after SCRIPT FLUSH = %+v, want allowed with 8 remaining", d)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if u := mustGet(t, l, "k"); u.Used != 2 || u.Limit != 10 {
		t.Fatalf("Get(k) after SCRIPT FLUSH = %+v, want Used 2 Limit 10", u)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := l.IsAllowed(ctx, "k"); err != nil || d.Remaining != 8 {
		t.Fatalf("IsAllowed after SCRIPT FLUSH = %+v, %v; want 8 remaining", d, err)
	}
}

// TestServerDown: a stopped or frozen Redis gives every call a wrapped
// error within the context's deadline, and no panic.
func TestServerDown(t *testing.T) {
	conformance.RunOutage(t, "redisabs", func(t *testing.T, c *redis.Client) limiter.Limiter {
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

// TestManyBucketsTrace is a differential trace against local in the
// regime the conformance trace does not reach: hundreds of buckets per
// window (the most accepted), so that scans and long RetryAfter walks happen.
func TestManyBucketsTrace(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, b := range []struct {
		name  string
		f     conformance.Factory
		steps int
	}{
		{"Mini", onMini, 2_000}, // gopher-lua is slow on hashes of hundreds of fields
		{"Real", onReal, traceSteps},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clk := conformance.NewClock()
			// W/B = 500, the largest accepted (settings.MaxBuckets).
			opts := []limiter.Option{limiter.WithWindow(500 * time.Millisecond), limiter.WithBucket(time.Millisecond)}
			ll := localAbsolute(t, clk, opts...)
			defer ll.Close(ctx)
			lr := b.f(t, clk, opts...)
			defer lr.Close(ctx)
			rng := rand.New(rand.NewPCG(3, 9))
			rates := []limiter.Rate{limiter.PerSecond(400), limiter.PerSecond(1000), limiter.PerSecond(50)}
			keys := []string{"x", "y:1", "z{2}"}
			var allowed, rejected int
			for i := 0; i < b.steps; i++ {
				switch x := rng.IntN(1000); {
				case x < 990:
					clk.Advance(time.Duration(rng.IntN(3)) * time.Millisecond)
				default:
					clk.Advance(time.Duration(rng.IntN(4000)) * time.Millisecond)
				}
				k := keys[rng.IntN(len(keys))]
				switch x := rng.IntN(10); {
				case x < 8:
					rate, n := rates[rng.IntN(len(rates))], int64(rng.IntN(8))
					dl := mustInc(t, ll, k, rate, n)
					dr := mustInc(t, lr, k, rate, n)
					if dl != dr {
						t.Fatalf("step %d: Inc(%q, %v, %d) = %s from redisabs, %s from local", i, k, rate, n, conformance.Format(dr), conformance.Format(dl))
					}
					if dl.Allowed {
						allowed++
					} else {
						rejected++
					}
				case x < 9:
					dl, _ := ll.IsAllowed(ctx, k)
					dr, err := lr.IsAllowed(ctx, k)
					if err != nil || dl != dr {
						t.Fatalf("step %d: IsAllowed(%q) = %s, %v from redisabs, %s from local", i, k, conformance.Format(dr), err, conformance.Format(dl))
					}
				default:
					if ul, ur := mustGet(t, ll, k), mustGet(t, lr, k); ul != ur {
						t.Fatalf("step %d: Get(%q) = %+v from redisabs, %+v from local", i, k, ur, ul)
					}
				}
			}
			t.Logf("allowed %d, rejected %d", allowed, rejected)
			if allowed == 0 || rejected == 0 {
				t.Fatalf("trace did not reach both regimes: allowed %d, rejected %d", allowed, rejected)
			}
		})
	}
}

// TestConcurrentKeys runs many goroutines on a few keys on real Redis with
// Redis TIME and checks that no key ever admits more than its capacity.
func TestConcurrentKeys(t *testing.T) {
	l := newLimiter(t, realClient(t))
	const keys, c = 8, 200
	var mu sync.Mutex
	admitted := map[string]int64{}
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				k := fmt.Sprintf("k%d", (g+i)%keys)
				d, err := l.Inc(ctx, k, limiter.PerMinute(c), int64(1+i%3))
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					mu.Lock()
					admitted[k] += int64(1 + i%3)
					mu.Unlock()
				}
			}
		}(g)
	}
	wg.Wait()
	for i := 0; i < keys; i++ {
		k := fmt.Sprintf("k%d", i)
		if u := mustGet(t, l, k); admitted[k] > c || u.Used != admitted[k] {
			t.Errorf("key %s: admitted %d, Get = %+v; want admitted = Used ≤ %d", k, admitted[k], u, c)
		}
	}
}

// TestLargeNumbers drives counts beyond what Lua's tostring prints exactly
// (%.14g) through every write path — capacity 2^48, costs up to 2^40 —
// so that a number printed in exponent notation or rounded would show.
func TestLargeNumbers(t *testing.T) {
	for _, b := range backends[:2] {
		t.Run(b.name, func(t *testing.T) {
			clk := conformance.NewClock()
			opts := []limiter.Option{limiter.WithWindow(time.Minute)}
			ll := localAbsolute(t, clk, opts...)
			defer ll.Close(ctx)
			lr := b.f(t, clk, opts...)
			defer lr.Close(ctx)
			rate := limiter.PerSecond(float64(int64(1)<<48) / 60)
			if c, err := limiter.Capacity(rate, time.Minute); err != nil || c != 1<<48 {
				t.Fatalf("Capacity = %d, %v; want 2^48", c, err)
			}
			step := func(i int, n int64) limiter.Decision {
				t.Helper()
				dl := mustInc(t, ll, "big", rate, n)
				dr := mustInc(t, lr, "big", rate, n)
				if dl != dr {
					t.Fatalf("step %d: Inc(big, %d) = %s from redisabs, %s from local", i, n, conformance.Format(dr), conformance.Format(dl))
				}
				if ul, ur := mustGet(t, ll, "big"), mustGet(t, lr, "big"); ul != ur {
					t.Fatalf("step %d: Get(big) = %+v from redisabs, %+v from local", i, ur, ul)
				}
				return dl
			}
			var refused int
			for i := 0; i < 300; i++ {
				if i%16 == 0 {
					clk.Advance(300 * time.Millisecond) // a new bucket
				} else {
					clk.Advance(time.Millisecond) // joins the newest
				}
				n := bigCost - int64(i%3)
				if i%50 == 49 {
					n = 0 // a peek
				}
				if d := step(i, n); !d.Allowed {
					refused++
				}
			}
			clk.Advance(59 * time.Second) // the oldest buckets die: a scan
			for i := 300; i < 320; i++ {
				step(i, bigCost)
			}
			if refused == 0 {
				t.Fatal("the window never filled")
			}
		})
	}
}

// Regression: under WithClock the fake clock may stand still while Redis
// counts TTLs in real time, so a TTL of exactly W + B deleted state the
// fake clock still called live and made real-Redis conformance runs flaky.
// Such keys carry a minute of slack.
func TestTTLUnderWithClockHasSlack(t *testing.T) {
	const w, b = time.Second, 100 * time.Millisecond
	c := redistest.Real(t).Client(t)
	prefix := redistest.Prefix(t)
	l, err := redisabs.New(c, limiter.WithPrefix(prefix), limiter.WithWindow(w), limiter.WithBucket(b),
		limiter.WithClock(conformance.NewClock().Now))
	if err != nil {
		t.Fatal(err)
	}
	mustInc(t, l, "k", limiter.PerSecond(10), 1)
	ttl, err := c.PTTL(ctx, hashOf(t, prefix, "k")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= w+b || ttl > w+b+time.Minute {
		t.Fatalf("PTTL under WithClock = %v, want in (%v, %v]", ttl, w+b, w+b+time.Minute)
	}
}

// miniLimiter is an absolute limiter on miniredis with W = 1 s and
// B = 100 ms, its client, the hash of key "k" and the clock both follow.
func miniLimiter(t *testing.T) (*redisabs.Limiter, *redis.Client, *conformance.Clock, string) {
	t.Helper()
	_, c, clk := miniAt(t)
	prefix := redistest.Prefix(t)
	l, err := redisabs.New(c, limiter.WithPrefix(prefix), limiter.WithWindow(time.Second),
		limiter.WithBucket(100*time.Millisecond), limiter.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	return l, c, clk, prefix
}

// TestNewestBucketInMeta checks the layout docs/data-model.md describes:
// the meta field "m" holds "<c> <u> <o> <n> <nc>", the newest bucket among
// them, which becomes a field only when a newer one opens; and that a hash
// in an earlier layout (separate meta fields, no "m") reads as absent.
func TestNewestBucketInMeta(t *testing.T) {
	l, c, clk, prefix := miniLimiter(t)
	h := hashOf(t, prefix, "k")
	ten := limiter.PerSecond(10)
	t0 := clk.Now().UnixMilli()
	mustInc(t, l, "k", ten, 2)
	clk.Advance(50 * time.Millisecond)
	mustInc(t, l, "k", ten, 1) // joins
	// "v": the record of the layout, the window and the bucket
	want := map[string]string{"m": fmt.Sprintf("10 3 %d %d 3", t0, t0), "v": "a2 1000 100"}
	if got, _ := c.HGetAll(ctx, h).Result(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after two calls in one bucket: HGETALL = %v, want %v", got, want)
	}
	clk.Advance(100 * time.Millisecond)
	mustInc(t, l, "k", limiter.PerSecond(20), 4) // opens a bucket at t0 + 150, at a new rate
	// The closed bucket's value: its count 3 and the link to the next start, 150 ms on.
	want = map[string]string{"m": fmt.Sprintf("20 7 %d %d 4", t0, t0+150), fmt.Sprint(t0): fmt.Sprint(int64(3)<<32 + 150), "v": "a2 1000 100"}
	if got, _ := c.HGetAll(ctx, h).Result(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a second bucket: HGETALL = %v, want %v", got, want)
	}

	// The earlier layout: separate meta fields.
	h2 := hashOf(t, prefix, "old")
	now := clk.Now().UnixMilli()
	c.HSet(ctx, h2, fmt.Sprint(now-200), "5", "c", "10", "u", "9", "o", fmt.Sprint(now-200), "n", fmt.Sprint(now), "nc", "4")
	if d, err := l.IsAllowed(ctx, "old"); err != nil || !d.Allowed || d.Limit != 0 {
		t.Fatalf("IsAllowed on an earlier-layout hash = %+v, %v; want allowed with Limit 0 (absent)", d, err)
	}
	if u := mustGet(t, l, "old"); u != (limiter.Usage{}) {
		t.Fatalf("Get on an earlier-layout hash = %+v, want zero", u)
	}
	if d := mustInc(t, l, "old", ten, 1); !d.Allowed || d.Remaining != 9 {
		t.Fatalf("Inc on an earlier-layout hash = %+v, want allowed with 9 remaining", d)
	}
}

// TestPlainBucketValues: closed buckets written before the links (a plain
// count as the value) still count, and the call that finds one of them dead
// reads the whole hash instead of following links it does not have.
func TestPlainBucketValues(t *testing.T) {
	l, c, clk, prefix := miniLimiter(t)
	h := hashOf(t, prefix, "k")
	now := clk.Now().UnixMilli()
	ms := func(d int64) string { return fmt.Sprint(now + d) }
	c.HSet(ctx, h, "m", "10 6 "+ms(-900)+" "+ms(-100)+" 1", ms(-900), "2", ms(-500), "3")
	if u := mustGet(t, l, "k"); u != (limiter.Usage{Used: 6, Limit: 10}) {
		t.Fatalf("Get = %+v, want Used 6, Limit 10", u)
	}
	clk.Advance(250 * time.Millisecond) // the bucket at -900 dies (W + B = 1100 ms)
	if u := mustGet(t, l, "k"); u.Used != 4 {
		t.Fatalf("Get after the oldest died = %+v, want Used 4", u)
	}
	if d := mustInc(t, l, "k", limiter.PerSecond(10), 1); !d.Allowed || d.Remaining != 5 {
		t.Fatalf("Inc after the oldest died = %+v, want allowed with 5 remaining", d)
	}
	// the hash, written without a record, gets its record "v" with the
	// first write
	want := map[string]string{"m": "10 5 " + ms(-500) + " " + ms(250) + " 1",
		ms(-500): "3", ms(-100): fmt.Sprint(int64(1)<<32 + 350), "v": "a2 1000 100"}
	if got, _ := c.HGetAll(ctx, h).Result(); !reflect.DeepEqual(got, want) {
		t.Fatalf("HGETALL = %v, want %v", got, want)
	}
}

// TestSteadyTrafficFollowsLinks is the regression test of a key under steady
// traffic reading its whole hash on every other call: with about two calls
// per bucket and a full window, a bucket dies about every other call, and
// each death made the next write scan all W/B buckets (HGETALL), seven
// times the cost of a join. The links make it one HGET per dead bucket.
// Decisions are checked against the local provider throughout; the
// command counts come from a private server's INFO commandstats, which
// counts the commands scripts make.
func TestSteadyTrafficFollowsLinks(t *testing.T) {
	c := redistest.Counted(t)
	clk := conformance.NewClock()
	opts := []limiter.Option{limiter.WithWindow(time.Second), limiter.WithBucket(10 * time.Millisecond)}
	prefix := redistest.Prefix(t)
	lr, err := redisabs.New(c, append(opts, limiter.WithPrefix(prefix), limiter.WithClock(clk.Now))...)
	if err != nil {
		t.Fatal(err)
	}
	ll := localAbsolute(t, clk, opts...)
	defer ll.Close(ctx)
	rate := limiter.PerSecond(1000) // never refuses: every call writes
	const calls = 600               // 3.6 s of traffic, 6 ms apart: 2.6 windows of deaths
	conformance.RunSteady(t, clk, lr, ll, rate, 6*time.Millisecond, calls)
	if n := redistest.CommandCalls(t, c, "hgetall"); n != 0 {
		t.Errorf("HGETALL ran %d times in %d calls of steady traffic, want 0", n, calls)
	}
	// Buckets die from the first second on, one per 10 ms: about 260 in all,
	// each found with one HGET by the call after its death, besides every
	// call's HMGET of the meta field and the record.
	if n := redistest.CommandCalls(t, c, "hmget"); n < calls || n > calls+10 {
		t.Errorf("HMGET ran %d times, want one per call (%d) and per Get", n, calls)
	}
	if n := redistest.CommandCalls(t, c, "hget"); n < 200 || n > calls+1 {
		t.Errorf("HGET ran %d times, want one per dead bucket (about 260)", n)
	}
	if n, _ := c.HLen(ctx, hashOf(t, prefix, "k")).Result(); n > 100+1 {
		t.Errorf("the hash holds %d fields, want at most W/B + 1", n)
	}
}

// bigCost is a cost far above any capacity the tests use.
const bigCost = int64(1) << 40
