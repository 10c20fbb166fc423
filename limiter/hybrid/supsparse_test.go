package hybrid_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// sparseSetup is a miniredis that follows a fake clock, a client of it
// and the options both hybrids and the Redis providers of the sparse
// tests take: no per-call timeout and otherwise the default options at
// window w. (No per-call timeout: the tests count the Redis calls and
// compare decisions with the Redis provider's, and a call shed on a
// loaded machine would differ.)
func sparseSetup(t *testing.T, w time.Duration) (*conformance.Clock, *redis.Client, []limiter.Option) {
	t.Helper()
	clk := conformance.NewClock()
	mr, c := redistest.Mini(t)
	mr.SetTime(clk.Now())
	clk.Drive(mr)
	return clk, c, []limiter.Option{limiter.WithPrefix(redistest.Prefix(t)),
		// WithTimeout(0): the tests count Redis calls and compare
		// decisions with the Redis provider's; a call shed on a loaded
		// machine would differ. These tests certify no timing bound.
		limiter.WithTimeout(0),
		limiter.WithClock(clk.Now), limiter.WithWindow(w)}
}

// supSparseSetup is a suppressed hybrid, with a sync every 10 ms (real
// time), and a redissup instance sharing sparseSetup's miniredis.
func supSparseSetup(t *testing.T, w time.Duration) (*conformance.Clock, *hybrid.Suppressed, *redissup.Limiter) {
	t.Helper()
	clk, c, common := sparseSetup(t, w)
	s := newSuppressed(t, c, append(common, hybrid.WithSyncInterval(10*time.Millisecond))...)
	r, err := redissup.New(c, common...)
	if err != nil {
		t.Fatal(err)
	}
	return clk, s, r
}

