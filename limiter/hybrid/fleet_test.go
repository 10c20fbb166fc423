package hybrid_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// A record is one admission as its caller saw it: the wall clock in ms
// read just before the call (lo) and just after it (hi). The admission
// happened at an instant in [lo, hi].
type record struct {
	lo, hi int64
	key    int32
	units  int32
	free   bool // admitted without suppression, not Degraded
}

// fleetRun is one saturated run of a fleet on a real Redis.
type fleetRun struct {
	keys       int   // keys the calls pick from, uniformly
	capacity   int64 // per key, per window
	hybrids    int   // hybrid instances, each with its own client
	redisabs   int   // redisabs instances mixed in
	goroutines int   // per instance
	window     time.Duration
	windows    int // measured windows, after one to warm up
	// forwards, when not nil, receives the forward-dated leases the
	// hybrid instances installed.
	forwards *int64
	// The suppressed strategy: hybrids are NewSuppressed, capacity is the
	// soft capacity S, the hard one is H = floor(capacity × factor), and
	// redissup instances are mixed in instead of redisabs ones.
	suppressed bool
	factor     float64
	redissup   int
}

// draws tallies the calls a factor between 0 and 1 decided (Suppressed,
// SuppressionFactor below 1): how many, how many were admitted, and the sum
// of 1 − f over them, the admissions the strategy's rule expects.
type draws struct {
	calls, admitted int64
	expected        float64
}

func (d *draws) note(dec limiter.Decision) {
	if dec.Suppressed && dec.SuppressionFactor < 1 {
		d.calls++
		d.expected += 1 - dec.SuppressionFactor
		if dec.Allowed {
			d.admitted++
		}
	}
}

// maxShedShare is the share of shed decisions above which a fleet's
// efficiency (not its bound) is only logged: shed callers were refused by
// design, so the key admits less.
const maxShedShare = 0.01

// bound is the most units any window may hold: C, or H.
func (r fleetRun) bound() int64 {
	if r.suppressed {
		return int64(float64(r.capacity)*r.factor + 1e-9)
	}
	return r.capacity
}

