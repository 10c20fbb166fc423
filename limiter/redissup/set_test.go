package redissup_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// TestSets runs the shared set step tables (factors combined by their
// maximum, one limit refusing, n over a hard capacity, n = 0) on every
// Redis set-up.
func TestSets(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) { conformance.RunSets(t, conformance.SuppressedStrategy, p.f) })
	}
}

// TestSetTrace feeds the local provider and Redis the same random trace of
// 3-limit set calls (two tiers sharing names, windows from 200 ms to 20 s,
// costs beyond a hard capacity, peeks, GetSet, ResetSet and single Incs on
// the same keys), each with its own identically seeded source, and checks
// every decision field for field: the factors combine the same way
// whatever the provider.
//
// The trace gives one limit name ("slow") two buckets in different sets. A
// hash lives W + B after its latest write, of the latest call's W + B, as
// the local provider keeps a limit's state; under WithClock both add a
// minute of slack (redisprov.ClockSlackMs), and a later call with a longer
// bucket may still count a bucket the shorter TTL has dropped. So on
// miniredis the trace sends the clock as the other set-ups do
// (miniClockFactory), while miniredis's TTLs still follow it.
func TestSetTrace(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	ps := append([]struct {
		name string
		f    conformance.Factory
	}{{"Mini", miniClockFactory}}, providers[1:]...)
	for _, p := range ps {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel() // miniredis runs in this process, the servers in theirs
			// miniredis runs 1,500 steps per seed (its gopher-lua is slow
			// under the race detector), the servers 5,000.
			steps := 5000
			if p.name == "Mini" {
				steps = 1500
			}
			for _, seed := range []uint64{1, 2} {
				admitted, refused := conformance.RunSetTrace(t, conformance.SuppressedStrategy, steps, seed, localFactory, p.f)
				t.Logf("seed %d: %d admitted, %d refused", seed, admitted, refused)
				if admitted == 0 || refused == 0 {
					t.Errorf("seed %d: trace admitted %d and refused %d set calls, want some of each", seed, admitted, refused)
				}
			}
		})
	}
}

// miniClockFactory builds a limiter on a fresh miniredis whose TIME and
// TTLs follow clk, and sends clk's reading to the scripts (WithClock), so
// that writes get the minute of TTL slack the local reference keeps too.
func miniClockFactory(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
	t.Helper()
	mr, c := redistest.Mini(t)
	clk.Drive(mr)
	return newLimiter(t, c, with(opts, limiter.WithClock(clk.Now), limiter.WithPrefix(redistest.Prefix(t)))...)
}

// setRegimes counts the IncSet decisions of a trace by the set's factor.
type setRegimes struct {
	calls, below, between, betweenRefused, beyondHard, never, peeks int
}

