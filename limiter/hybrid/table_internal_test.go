package hybrid

import (
	"context"
	"hash/maphash"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// TestIdleCountsTicks: a key leaves memory idleTicks ticks after its
// latest call, not idleTicks visits: with 2 × maxVisits + 100 keys a
// tick visits each key once every 3 ticks, and every key holding nothing
// is gone within idleTicks + 2 passes (26 ticks; counting visits took 60).
// A key whose fetch token is held (an Inc's lease request in flight)
// stays. The ticks are the test's own (a sync once an hour); no call
// reaches Redis.
func TestIdleCountsTicks(t *testing.T) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never called
	defer c.Close()
	l, err := NewAbsolute(c, WithSyncInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	const n = 2*maxVisits + 100
	for i := 0; i < n; i++ {
		if _, ok, err := l.entryFor("inc", "k"+strconv.Itoa(i), 0); !ok || err != nil {
			t.Fatalf("entryFor: %v, %v", ok, err)
		}
	}
	busy, _ := l.lookup("k7")
	if !busy.waitFetch(ctx) {
		t.Fatal("the key's fetch token is held")
	}
	ticks := 0
	for ; l.count.Load() > 1 && ticks < 100; ticks++ {
		l.tick(ctx, false)
	}
	if left := l.count.Load(); left != 1 || ticks > idleTicks+2*3 {
		t.Fatalf("%d keys left after %d ticks, want 1 (the busy one) within %d", left, ticks, idleTicks+2*3)
	}
	if _, ok := l.lookup("k7"); !ok {
		t.Fatal("the key with a lease request in flight left memory")
	}
	busy.mu.Lock()
	busy.endFetch()
	busy.mu.Unlock()
	for i := 0; i < 3; i++ {
		l.tick(ctx, false)
	}
	if left := l.count.Load(); left != 0 {
		t.Fatalf("%d keys left once the request landed, want 0", left)
	}
	t.Logf("%d keys gone in %d ticks", n-1, ticks)
}

// parkingSetup is the parking tests' absolute hybrid on miniredis, W = 1 s
// and B = 10 ms (D = 50 ms), on the test's clock and with ticks only the
// test's own; inc admits a unit of key "k" at 1,000 per second, state
// returns the key's parked and left and how many keys the ticks' list
// holds (tick-only fields: read while no tick runs).
func parkingSetup(t *testing.T) (l *Absolute, clk *atomic.Int64, inc func(), state func() (parked int8, left int64, listed int)) {
	ctx := context.Background()
	_, c := redistest.Mini(t)
	clk = new(atomic.Int64)
	clk.Store(time.Now().UnixMilli())
	l, err := NewAbsolute(c, limiter.WithWindow(time.Second), limiter.WithBucket(10*time.Millisecond),
		limiter.WithClock(func() time.Time { return time.UnixMilli(clk.Load()) }), WithSyncInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(ctx) })
	inc = func() {
		t.Helper()
		if d, err := l.Inc(ctx, "k", limiter.PerSecond(1000), 1); err != nil || !d.Allowed {
			t.Fatalf("Inc: %+v, %v", d, err)
		}
	}
	state = func() (parked int8, left int64, listed int) {
		e, ok := l.lookup("k")
		if !ok {
			t.Fatal("the key left memory")
		}
		s := l.shardOf("k")
		s.mu.Lock()
		listed = len(l.tracked) + len(s.fresh)
		s.mu.Unlock()
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.parked, e.left, listed
	}
	return l, clk, inc, state
}

// TestParkedKeyComesBack: a key holding nothing leaves the ticks' list
// (park), and its next lease request puts it back, so that the ticks give
// back the lease it then takes. Its first call decides alone (a key called
// once has no entry), its second takes a lease; once that expired unused,
// a tick gives it back and the next parks the key. Of two calls 20 ms
// apart (B + D = 60 ms), the first decides alone and the second takes a
// lease: the key is back on the list, its lease is given back by the
// second tick after it expires, and Redis then holds exactly the four
// units admitted. The clock is the test's; the ticks are its own.
func TestParkedKeyComesBack(t *testing.T) {
	ctx := context.Background()
	l, clk, inc, state := parkingSetup(t)
	inc()
	inc()
	if p, left, _ := state(); p != 0 || left < 1 {
		t.Fatalf("parked %d, lease %d after two calls; want on the list (0) with a lease", p, left)
	}
	clk.Add(100)
	for i := 0; i < 3; i++ { // the lease counts as used at the first, is given back at the second
		l.tick(ctx, false)
	}
	if p, left, _ := state(); p != 1 || left != 0 || l.releases.Load() != 1 {
		t.Fatalf("parked %d, lease %d, %d releases three ticks after the lease expired; want 1, 0, 1", p, left, l.releases.Load())
	}
	clk.Add(20)
	inc()
	clk.Add(20)
	inc()
	if p, left, _ := state(); p != -1 || left < 1 {
		t.Fatalf("parked %d, lease %d after two calls 20 ms apart; want it back on the list (-1) with a lease", p, left)
	}
	clk.Add(100)
	l.tick(ctx, false)
	l.tick(ctx, false)
	if _, left, _ := state(); left != 0 || l.releases.Load() != 2 {
		t.Fatalf("lease %d, %d releases after it expired; want 0 and 2", left, l.releases.Load())
	}
	if u, err := l.Get(ctx, "k"); err != nil || u.Used != 4 {
		t.Fatalf("Get: %+v, %v; want 4 used", u, err)
	}
}