// run drives the fleet for windows + 1 windows and returns every
// admission, with the instant the measured part began.
// It also returns the share of the decisions that were shed (refused
// because a caller's budget ran out on a loaded machine), and the draws.
func (r fleetRun) run(t *testing.T) ([]record, int64, int64, float64, draws) {
	t.Helper()
	srv := redistest.Real(t)
	prefix := redistest.Prefix(t)
	rate := limiter.Every(float64(r.capacity), r.window)
	opts := []limiter.Option{limiter.WithPrefix(prefix), limiter.WithWindow(r.window),
		limiter.WithObserver(window.StateObserver(func(sc limiter.StateChange) {
			if sc.Degraded {
				t.Logf("%s: breaker opened: %v", sc.Provider, sc.Cause)
			}
		}))}
	type inc func(ctx context.Context, k string, n int64) (limiter.Decision, error)
	// Degraded and shed decisions, logged: the fleet's bound holds with
	// either, but a degraded one means a breaker opened.
	var degraded, shed atomic.Int64
	note := func(d limiter.Decision) {
		if d.Degraded {
			degraded.Add(1)
		}
		if d.Shed {
			shed.Add(1)
		}
	}
	defer func() { t.Logf("%d decisions degraded, %d shed", degraded.Load(), shed.Load()) }()
	var incs []inc
	var closers []func()
	var hybrids []*hybrid.Absolute
	if r.suppressed {
		opts = append(opts, limiter.WithHardLimitFactor(r.factor))
	}
	for i := 0; i < r.hybrids && r.suppressed; i++ {
		l := newDefaultSuppressed(t, srv.Client(t), opts...)
		incs = append(incs, func(ctx context.Context, k string, n int64) (limiter.Decision, error) {
			d, err := l.Inc(ctx, k, rate, n)
			note(d)
			return d, err
		})
		closers = append(closers, func() {
			l.Close(context.Background())
			f, rn, rel, ref := l.Calls()
			t.Logf("suppressed hybrid: %d lease requests, %d renewals, %d releases, %d refreshes, %d failed tick calls", f, rn, rel, ref, l.SyncErrors())
		})
	}
	for i := 0; i < r.redissup; i++ {
		l, err := redissup.New(srv.Client(t), opts...)
		if err != nil {
			t.Fatal(err)
		}
		incs = append(incs, func(ctx context.Context, k string, n int64) (limiter.Decision, error) {
			d, err := l.Inc(ctx, k, rate, n)
			note(d)
			return d, err
		})
		closers = append(closers, func() { l.Close(context.Background()) })
	}
	for i := 0; i < r.hybrids && !r.suppressed; i++ {
		l := newDefaultAbsolute(t, srv.Client(t), opts...)
		hybrids = append(hybrids, l)
		incs = append(incs, func(ctx context.Context, k string, n int64) (limiter.Decision, error) {
			d, err := l.Inc(ctx, k, rate, n)
			note(d)
			return d, err
		})
		closers = append(closers, func() { l.Close(context.Background()) })
	}
	for i := 0; i < r.redisabs; i++ {
		l, err := redisabs.New(srv.Client(t), opts...)
		if err != nil {
			t.Fatal(err)
		}
		incs = append(incs, func(ctx context.Context, k string, n int64) (limiter.Decision, error) {
			d, err := l.Inc(ctx, k, rate, n)
			note(d)
			return d, err
		})
		closers = append(closers, func() { l.Close(context.Background()) })
	}
	names := make([]string, r.keys)
	for i := range names {
		names[i] = "k" + strconv.Itoa(i)
	}
	start := time.Now()
	end := start.Add(time.Duration(r.windows+1) * r.window)
	var mu sync.Mutex
	var all []record
	var calls int64
	var drawn draws
	var errs []error
	var wg sync.WaitGroup
	for i, f := range incs {
		for g := 0; g < r.goroutines; g++ {
			wg.Add(1)
			go func(seed uint64) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, 1))
				var mine []record
				var dr draws
				ctx := context.Background()
				j := 0
				for ; ; j++ {
					k := int32(rng.IntN(r.keys))
					n := int64(1)
					if j%8 == 7 {
						n = 1 + rng.Int64N(3)
					}
					lo := time.Now()
					if !lo.Before(end) {
						break
					}
					d, err := f(ctx, names[k], n)
					hi := time.Now()
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						break
					}
					dr.note(d)
					if d.Allowed {
						mine = append(mine, record{lo.UnixMilli(), hi.UnixMilli(), k, int32(n), !d.Suppressed && !d.Degraded})
					}
				}
				mu.Lock()
				all = append(all, mine...)
				calls += int64(j)
				drawn.calls += dr.calls
				drawn.admitted += dr.admitted
				drawn.expected += dr.expected
				mu.Unlock()
			}(uint64(i*1000 + g))
		}
	}
	wg.Wait()
	for _, c := range closers {
		c()
	}
	if r.forwards != nil {
		for _, l := range hybrids {
			*r.forwards += l.Forwards()
		}
	}
	if len(errs) > 0 {
		t.Fatalf("%d calls failed, first: %v", len(errs), errs[0])
	}
	return all, start.Add(r.window).UnixMilli(), calls, float64(shed.Load()) / float64(max(calls, 1)), drawn
}

// mostInWindow returns, for one key's records sorted by lo, the most units
// that certainly fell in one span [t, t + W) (both ends of the record
// inside it), and the most that may have (counted at hi).
func mostInWindow(recs []record, w int64) (certain, byHi int64) {
	for i := range recs {
		t0 := recs[i].lo
		var sum int64
		for j := i; j < len(recs) && recs[j].lo < t0+w; j++ {
			if recs[j].hi < t0+w {
				sum += int64(recs[j].units)
			}
		}
		certain = max(certain, sum)
	}
	his := slices.Clone(recs)
	slices.SortFunc(his, func(a, b record) int { return int(a.hi - b.hi) })
	var sum int64
	j := 0
	for i := range his {
		sum += int64(his[i].units)
		for his[j].hi <= his[i].hi-w {
			sum -= int64(his[j].units)
			j++
		}
		byHi = max(byHi, sum)
	}
	return certain, byHi
}

