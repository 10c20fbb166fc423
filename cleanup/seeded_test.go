package cleanup_test

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// The seeded key space of TestRunSeeded (issue: "Must show").
const (
	seedLive    = 10_000 // live keys, half per strategy
	seedDead    = 10_000 // hashes whose buckets are all dead, with a TTL of an hour
	seedNoTTL   = 1_000  // live keys without a TTL
	seedOther   = 1_000  // keys of another prefix: half dead with a long TTL, half without TTL
	seedForeign = 1_000  // keys matching <prefix>:{* that are not of the schema
	seedTrim    = 100    // live hashes with more dead buckets than the threshold
	seedKeep    = 100    // live hashes with fewer dead buckets than the threshold
)

// seedW is the window of every seeded key; B is the default W/100.
const (
	seedW = 5 * time.Minute
	seedB = seedW / 100
)

var seedSpan = (seedW + seedB).Milliseconds()

// seededKey is one limiter key of the seed.
type seededKey struct {
	strategy, user, redis string
}

type seed struct {
	live, noTTL, trim, keep, dead []seededKey
	other, foreign                []string // Redis keys
}

func keysOf(ks []seededKey) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.redis
	}
	return out
}

func makeKeys(t testing.TB, prefix, kind string, n int) []seededKey {
	out := make([]seededKey, n)
	for i := range out {
		s := strategies[i%2]
		u := fmt.Sprintf("%s:%d", kind, i)
		out[i] = seededKey{s, u, hashName(t, prefix, u, s)}
	}
	return out
}

func byStrategy(ks []seededKey, s string) []string {
	var out []string
	for _, k := range ks {
		if k.strategy == s {
			out = append(out, k.user)
		}
	}
	return out
}

// seedKeys writes the key space through c, the buckets timed against Redis
// TIME (now).
func seedKeys(t testing.TB, c redis.UniversalClient, prefix string, now time.Time) *seed {
	t.Helper()
	s := &seed{
		live:  makeKeys(t, prefix, "live", seedLive),
		noTTL: makeKeys(t, prefix, "nottl", seedNoTTL),
		trim:  makeKeys(t, prefix, "trim", seedTrim),
		keep:  makeKeys(t, prefix, "keep", seedKeep),
		dead:  makeKeys(t, prefix, "dead", seedDead),
	}
	other := prefix + "-other"
	win := limiter.WithWindow(seedW)
	for _, st := range strategies {
		l := newLimiter(t, st, c, win, limiter.WithPrefix(prefix))
		incAll(t, l, byStrategy(s.live, st))
		incAll(t, l, byStrategy(s.noTTL, st))
		// Dead: the newest bucket opened an hour ago.
		old := newLimiter(t, st, c, win, limiter.WithPrefix(prefix), limiter.WithClock(fixed(now.Add(-time.Hour)).Now))
		incAll(t, old, byStrategy(s.dead, st))
		// Another prefix: dead ones and live ones without a TTL.
		var od, ol []string
		for i := 0; i < seedOther/2; i++ {
			od = append(od, fmt.Sprintf("%s-dead:%d", st, i))
			ol = append(ol, fmt.Sprintf("%s-live:%d", st, i))
		}
		incAll(t, newLimiter(t, st, c, win, limiter.WithPrefix(other), limiter.WithClock(fixed(now.Add(-time.Hour)).Now)), od)
		incAll(t, newLimiter(t, st, c, win, limiter.WithPrefix(other)), ol)
		for _, k := range append(od, ol...) {
			s.other = append(s.other, hashName(t, other, k, st))
		}
		pipe(t, c, s.other[len(s.other)-len(ol):], func(p redis.Pipeliner, k string) *redis.BoolCmd { return p.Persist(ctx, k) })
		// Trim and keep: one Inc per bucket, 100 buckets B apart, the
		// first 550 s (trim) or 320 s (keep) ago: about 83 or 6 of them
		// dead now, against a threshold of 64.
		for _, set := range []struct {
			keys []string
			back time.Duration
		}{{byStrategy(s.trim, st), 550 * time.Second}, {byStrategy(s.keep, st), 320 * time.Second}} {
			clk := &stepClock{now: now.Add(-set.back)}
			l := newLimiter(t, st, c, win, limiter.WithPrefix(prefix), limiter.WithClock(clk.Now))
			for i := 0; i < 100; i++ {
				incAll(t, l, set.keys)
				clk.Advance(seedB)
			}
		}
	}
	pipe(t, c, keysOf(s.dead), func(p redis.Pipeliner, k string) *redis.BoolCmd { return p.Expire(ctx, k, time.Hour) })
	pipe(t, c, keysOf(s.noTTL), func(p redis.Pipeliner, k string) *redis.BoolCmd { return p.Persist(ctx, k) })
	// Foreign: strings, hashes and sets whose names match the pattern.
	for i := 0; i < seedForeign; i++ {
		var k string
		switch i % 4 {
		case 0:
			k = fmt.Sprintf("%s:{foreign:%d}", prefix, i)
		case 1:
			k = fmt.Sprintf("%s:{foreign:%d}:abs", prefix, i)
		case 2:
			k = fmt.Sprintf("%s:{foreign:%d}:abs:h:", prefix, i)
		default:
			k = fmt.Sprintf("%s:{foreign%%zz%d}:sup:h", prefix, i) // a bad escape
		}
		s.foreign = append(s.foreign, k)
	}
	pipe(t, c, s.foreign, func(p redis.Pipeliner, k string) redis.Cmder {
		switch len(k) % 3 {
		case 0:
			return p.Set(ctx, k, "x", 0)
		case 1:
			return p.HSet(ctx, k, "m", "1 1 1 1 1")
		}
		return p.SAdd(ctx, k, "a", "b")
	})
	return s
}

