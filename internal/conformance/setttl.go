package conformance

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redisprov"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// setMeta reads the newest bucket's start n and the TTL span t of a set's
// hash with the layouts of internal/redisprov (docs/data-model.md): absolute,
// both from the meta field "m",
// "<c> <u> <o> <n> <nc> <t>"; suppressed, n from "m", "<u> <x> <o> <n> <nc>
// <nd>", and t from "k", "<c> <hc> <f> <ft> <t>".
func setMeta(t *testing.T, s Strategy, c redis.Cmdable, h string) (n, span int64) {
	t.Helper()
	v, err := c.HMGet(context.Background(), h, "m", "k").Result()
	if err != nil {
		t.Fatalf("HMGET %s m k: %v", h, err)
	}
	m, _ := v[0].(string)
	k, _ := v[1].(string)
	if s == SuppressedStrategy {
		fm, ok1 := redisprov.SupMeta.Parse(m)
		fk, ok2 := redisprov.SupSetRate.Parse(k)
		if ok1 && ok2 {
			return fm["n"], fk["t"]
		}
	} else if fm, ok := redisprov.AbsSetMeta.Parse(m); ok && s == AbsoluteStrategy {
		return fm["n"], fm["t"]
	}
	t.Fatalf("HMGET %s m k = %q, %q; want the set layout of the %s strategy", h, m, k, s.keyName())
	return 0, 0
}