// waitFor polls cond every 5 ms for up to 10 s (ticks run in real time on
// a loaded machine) and reports whether it came true.
func waitFor(cond func() bool) bool {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestSuppressedKeyWithoutHistory: a key the instance has no history of
// takes no lease with its first call (redissup's one call, nothing to give
// back): 200 keys called once each at W = 1 s, where each first lease
// would be ⌈S (D + B) / W⌉ = 6 units, make 200 Redis calls, hold nothing
// unused in Redis, and leave the sync nothing to release.
func TestSuppressedKeyWithoutHistory(t *testing.T) {
	ctx := context.Background()
	clk, s, r := supSparseSetup(t, time.Second)
	rate := limiter.PerSecond(100)
	const keys = 200
	for i := 0; i < keys; i++ {
		if d, err := s.Inc(ctx, "k"+strconv.Itoa(i), rate, 1); err != nil || !d.Allowed {
			t.Fatalf("Inc = %+v, %v", d, err)
		}
	}
	for i := 0; i < keys; i += 37 {
		if u, err := r.Get(ctx, "k"+strconv.Itoa(i)); err != nil || u.Used != 1 {
			t.Fatalf("redissup's Get of a key called once = %+v, %v; want its 1 unit, no lease", u, err)
		}
	}
	// Past any lease's life: ticks find nothing to give back.
	clk.Advance(200 * time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	if f, ren, rel, _ := s.Calls(); f != keys || ren != 0 || rel != 0 {
		t.Errorf("%d keys called once: %d lease requests, %d renewals, %d releases; want %d, 0, 0", keys, f, ren, rel, keys)
	}
}

// TestSuppressedQuietRelease: a tick gives back an expired lease's unused
// units only once the key has been quiet for B + D after its latest use
// (a call before then sends them with its own request). W = 1 min, so
// B = 600 ms and D = 1 s: the key's first lease (its second call) is 3
// units filed at now + D, living until now + 1.6 s; a use from memory at
// 0.5 s puts the release off until 2.1 s.
func TestSuppressedQuietRelease(t *testing.T) {
	ctx := context.Background()
	clk, s, r := supSparseSetup(t, time.Minute)
	rate := limiter.PerMinute(100)
	inc := func() {
		t.Helper()
		if d, err := s.Inc(ctx, "k", rate, 1); err != nil || !d.Allowed {
			t.Fatalf("Inc = %+v, %v", d, err)
		}
	}
	used := func() int64 {
		t.Helper()
		u, err := r.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		return u.Used
	}
	inc() // no history: no lease
	inc() // the first lease: 3 units, 1 used
	clk.Advance(500 * time.Millisecond)
	inc() // from memory: 1 unit left
	if f, _, _, _ := s.Calls(); f != 2 || used() != 4 {
		t.Fatalf("after 3 calls: %d Redis calls, %d units in Redis; want 2 and 4 (1 leased unused)", f, used())
	}
	clk.Advance(1300 * time.Millisecond) // 1.8 s: expired, 1.3 s quiet
	time.Sleep(100 * time.Millisecond)
	if _, _, rel, _ := s.Calls(); rel != 0 || used() != 4 {
		t.Errorf("1.3 s after the latest use: %d releases, %d units in Redis; want 0 and 4", rel, used())
	}
	clk.Advance(400 * time.Millisecond) // 2.2 s: 1.7 s quiet
	// The release counter moves when the release is sent: wait for Redis
	// to hold its result too.
	if !waitFor(func() bool { _, _, rel, _ := s.Calls(); return rel == 1 && used() == 3 }) {
		_, _, rel, _ := s.Calls()
		t.Errorf("1.7 s after the latest use: %d releases, %d units in Redis; want 1 and 3", rel, used())
	}
}

// TestAbsoluteSparseKey: a key the absolute hybrid has no history of, or
// calls further apart than a lease lives (B + D = 60 ms at W = 1 s), takes
// no lease: each call decides its unit alone, as redisabs' does, and
// leaves nothing to give back. 100 keys called once hold their 1 unit
// each in Redis (a first lease would have been ⌈C (D + B) / W⌉ = 6 units,
// given back by a tick); three more calls of each, 200 ms apart, make one
// Redis call per decision in all and no release, and Redis holds exactly
// the units admitted.
func TestAbsoluteSparseKey(t *testing.T) {
	ctx := context.Background()
	clk, c, common := sparseSetup(t, time.Second)
	// A sync every 100 ms (real time): a key stays in memory for 20 ticks
	// without a call, 2 s, longer than a round takes under -race (a key
	// forgotten would have no history, and take a forward-dated lease).
	a := newAbsolute(t, c, append(common, hybrid.WithSyncInterval(100*time.Millisecond))...)
	r, err := redisabs.New(c, common...)
	if err != nil {
		t.Fatal(err)
	}
	rate := limiter.PerSecond(100)
	const keys = 100
	round := func() {
		t.Helper()
		for i := 0; i < keys; i++ {
			if d, err := a.Inc(ctx, "k"+strconv.Itoa(i), rate, 1); err != nil || !d.Allowed {
				t.Fatalf("Inc = %+v, %v", d, err)
			}
		}
	}
	round()
	if u, err := r.Get(ctx, "k0"); err != nil || u.Used != 1 {
		t.Fatalf("redisabs' Get after the first call = %+v, %v; want its 1 unit, no lease", u, err)
	}
	for i := 0; i < 3; i++ {
		clk.Advance(200 * time.Millisecond)
		round()
		time.Sleep(250 * time.Millisecond) // two ticks
	}
	if f, ren, rel := a.Calls(); f != 4*keys || ren != 0 || rel != 0 {
		t.Errorf("%d keys called 4 times 200 ms apart: %d Redis calls, %d renewals, %d releases; want %d, 0, 0", keys, f, ren, rel, 4*keys)
	}
	for i := 0; i < keys; i += 17 {
		if u, err := r.Get(ctx, "k"+strconv.Itoa(i)); err != nil || u.Used != 4 {
			t.Errorf("redisabs' Get of key %d = %+v, %v; want the 4 units admitted, nothing leased", i, u, err)
		}
	}
}