// check asserts the window guarantee for every key and returns the mean
// units admitted per window per key over the measured part, as a share of
// the capacity, and the smallest share of one aligned window (hot key).
func (r fleetRun) check(t *testing.T, all []record, from, calls int64) (mean, minShare float64) {
	t.Helper()
	w := r.window.Milliseconds()
	byKey := make([][]record, r.keys)
	for _, rec := range all {
		byKey[rec.key] = append(byKey[rec.key], rec)
	}
	var worst, worstHi, worstFree int64
	var measured int64
	perWindow := make([]int64, r.windows)
	for k, recs := range byKey {
		slices.SortFunc(recs, func(a, b record) int { return int(a.lo - b.lo) })
		certain, byHi := mostInWindow(recs, w)
		if certain > r.bound() {
			t.Errorf("key %d: %d units admitted within one window of %v, bound %d", k, certain, r.window, r.bound())
		}
		worst, worstHi = max(worst, certain), max(worstHi, byHi)
		if r.suppressed {
			free, _ := mostInWindow(slices.DeleteFunc(slices.Clone(recs), func(x record) bool { return !x.free }), w)
			worstFree = max(worstFree, free)
		}
		for _, rec := range recs {
			if rec.lo >= from {
				measured += int64(rec.units)
				if i := (rec.lo - from) / w; i < int64(r.windows) {
					perWindow[i] += int64(rec.units)
				}
			}
		}
	}
	mean = float64(measured) / float64(r.windows) / float64(r.keys) / float64(r.capacity)
	minShare = 1
	for _, n := range perWindow {
		minShare = min(minShare, float64(n)/float64(r.keys)/float64(r.capacity))
	}
	if r.suppressed {
		// Only a call that leaves the window at or below S is admitted
		// without suppression, so no span of W holds more than S such
		// units (the hybrid's free units are below S at the grant). A
		// degraded decision is the failure policy's, not counted.
		t.Logf("most admitted without suppression in any window: %d (S = %d)", worstFree, r.capacity)
		if worstFree > r.capacity {
			t.Errorf("%d units admitted without suppression within one window of %v, S = %d", worstFree, r.window, r.capacity)
		}
	}
	offered := float64(calls) / float64(r.windows+1) / float64(r.keys) / float64(r.capacity)
	t.Logf("%d keys, C = %d (bound %d) per %v, %d hybrid + %d redisabs + %d redissup instances × %d goroutines: %d calls (%.1f × C per key and window), %d admissions; most in any window: %d (%d counting each at its caller's return); admitted per window %.1f %% of C on average, aligned windows from %.1f %%",
		r.keys, r.capacity, r.bound(), r.window, r.hybrids, r.redisabs, r.redissup, r.goroutines, calls, offered, len(all), worst, worstHi, 100*mean, 100*minShare)
	return mean, minShare
}

// TestZeroOvershoot: three hybrid instances (own clients) of 64 goroutines
// each, saturating one hot key or 10,000 keys on one real Redis for 5 or
// 3 windows, never admit more than C units in any window, counted from the
// callers' own records; nor with a redisabs instance mixed in. The hot key
// admits at least 90 % of C per window.
//
// The run lengths are what make test can afford (the five fleets saturate
// both cores under the race detector: 82 s of the 2-core run at 10 and 5
// windows): every span of W in the run is checked, not only aligned
// windows, so five windows of a hot key at about 1,000 admissions each, or
// three of 10,000 keys (30,000 key-windows), are thousands of spans in
// which an overshoot would show.
func TestZeroOvershoot(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  fleetRun
	}{
		{"Hot", fleetRun{keys: 1, capacity: 1000, hybrids: 3, goroutines: 64, window: time.Second, windows: 5}},
		{"HotWithRedisabs", fleetRun{keys: 1, capacity: 1000, hybrids: 3, redisabs: 1, goroutines: 64, window: time.Second, windows: 5}},
		// Across 10,000 keys a fleet on a loaded two-core machine makes a
		// few thousand calls a second (most of them Redis calls: a key of
		// capacity 1 never holds a lease beyond its unit): a capacity of 1 per 4 s
		// keeps most keys offered more than they may take. Three windows
		// of 10,000 keys are 30,000 key-windows to find an overshoot in.
		{"10k", fleetRun{keys: 10_000, capacity: 1, hybrids: 3, goroutines: 64, window: 4 * time.Second, windows: 3}},
		{"10kWithRedisabs", fleetRun{keys: 10_000, capacity: 1, hybrids: 3, redisabs: 1, goroutines: 64, window: 4 * time.Second, windows: 3}},
		// 200 keys of C = 20 per second. Every key starts slow, so its
		// first lease in each instance asks for its share of D + B (2
		// units at C = 20, W = 1 s, D = 50 ms, B = 10 ms) and is
		// forward-dated while the key has room; later, leases of a key
		// that go unused make it slow again. (At C = 10 the share is one
		// unit, which is never forward-dated, and a loaded machine's
		// calls came further apart than a lease lives, which takes no
		// lease at all: a loaded run saw none.)
		{"200Forward", fleetRun{keys: 200, capacity: 20, hybrids: 3, redisabs: 1, goroutines: 64, window: time.Second, windows: 5, forwards: new(int64)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all, from, calls, shed, _ := tc.run.run(t)
			mean, _ := tc.run.check(t, all, from, calls)
			if tc.run.keys == 1 && mean < 0.9 && shed > maxShedShare {
				t.Logf("hot key admitted %.1f %% of its capacity per window with %.1f %% of the calls shed (a starved machine): not held to 90 %%", 100*mean, 100*shed)
			} else if tc.run.keys == 1 && mean < 0.9 {
				t.Errorf("hot key admitted %.1f %% of its capacity per window, want at least 90 %%", 100*mean)
			}
			if f := tc.run.forwards; f != nil {
				t.Logf("%d forward-dated leases", *f)
				if *f == 0 {
					t.Errorf("no lease was forward-dated: the run did not test them")
				}
			}
		})
	}
}