// ttlSets are two sets that give the limit "x" different windows (and
// buckets), as two tiers might.
func ttlSets(t *testing.T, w1, b1, w2, b2 time.Duration) [2]*limiter.Set {
	t.Helper()
	a, err := limiter.NewSet(
		limiter.Limit{Name: "x", Rate: limiter.PerSecond(200), Window: w1, Bucket: b1},
		limiter.Limit{Name: "y", Rate: limiter.PerSecond(100), Window: w1, Bucket: b1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := limiter.NewSet(
		limiter.Limit{Name: "x", Rate: limiter.PerSecond(300), Window: w2, Bucket: b2})
	if err != nil {
		t.Fatal(err)
	}
	return [2]*limiter.Set{a, b}
}

// RunSetTTL checks on miniredis mr, whose TTLs and TIME run on the fake
// clock clk, through l (a Redis provider of strategy s on mr's client c,
// under prefix), the expiry rule of a set's hashes (abs_set.lua and
// sup_set.lua, docs/data-model.md):
// after every call each hash expires exactly at n + t, its newest bucket's
// start plus the span t stored in its meta field; t is the W + B of a
// limit that wrote it and at least the W + B of every write since the hash
// was created (every admitted one; suppressed, every offer, since a
// refusal records it too) (two windows for one name never shorten what the
// longer one counts); PTTL is in (0, t]; and with one window for the name
// the hash dies exactly W + B after its newest bucket opened, a join
// setting no new TTL.
func RunSetTTL(t *testing.T, s Strategy, mr *miniredis.Miniredis, c redis.Cmdable, clk *Clock, l limiter.SetLimiter, prefix string) {
	ctx := context.Background()
	const w1, b1, w2, b2 = time.Second, 100 * time.Millisecond, 2 * time.Second, 50 * time.Millisecond
	sp := [2]int64{(w1 + b1).Milliseconds(), (w2 + b2).Milliseconds()}
	sets := ttlSets(t, w1, b1, w2, b2)
	hx, err := key.LimitName(prefix, "k", s.keyName(), "x")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	longest := int64(0) // the longest W + B admitted into x since it was created
	mixed, raised, conflicts := 0, 0, 0
	for i := 0; i < 2000; i++ {
		if rng.IntN(10) == 0 {
			clk.Advance(time.Duration(1000+rng.IntN(2000)) * time.Millisecond) // x may die
		} else {
			clk.Advance(time.Duration(rng.IntN(400)) * time.Millisecond)
		}
		if !mr.Exists(hx) {
			longest = 0
		}
		j := rng.IntN(2)
		n := int64(rng.IntN(4))
		var before int64
		if mr.Exists(hx) {
			var newest int64
			newest, before = setMeta(t, s, c, hx)
			if n > 0 && clk.Now().UnixMilli()-newest >= sp[j] {
				longest = 0 // dead under this call's window: a write deletes it
			}
		}
		d, err := l.IncSet(ctx, "k", sets[j], n)
		if errors.Is(err, limiter.ErrWindowConflict) {
			// x is live under the other window: refused, nothing written
			if !mr.Exists(hx) {
				t.Fatalf("step %d: IncSet: %v, but x has no state", i, err)
			}
			if _, span := setMeta(t, s, c, hx); span == sp[j] {
				t.Fatalf("step %d: IncSet: %v, but x has this call's span %d", i, err, span)
			}
			conflicts++
			continue
		}
		if err != nil {
			t.Fatalf("step %d: IncSet: %v", i, err)
		}
		if n > 0 && (d.Allowed || s == SuppressedStrategy) {
			longest = max(longest, sp[j])
		}
		if !mr.Exists(hx) {
			continue // a refused call or peek on an absent key
		}
		start, span := setMeta(t, s, c, hx)
		if span != sp[0] && span != sp[1] {
			t.Fatalf("step %d: t = %d, want one of the windows' W + B %v", i, span, sp)
		}
		if span < longest {
			t.Fatalf("step %d: t = %d, below the W + B %d of a write since the hash was created", i, span, longest)
		}
		if before != 0 && before != span {
			raised++
		}
		if longest == sp[1] && span == sp[1] && j == 0 && n > 0 && (d.Allowed || s == SuppressedStrategy) {
			mixed++ // the shorter window wrote a hash the longer one keeps
		}
		now := clk.Now()
		ttl := mr.TTL(hx)
		if ttl <= 0 || ttl > time.Duration(span)*time.Millisecond {
			t.Fatalf("step %d: PTTL = %v, want in (0, %dms]", i, ttl, span)
		}
		if want := time.UnixMilli(start + span).Sub(now); ttl != want {
			t.Fatalf("step %d: after IncSet(%d, %d) PTTL = %v, want %v: t = %dms after the newest bucket opened", i, j, n, ttl, want, span)
		}
	}
	// One name, two windows: while x lives under one, the other's calls
	// are ErrWindowConflict, so no write of the shorter window meets the
	// longer one's span and none raises it.
	if mixed != 0 || raised != 0 || conflicts == 0 {
		t.Fatalf("%d writes of the shorter window kept the longer one's span, %d raised it, %d conflicts: want 0, 0, some", mixed, raised, conflicts)
	}

	// One window: a join sets no TTL, and the hash goes W + B after its
	// newest bucket opened, not W + B after the join.
	clk.Advance(w2 + b2)
	if mr.Exists(hx) {
		t.Fatal("hash still there after the longest W + B of silence")
	}
	if d, err := l.IncSet(ctx, "k", sets[0], 1); err != nil || !d.Allowed {
		t.Fatalf("IncSet: %+v, %v", d, err)
	}
	opened := clk.Now()
	const j1, j2 = 20 * time.Millisecond, 10 * time.Millisecond // joins: below both buckets
	clk.Advance(j1)
	if d, err := l.IncSet(ctx, "k", sets[0], 1); err != nil || !d.Allowed {
		t.Fatalf("IncSet: %+v, %v", d, err)
	}
	if n, span := setMeta(t, s, c, hx); n != opened.UnixMilli() || span != sp[0] {
		t.Fatalf("newest bucket %d, t %d; want the join of %d, t %d", n, span, opened.UnixMilli(), sp[0])
	}
	if ttl := mr.TTL(hx); ttl != w1+b1-j1 {
		t.Fatalf("after a join PTTL = %v, want %v", ttl, w1+b1-j1)
	}
	// The longer window is refused and changes nothing.
	if _, err := l.IncSet(ctx, "k", sets[1], 1); !errors.Is(err, limiter.ErrWindowConflict) {
		t.Fatalf("IncSet of the other window = %v, want ErrWindowConflict", err)
	}
	if n, span := setMeta(t, s, c, hx); n != opened.UnixMilli() || span != sp[0] {
		t.Fatalf("newest bucket %d, t %d; want %d, t %d", n, span, opened.UnixMilli(), sp[0])
	}
	if ttl := mr.TTL(hx); ttl != w1+b1-j1 {
		t.Fatalf("after the refused call PTTL = %v, want %v", ttl, w1+b1-j1)
	}
	clk.Advance(w1 + b1 - j1 - time.Millisecond)
	if !mr.Exists(hx) {
		t.Fatal("hash gone while its newest bucket is live")
	}
	clk.Advance(time.Millisecond)
	if keys := mr.Keys(); len(keys) != 0 {
		t.Fatalf("keys left after W + B of silence: %q", keys)
	}
}

// RunSetTTLReal checks the rule through l (a Redis provider of strategy s
// on c, under prefix) on a real server with its own clock
// and short windows, two of them for one name: after every call 0 < PTTL
// ≤ t, the hash lives at least until its newest bucket dies under t (and t
// covers every admitted write's W + B), and it is gone t after its newest
// bucket opened.
func RunSetTTLReal(t *testing.T, s Strategy, c redis.Cmdable, l limiter.SetLimiter, prefix string) {
	ctx := context.Background()
	const w1, b1, w2, b2 = 200 * time.Millisecond, 20 * time.Millisecond, 300 * time.Millisecond, 10 * time.Millisecond
	sp := [2]int64{(w1 + b1).Milliseconds(), (w2 + b2).Milliseconds()}
	sets := ttlSets(t, w1, b1, w2, b2)
	hx, err := key.LimitName(prefix, "k", s.keyName(), "x")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	starts := map[int64]bool{}
	spans := map[int64]bool{}
	longest := int64(0)
	calls, conflicts := 0, 0
	for i := 0; i < 60; i++ {
		time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
		j := rng.IntN(2)
		d, err := l.IncSet(ctx, "k", sets[j], 1)
		if errors.Is(err, limiter.ErrWindowConflict) {
			conflicts++ // x lives under the other window
			continue
		}
		if err != nil || !d.Allowed {
			t.Fatalf("IncSet %d: %+v, %v", i, d, err)
		}
		calls++
		longest = max(longest, sp[j])
		pttl, err := c.PTTL(ctx, hx).Result()
		if err != nil {
			t.Fatal(err)
		}
		now, err := c.Time(ctx).Result() // read after PTTL: now is no earlier than its instant
		if err != nil {
			t.Fatal(err)
		}
		n, span := setMeta(t, s, c, hx)
		starts[n], spans[span] = true, true
		if span < longest {
			t.Fatalf("after IncSet %d t = %d, below an admitted write's W + B %d", i, span, longest)
		}
		if pttl <= 0 || pttl > time.Duration(span)*time.Millisecond {
			t.Fatalf("after IncSet %d PTTL = %v, want in (0, %dms]", i, pttl, span)
		}
		// 2 ms: TIME and the script's expiry instant may round apart.
		if live := time.UnixMilli(n + span).Sub(now); pttl < live-2*time.Millisecond {
			t.Fatalf("after IncSet %d PTTL = %v, but the newest bucket is live %v more", i, pttl, live)
		}
	}
	if len(starts) < 2 || len(starts) == calls || conflicts == 0 {
		t.Fatalf("%d buckets for %d calls, %d conflicts: the trace must join, open and meet the other window", len(starts), calls, conflicts)
	}
	n, span := setMeta(t, s, c, hx)
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.UnixMilli(n + span + 2).Sub(now))
	if k, err := c.Exists(ctx, hx).Result(); err != nil || k != 0 {
		t.Fatalf("EXISTS %s t after its newest bucket opened = %d, %v; want 0", hx, k, err)
	}
}

// keyName is the strategy's part of a Redis key name (package key).
func (s Strategy) keyName() string {
	if s == SuppressedStrategy {
		return key.Suppressed
	}
	return key.Absolute
}