// state is what a key holds: its DUMP and PTTL.
type state struct {
	dump string
	pttl time.Duration
}

func states(t testing.TB, c redis.Cmdable, keys []string) map[string]state {
	t.Helper()
	dumps := pipe(t, c, keys, func(p redis.Pipeliner, k string) *redis.StringCmd { return p.Dump(ctx, k) })
	ttls := pipe(t, c, keys, func(p redis.Pipeliner, k string) *redis.DurationCmd { return p.PTTL(ctx, k) })
	out := make(map[string]state, len(keys))
	for i, k := range keys {
		out[k] = state{dumps[i].Val(), ttls[i].Val()}
	}
	return out
}

func hashes(t testing.TB, c redis.Cmdable, keys []string) []map[string]string {
	t.Helper()
	cmds := pipe(t, c, keys, func(p redis.Pipeliner, k string) *redis.MapStringStringCmd { return p.HGetAll(ctx, k) })
	out := make([]map[string]string, len(cmds))
	for i, cmd := range cmds {
		out[i] = cmd.Val()
	}
	return out
}

func usages(t testing.TB, ls map[string]limiter.Limiter, ks []seededKey) []limiter.Usage {
	t.Helper()
	out := make([]limiter.Usage, len(ks))
	parallel(t, len(ks), func(i int) error {
		u, err := ls[ks[i].strategy].Get(ctx, ks[i].user)
		out[i] = u
		return err
	})
	return out
}

// TestRunSeeded: one pass over the seeded key space on a private server
// deletes exactly the dead hashes, gives every TTL-less key its TTL, trims
// the hashes with more dead buckets than the threshold and only those,
// leaves every live key's Get unchanged and every key of another prefix or
// not of the schema untouched; the report's figures are those numbers.
func TestRunSeeded(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	runSeeded(t, c, 1)
}

// TestRunSeededCluster: the same on the shared three-master cluster, walked
// master by master.
func TestRunSeededCluster(t *testing.T) {
	c := redistest.Cluster(t)
	runSeeded(t, c, 3)
}