// overloadSetTrace feeds the local reference and the provider from f the
// same trace of set calls on keys offered about 150 units/s against two
// tiers of the same three limits (100 ms, 1 s and 3 s windows, W/B = 100),
// (and a fourth tier of lower rates), so that the limits sit below,
// between and beyond their soft and hard
// capacities (F = 1.5) in turn, with factors cached 100 ms, dead buckets
// expired by links and scans, peeks (IncSet with n = 0), GetSet and ResetSet. It
// fails at the first difference.
func overloadSetTrace(t *testing.T, f conformance.Factory, steps int, seed uint64) setRegimes {
	t.Helper()
	clk := conformance.NewClock()
	opts := []limiter.Option{limiter.WithHardLimitFactor(1.5), limiter.WithSuppressionCache(100 * time.Millisecond)}
	ref := localFactory(t, clk, with(opts, limiter.WithRandom(conformance.NewRand(seed)))...)
	defer ref.Close(ctx)
	got := f(t, clk, with(opts, limiter.WithRandom(conformance.NewRand(seed)))...)
	defer got.Close(ctx)
	sr, sg := ref.(limiter.SetLimiter), got.(limiter.SetLimiter)
	tier := func(short, sec, long float64) *limiter.Set {
		s, err := limiter.NewSet(
			limiter.Limit{Name: "short", Rate: limiter.PerSecond(short), Window: 100 * time.Millisecond},
			limiter.Limit{Name: "sec", Rate: limiter.PerSecond(sec), Window: time.Second},
			limiter.Limit{Name: "long", Rate: limiter.PerSecond(long), Window: 3 * time.Second},
		)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// A key moves to the next tier every 1,500 steps; the last tier's
	// lower rates put the state its predecessors let in beyond their hard
	// capacities.
	tiers := []*limiter.Set{tier(400, 100, 50), tier(1000, 300, 150), tier(150, 200, 250), tier(100, 30, 15)}
	keys := []string{"k0", "user:1", "tier {free}"}
	rng := rand.New(rand.NewPCG(seed, 11))
	var r setRegimes
	for i := 0; i < steps; i++ {
		switch x := rng.IntN(2000); {
		case x < 1:
			clk.Advance(3*time.Second + time.Duration(rng.IntN(500))*time.Millisecond)
		case x < 10:
			clk.Advance(time.Duration(50+rng.IntN(300)) * time.Millisecond)
		default:
			clk.Advance(time.Duration(1+rng.IntN(3)) * time.Millisecond)
		}
		ki := rng.IntN(len(keys))
		k := keys[ki]
		set := tiers[(ki+i/1500)%len(tiers)]
		at := clk.Now().Sub(conformance.Start)
		switch x := rng.IntN(1000); {
		case x < 800:
			var n int64
			switch y := rng.IntN(100); {
			case y < 6:
				n = 0
				r.peeks++
			case y < 86:
				n = 1
			case y < 98:
				n = int64(2 + rng.IntN(3))
			default:
				n = 1000 // beyond every hard capacity of "short"
			}
			a, ea := sr.IncSet(ctx, k, set, n)
			b, eb := sg.IncSet(ctx, k, set, n)
			if ea != nil || eb != nil {
				t.Fatalf("step %d at +%v: IncSet(%q, %v, %d) errors: %v / %v", i, at, k, set, n, ea, eb)
			}
			if !conformance.SameSet(a, b) {
				t.Fatalf("step %d at +%v: IncSet(%q, %v, %d) =\n\t%s\nwant\t%s", i, at, k, set, n, conformance.FormatSet(b), conformance.FormatSet(a))
			}
			r.calls++
			switch f := a.SuppressionFactor; {
			case a.Never:
				r.never++
			case f == 0:
				r.below++
			case f < 1:
				r.between++
				if !a.Allowed {
					r.betweenRefused++
				}
			default:
				r.beyondHard++
			}
		case x < 900:
			a, ea := sr.IncSet(ctx, k, set, 0)
			b, eb := sg.IncSet(ctx, k, set, 0)
			if ea != nil || eb != nil || !conformance.SameSet(a, b) {
				t.Fatalf("step %d at +%v: IncSet(%q, %v, 0) =\n\t%s, %v\nwant\t%s, %v", i, at, k, set, conformance.FormatSet(b), eb, conformance.FormatSet(a), ea)
			}
		case x < 998:
			a, ea := sr.GetSet(ctx, k, set)
			b, eb := sg.GetSet(ctx, k, set)
			if ea != nil || eb != nil || fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("step %d at +%v: GetSet(%q, %v) = %+v, %v, want %+v, %v", i, at, k, set, b, eb, a, ea)
			}
		default:
			if ea, eb := sr.ResetSet(ctx, k, set), sg.ResetSet(ctx, k, set); ea != nil || eb != nil {
				t.Fatalf("step %d at +%v: ResetSet(%q) errors: %v / %v", i, at, k, ea, eb)
			}
		}
	}
	return r
}

// TestSetSameAsLocalOverloaded shows, regime by regime, that a set decides
// on Redis exactly as on the local provider given the same seeded source:
// the factors, the draw against the largest, the declined offers recorded
// in every limit, RetryAfter and the cached factors.
//
// The real server runs 6,000 steps, miniredis the first 3,000 of the same
// trace: its gopher-lua runs in this process, one to two milliseconds of
// CPU a call under the race detector (20 s of CPU at 6,000 steps, now
// 10 s). With the keys a tier apart, the 3,000 steps still visit all four
// tiers and the move into the last one, and every regime below.
func TestSetSameAsLocalOverloaded(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, p := range providers[:2] {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel() // miniredis runs in this process, the server in its own
			steps := 6000
			if p.name == "Mini" {
				steps = 3000
			}
			r := overloadSetTrace(t, p.f, steps, 5)
			t.Logf("%+v", r)
			wantRegimes(t, "IncSet", r.calls, []regime{
				{"below soft", r.below, r.calls / 20},
				{"between soft and hard", r.between, r.calls / 20},
				{"refused between soft and hard", r.betweenRefused, r.calls / 50},
				{"beyond hard", r.beyondHard, r.calls / 50},
				{"never", r.never, 10},
				{"peeks", r.peeks, r.calls / 50},
			})
		})
	}
}