// TestPlainCallsKeepKeyParked: calls further apart than a lease lives
// (B + D = 60 ms) take no lease, so a parked key they reach stays off the
// ticks' list: no tick looks at it until its slot comes due, about 20
// ticks after it was parked, when it is parked again without leaving
// memory. A call soon after the last one takes a lease, which puts the key
// back. The key is parked as in TestParkedKeyComesBack.
func TestPlainCallsKeepKeyParked(t *testing.T) {
	ctx := context.Background()
	l, clk, inc, state := parkingSetup(t)
	inc()
	inc()
	clk.Add(100)
	for i := 0; i < 3; i++ {
		l.tick(ctx, false)
	}
	if p, left, listed := state(); p != 1 || left != 0 || listed != 0 {
		t.Fatalf("parked %d, lease %d, %d keys listed; want 1, 0, 0", p, left, listed)
	}
	calls := 2
	for tick := 1; ; tick++ {
		if tick%4 == 0 {
			clk.Add(150) // all within W + B of the first
			inc()
			calls++
		}
		l.tick(ctx, false)
		p, left, listed := state()
		if left != 0 || listed != 0 {
			t.Fatalf("tick %d: lease %d, %d keys listed; want 0, 0", tick, left, listed)
		}
		if tick >= 4 && p == 1 {
			break // its slot came due: visited, and parked again
		}
		if want := int8(1 + min(tick/4, 1)); p != want || tick > idleTicks+4 {
			t.Fatalf("tick %d: parked %d; want %d, parked again within %d ticks", tick, p, want, idleTicks+4)
		}
	}
	if l.Entries() != 1 {
		t.Fatalf("%d keys in memory, want 1", l.Entries())
	}
	clk.Add(20)
	inc()
	calls++
	if p, left, listed := state(); p != -1 || left < 1 || listed != 1 {
		t.Fatalf("parked %d, lease %d, %d listed after a call 20 ms later; want -1, a lease, 1", p, left, listed)
	}
	if u, err := l.Get(ctx, "k"); err != nil || u.Used != int64(calls) {
		t.Fatalf("Get: %+v, %v; want %d used", u, err, calls)
	}
}

// TestCalledWithin: a key gets an entry only at a call less than a lease's
// life (B + D = 60 ms) after its previous one. 1,000 keys called three
// times 200 ms apart hold none and make one Redis call per decision; a key
// called twice 30 ms apart holds one, and so do two keys sharing a pair of
// records (calledWithin), called in turn.
func TestCalledWithin(t *testing.T) {
	ctx := context.Background()
	_, c := redistest.Mini(t)
	var clk atomic.Int64
	clk.Store(time.Now().UnixMilli())
	l, err := NewAbsolute(c, limiter.WithWindow(time.Second), limiter.WithBucket(10*time.Millisecond),
		limiter.WithClock(func() time.Time { return time.UnixMilli(clk.Load()) }), WithSyncInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	inc := func(k string) {
		t.Helper()
		if d, err := l.Inc(ctx, k, limiter.PerSecond(1000), 1); err != nil || !d.Allowed {
			t.Fatalf("Inc(%s): %+v, %v", k, d, err)
		}
	}
	const keys = 1000
	for round := 0; round < 3; round++ {
		for i := 0; i < keys; i++ {
			inc("slow" + strconv.Itoa(i))
		}
		clk.Add(200)
	}
	if n, f := l.Entries(), l.fetches.Load(); n != 0 || f != 3*keys {
		t.Fatalf("%d keys in memory, %d Redis calls after 3 rounds 200 ms apart; want 0 and %d", n, f, 3*keys)
	}
	inc("fast")
	clk.Add(30)
	inc("fast")
	if _, ok := l.lookup("fast"); !ok {
		t.Fatal("a key called twice 30 ms apart holds no entry")
	}
	pair := func(k string) uint64 { return maphash.String(l.seed, k) % seenSlots &^ 1 }
	a, b := "a", ""
	for i := 0; b == ""; i++ {
		if k := "b" + strconv.Itoa(i); pair(k) == pair(a) {
			b = k
		}
	}
	inc(a)
	inc(b)
	inc(a)
	inc(b)
	for _, k := range []string{a, b} {
		if _, ok := l.lookup(k); !ok {
			t.Errorf("key %s, sharing its pair of records with the other, called twice in turn: no entry", k)
		}
	}
}