func runSeeded(t *testing.T, c redis.UniversalClient, nodes int) {
	prefix := redistest.Prefix(t)
	now := redisNow(t, c)
	s := seedKeys(t, c, prefix, now)

	getters := map[string]limiter.Limiter{}
	for _, st := range strategies {
		getters[st] = newLimiter(t, st, c, limiter.WithWindow(seedW), limiter.WithPrefix(prefix))
	}
	liveBefore := usages(t, getters, s.live)
	noTTLBefore := usages(t, getters, s.noTTL)
	untouched := append(append([]string{}, s.other...), s.foreign...)
	untouchedBefore := states(t, c, untouched)
	trimBefore := hashes(t, c, keysOf(s.trim))
	keepBefore := hashes(t, c, keysOf(s.keep))
	for i, f := range keepBefore {
		if n := len(viewOf(s.keep[i].strategy, f).dead(now.UnixMilli(), seedSpan)); n == 0 || n >= cleanup.DefaultTrimThreshold-20 {
			t.Fatalf("seed: keep key %q has %d dead buckets, want a few", s.keep[i].redis, n)
		}
	}

	cl := newCleaner(t, c, cleanup.WithPrefix(prefix), cleanup.WithWindow(seedW, 0), cleanup.WithRate(math.Inf(1)))
	r, err := cl.Run(ctx)
	if err != nil {
		t.Fatalf("Run: %v\n%v", err, r)
	}
	after := redisNow(t, c)
	t.Logf("report:\n%v", r)

	// Dead hashes are gone.
	exists := pipe(t, c, keysOf(s.dead), func(p redis.Pipeliner, k string) *redis.IntCmd { return p.Exists(ctx, k) })
	for i, e := range exists {
		if e.Val() != 0 {
			t.Fatalf("dead hash %q still exists", s.dead[i].redis)
		}
	}
	// TTL-less keys expire when their newest bucket dies: at n + W + B
	// (PEXPIRETIME, absolute, so no clock read can blur it).
	noTTLHashes := hashes(t, c, keysOf(s.noTTL))
	at := pipe(t, c, keysOf(s.noTTL), func(p redis.Pipeliner, k string) *redis.DurationCmd { return p.PExpireTime(ctx, k) })
	for i, k := range s.noTTL {
		v := viewOf(k.strategy, noTTLHashes[i])
		if got, want := at[i].Val().Milliseconds(), v.newest+seedSpan; got != want {
			t.Fatalf("%q: PEXPIRETIME %d, want %d (newest bucket %d + W + B)", k.redis, got, want, v.newest)
		}
	}
	// Live keys read the same.
	if got := usages(t, getters, s.live); !reflect.DeepEqual(got, liveBefore) {
		t.Errorf("Get of the live keys changed")
	}
	if got := usages(t, getters, s.noTTL); !reflect.DeepEqual(got, noTTLBefore) {
		t.Errorf("Get of the TTL-less keys changed")
	}
	// Keys of another prefix and foreign keys: same content, same TTL kind.
	for k, st := range states(t, c, untouched) {
		b := untouchedBefore[k]
		if st.dump != b.dump || (st.pttl < 0) != (b.pttl < 0) || st.pttl > b.pttl {
			t.Fatalf("%q changed: PTTL %v → %v, DUMP equal %v", k, b.pttl, st.pttl, st.dump == b.dump)
		}
	}
	// Trimmed hashes lost exactly their dead buckets, keep their totals
	// consistent and answer Get as before at any instant from now on.
	var buckets int64
	trimAfter := hashes(t, c, keysOf(s.trim))
	for i, k := range s.trim {
		bv, av := viewOf(k.strategy, trimBefore[i]), viewOf(k.strategy, trimAfter[i])
		if err := av.consistent(); err != nil {
			t.Fatalf("%q after the trim: %v", k.redis, err)
		}
		removed := len(bv.offered) - len(av.offered)
		buckets += int64(removed)
		if removed < cleanup.DefaultTrimThreshold {
			t.Errorf("%q: %d buckets removed, want more than %d", k.redis, removed, cleanup.DefaultTrimThreshold)
		}
		if d := av.dead(now.UnixMilli(), seedSpan); len(d) > 0 {
			t.Errorf("%q: %d buckets dead before the pass are still stored", k.redis, len(d))
		}
		for st := range bv.offered {
			if _, ok := av.offered[st]; !ok && after.UnixMilli()-st < seedSpan {
				t.Errorf("%q: live bucket %d removed", k.redis, st)
			}
		}
		for _, at := range []int64{after.UnixMilli(), after.UnixMilli() + 10_000, after.UnixMilli() + 200_000} {
			bu, bd := bv.usage(at, seedSpan)
			au, ad := av.usage(at, seedSpan)
			if bu != au || bd != ad {
				t.Errorf("%q: usage at %d was %d/%d, now %d/%d", k.redis, at, bu, bd, au, ad)
			}
			g := newLimiter(t, k.strategy, c, limiter.WithWindow(seedW), limiter.WithPrefix(prefix), limiter.WithClock(fixed(time.UnixMilli(at)).Now))
			u, err := g.Get(ctx, k.user)
			if err != nil || u.Used != au || u.Declined != ad {
				t.Errorf("%q: Get at %d = %+v, %v; want used %d, declined %d", k.redis, at, u, err, au, ad)
			}
		}
	}
	// Hashes below the threshold are untouched.
	for i, f := range hashes(t, c, keysOf(s.keep)) {
		if !reflect.DeepEqual(f, keepBefore[i]) {
			t.Fatalf("%q below the threshold changed", s.keep[i].redis)
		}
	}

	want := cleanup.Report{
		CleanupReport: limiter.CleanupReport{
			Scanned:  seedLive + seedDead + seedNoTTL + seedForeign + seedTrim + seedKeep,
			Deleted:  seedDead,
			Trimmed:  seedTrim,
			Duration: r.Duration,
		},
		Prefix:   prefix,
		Nodes:    nodes,
		Live:     seedLive + seedNoTTL + seedTrim + seedKeep,
		TTLSet:   seedNoTTL,
		Buckets:  buckets,
		Skipped:  map[cleanup.Reason]int64{cleanup.Foreign: seedForeign},
		Examples: r.Examples,
		// each dead hash is listed with the window it records
		Deletions: r.Deletions,
	}
	if len(r.Deletions) != cleanup.MaxListed {
		t.Errorf("%d deletions listed, want %d", len(r.Deletions), cleanup.MaxListed)
	}
	for _, d := range r.Deletions {
		if d.Window != seedW || d.Bucket != seedB {
			t.Errorf("deletion %+v: want window %v, bucket %v", d, seedW, seedB)
			break
		}
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("report:\n%v\nwant:\n%v", r, want)
	}
	if len(r.Examples[cleanup.Foreign]) != 5 {
		t.Errorf("examples of foreign keys: %q, want 5", r.Examples[cleanup.Foreign])
	}

	// A second pass finds nothing to do.
	r2, err := cl.Run(ctx)
	if err != nil || r2.Deleted != 0 || r2.TTLSet != 0 || r2.Trimmed != 0 || r2.Scanned != want.Scanned-seedDead {
		t.Errorf("second pass: %v, %v; want nothing done over %d keys", r2, err, want.Scanned-seedDead)
	}
}