// clusterSet is the set of the cluster and error tests: a second, a
// minute and a day.
func clusterSet(t testing.TB) *limiter.Set {
	t.Helper()
	s, err := limiter.NewSet(
		limiter.Limit{Name: "per-second", Rate: limiter.PerSecond(10), Window: time.Second},
		limiter.Limit{Name: "per-minute", Rate: limiter.PerMinute(100), Window: time.Minute},
		limiter.Limit{Name: "daily", Rate: limiter.PerDay(1000), Window: 24 * time.Hour},
	)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSetCluster shows a set on the real three-master cluster: every hash
// of one key is in the slot of the key's escaped form (CLUSTER KEYSLOT),
// so the one script call that touches them all is served, for keys full of
// braces too; every hash gets the PEXPIRE of its own limit (W + B); and
// ResetSet's one UNLINK of all of them is served as well.
func TestSetCluster(t *testing.T) {
	c := redistest.Cluster(t)
	prefix := redistest.Prefix(t)
	l := newLimiter(t, c, limiter.WithPrefix(prefix), limiter.WithHardLimitFactor(1.5))
	defer l.Close(ctx)
	set := clusterSet(t)
	for _, k := range []string{"user:42", "{", "}{", "{user}:42", "a{b}c", "tab\tand space", strings.Repeat("k", 512)} {
		d, err := l.IncSet(ctx, k, set, 2)
		if err != nil || !d.Allowed {
			t.Fatalf("IncSet(%q, 2) = %s, %v; want admitted", k, conformance.FormatSet(d), err)
		}
		if d, err := l.IncSet(ctx, k, set, 0); err != nil || !d.Allowed || d.Remaining != 8 {
			t.Errorf("IncSet(%q, 0) = %s, %v; want admitted with 8 remaining", k, conformance.FormatSet(d), err)
		}
		us, err := l.GetSet(ctx, k, set)
		if err != nil {
			t.Fatalf("GetSet(%q): %v", k, err)
		}
		want, err := c.ClusterKeySlot(ctx, key.Escape(k)).Result()
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < set.Len(); i++ {
			lim := set.At(i)
			if us[i] != (limiter.Usage{Used: 2, Limit: capacityAt(set, i)}) {
				t.Errorf("GetSet(%q)[%s] = %+v, want Used 2, Limit %d", k, lim.Name, us[i], capacityAt(set, i))
			}
			h, err := key.LimitName(prefix, k, key.Suppressed, lim.Name)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := c.ClusterKeySlot(ctx, h).Result(); err != nil || got != want {
				t.Errorf("CLUSTER KEYSLOT %q = %d, %v; want %d, the slot of the key", h, got, err, want)
			}
			span := lim.Window + lim.Bucket
			if ttl, err := c.PTTL(ctx, h).Result(); err != nil || ttl <= span-5*time.Second || ttl > span {
				t.Errorf("PTTL %q = %v, %v; want just under W + B = %v", h, ttl, err, span)
			}
		}
		if err := l.ResetSet(ctx, k, set); err != nil {
			t.Fatalf("ResetSet(%q): %v", k, err)
		}
		for i := 0; i < set.Len(); i++ {
			h, _ := key.LimitName(prefix, k, key.Suppressed, set.At(i).Name)
			if n, err := c.Exists(ctx, h).Result(); err != nil || n != 0 {
				t.Errorf("EXISTS %q after ResetSet = %d, %v; want 0", h, n, err)
			}
		}
	}
}

// TestSetErrors checks that bad input is a wrapped sentinel error, names
// the call, draws no number and leaves Redis untouched.
func TestSetErrors(t *testing.T) {
	mr, c := redistest.Mini(t)
	seq := conformance.NewSeq(0.5)
	l := newLimiter(t, c, limiter.WithRandom(seq.Float64), limiter.WithHardLimitFactor(2))
	set := clusterSet(t)
	// 1.5 × 2^49 units per day is a valid soft capacity, but twice that is more
	// than 2^50: the hard capacity is refused, naming the limit.
	huge, err := limiter.NewSet(limiter.Limit{Name: "huge", Rate: limiter.Every(3<<48, 24*time.Hour), Window: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		call func() error
		want error
		msg  string
	}{
		{"IncSet nil set", func() error { _, err := l.IncSet(ctx, "k", nil, 1); return err }, limiter.ErrInvalidConfig, "redissup: inc set: "},
		{"IncSet zero set", func() error { _, err := l.IncSet(ctx, "k", &limiter.Set{}, 1); return err }, limiter.ErrInvalidConfig, "redissup: inc set: "},
		{"IncSet n = -1", func() error { _, err := l.IncSet(ctx, "k", set, -1); return err }, limiter.ErrInvalidCost, "redissup: inc set: "},
		{"IncSet empty key", func() error { _, err := l.IncSet(ctx, "", set, 1); return err }, key.ErrInvalid, "redissup: inc set: "},
		{"IncSet long key", func() error { _, err := l.IncSet(ctx, strings.Repeat("k", 513), set, 1); return err }, key.ErrInvalid, "redissup: inc set: "},
		{"IncSet hard capacity", func() error { _, err := l.IncSet(ctx, "k", huge, 1); return err }, limiter.ErrInvalidRate, `redissup: inc set: limit "huge": `},
		{"IncSet peek nil set", func() error { _, err := l.IncSet(ctx, "k", nil, 0); return err }, limiter.ErrInvalidConfig, "redissup: inc set: "},
		{"IncSet peek empty key", func() error { _, err := l.IncSet(ctx, "", set, 0); return err }, key.ErrInvalid, "redissup: inc set: "},
		{"GetSet nil set", func() error { _, err := l.GetSet(ctx, "k", nil); return err }, limiter.ErrInvalidConfig, "redissup: get set: "},
		{"GetSet empty key", func() error { _, err := l.GetSet(ctx, "", set); return err }, key.ErrInvalid, "redissup: get set: "},
		{"ResetSet nil set", func() error { return l.ResetSet(ctx, "k", nil) }, limiter.ErrInvalidConfig, "redissup: reset set: "},
		{"ResetSet empty key", func() error { return l.ResetSet(ctx, "", set) }, key.ErrInvalid, "redissup: reset set: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) || !strings.HasPrefix(fmt.Sprint(err), tc.msg) {
				t.Errorf("error = %v, want %v prefixed %q", err, tc.want, tc.msg)
			}
		})
	}
	if n := seq.Draws(); n != 0 {
		t.Errorf("bad calls drew %d numbers, want 0", n)
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Errorf("bad calls wrote %q, want nothing", keys)
	}
	if _, err := l.IncSet(ctx, "k", set, 1); err != nil || seq.Draws() != 1 {
		t.Errorf("IncSet(k, 1) = %v with %d draws, want no error and 1 draw", err, seq.Draws())
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.IncSet(ctx, "k", set, 1); !errors.Is(err, limiter.ErrClosed) || seq.Draws() != 1 {
		t.Errorf("IncSet after Close = %v with %d draws, want ErrClosed and no new draw", err, seq.Draws())
	}
}

// TestSetConcurrent runs 64 goroutines of IncSet on one key of {20 per
// second, 100 per minute} (F = 1.5) on real Redis, in phases of one
// instant 100 ms apart, all within both windows. Every call is recorded
// in every limit, whole: each limit's accepted units are exactly the
// admitted calls' units and its declined units exactly the refused ones',
// and no limit ever accepts more than its hard capacity.
func TestSetConcurrent(t *testing.T) {
	clk := conformance.NewClock()
	l := realFactory(t, clk, limiter.WithHardLimitFactor(1.5))
	defer l.Close(ctx)
	sl := l.(limiter.SetLimiter)
	set, err := limiter.NewSet(
		limiter.Limit{Name: "second", Rate: limiter.PerSecond(20), Window: time.Second},
		limiter.Limit{Name: "minute", Rate: limiter.PerMinute(100), Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const g, phases = 64, 8
	var admitted, refused int64
	for p := 0; p < phases; p++ {
		for _, r := range conformance.SetPhase(t, sl, "hot", set, g, p) {
			if r.D.Allowed {
				admitted += r.N
			} else {
				refused += r.N
			}
		}
		us, err := sl.GetSet(ctx, "hot", set)
		if err != nil {
			t.Fatal(err)
		}
		for i, u := range us {
			if u.Used != admitted || u.Declined != refused {
				t.Fatalf("phase %d: GetSet[%s] = %+v, want Used %d (admitted) and Declined %d (refused)", p, set.At(i).Name, u, admitted, refused)
			}
			if hard := []int64{30, 150}[i]; u.Used > hard {
				t.Errorf("phase %d: limit %s accepted %d units, above its hard capacity %d", p, set.At(i).Name, u.Used, hard)
			}
		}
		clk.Advance(100 * time.Millisecond)
	}
	t.Logf("%d units admitted, %d refused", admitted, refused)
	if admitted == 0 || refused == 0 {
		t.Errorf("admitted %d and refused %d units, want some of each", admitted, refused)
	}
}

// TestSetFailurePolicies checks sets under each failure policy with Redis
// gone.
func TestSetFailurePolicies(t *testing.T) {
	conformance.RunSetFailurePolicies(t, conformance.SuppressedStrategy, func(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter {
		return newLimiter(t, c, opts...)
	})
}

// capacityAt is the capacity of set's i-th limit (Set.CapacityAt was).
func capacityAt(set *limiter.Set, i int) int64 {
	c, _ := limiter.Capacity(set.At(i).Rate, set.At(i).Window)
	return c
}