// softFloor is the least mean accepted per window, as a share of S, on a
// saturated hot key: the strategy admits every call that leaves the window
// at or below S, so a key offered far more than S refills every dip below
// it at once (docs/algorithms.md, The suppressed hybrid). Above S the
// design promises no figure on the mean of this harness, only H on every
// span (check): the mean runs from 1.2 S to H by how bursty 192
// goroutines on two cores offer (the same document's measured table), and
// a key whose callers stall for a window restarts cold and takes H in one
// burst, as redissup does. What the strategy promises above S is the rule
// each call is decided by, admitted with probability 1 − f: maxDrawRatio.
const softFloor = 0.9

// maxDrawRatio bounds the admissions of the calls a factor decided over
// the sum of their 1 − f: measured 0.94 to 1.02 for all three fleets
// (binomial spread about 1 % at 6,000 admissions), 2 is more than ten
// times that spread away; a hybrid that admitted past its factor from
// memory (at f near 1, many times 1 − f) would exceed it.
const maxDrawRatio = 2.0

// TestSuppressedFleet: three suppressed hybrid instances (own clients) of
// 64 goroutines each, alone and with a redissup instance, saturate one hot
// key on one real Redis for 6 windows: no window holds more than H
// accepted units, nor more than S admitted without suppression, counted
// from the callers' own records; the mean accepted per window is at least
// softFloor; and the calls a factor decided were admitted as often as
// their 1 − f says (maxDrawRatio). Three redissup instances in the same
// harness give the strategy's own figures, held to the same checks
// (docs/algorithms.md, The suppressed hybrid). Six windows, not ten: the
// three fleets saturate both cores for their whole run (36 s of make test
// at ten), and every span of W of the run is checked against H.
func TestSuppressedFleet(t *testing.T) {
	hot := fleetRun{keys: 1, capacity: 1000, hybrids: 3, goroutines: 64, window: time.Second, windows: 6, suppressed: true, factor: 2}
	withSup, supOnly := hot, hot
	withSup.redissup = 1
	supOnly.hybrids, supOnly.redissup = 0, 3
	for _, tc := range []struct {
		name string
		run  fleetRun
	}{
		{"Hot", hot},
		{"HotWithRedissup", withSup},
		{"RedissupOnly", supOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all, from, calls, shed, dr := tc.run.run(t)
			mean, low := tc.run.check(t, all, from, calls)
			ratio := float64(dr.admitted) / max(dr.expected, 1)
			t.Logf("%d calls decided by a factor: %d admitted, %.1f expected from their 1 − f (ratio %.3f)", dr.calls, dr.admitted, dr.expected, ratio)
			if dr.expected < 500 {
				t.Logf("too few draws to hold to %.1f × expected", maxDrawRatio)
			} else if ratio > maxDrawRatio {
				t.Errorf("calls decided by a factor admitted %.2f × their expected 1 − f, want at most %.1f", ratio, maxDrawRatio)
			}
			if mean < softFloor && shed > maxShedShare {
				t.Logf("hot key accepted %.1f %% of S per window with %.1f %% of the calls shed (a starved machine): not held to %.0f %%", 100*mean, 100*shed, 100*softFloor)
			} else if mean < softFloor {
				t.Errorf("hot key accepted %.1f %% of S per window (lowest aligned window %.1f %%), want at least %.0f %%", 100*mean, 100*low, 100*softFloor)
			}
		})
	}
}
