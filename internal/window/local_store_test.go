package window

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/sluice-go/sluice/limiter"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func TestSweepDropsIdleKeys(t *testing.T) {
	clk := newClock()
	a, err := NewLocalAbsolute(limiter.WithClock(clk.Now), limiter.WithWindow(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	ctx := context.Background()
	for i := 0; i < 5000; i++ {
		if _, err := a.Inc(ctx, fmt.Sprint("k", i), limiter.PerSecond(10), 1); err != nil {
			t.Fatal(err)
		}
	}
	// Under WithClock the sweep keeps a key W + B + 1 min after its newest
	// bucket opened (B = W/100 = 10 ms).
	clk.Advance(61009 * time.Millisecond)
	for i := 0; i < 100; i++ { // these stay live
		a.Inc(ctx, fmt.Sprint("k", i), limiter.PerSecond(10), 1)
	}
	if n := a.s.keys(); n != 5000 {
		t.Fatalf("keys = %d, want 5000", n)
	}
	if got := a.s.sweep(); got != 0 {
		t.Fatalf("sweep with every key live dropped %d", got)
	}
	clk.Advance(time.Millisecond) // the first buckets pass W + B + 1 min; the 100 keys' second ones do not
	if got := a.s.sweep(); got != 4900 {
		t.Fatalf("sweep dropped %d keys, want 4900", got)
	}
	if n := a.s.keys(); n != 100 {
		t.Fatalf("keys after sweep = %d, want 100", n)
	}
	for i := 0; i < 100; i++ {
		u, _ := a.Get(ctx, fmt.Sprint("k", i))
		if u.Used != 1 {
			t.Fatalf("Get(k%d) after sweep = %+v, want Used 1", i, u)
		}
	}
	// The map holds only live entries.
	a.s.m.each(func(k string, _ uint64, e *entry) bool {
		if e.dead() || !e.st.Live() {
			t.Fatalf("key %v left in the map: dead %v, live %v", k, e.dead(), e.st.Live())
		}
		return true
	})
}

// A caller that loaded an entry just before the sweep or Reset removed it
// must not write into the removed entry: it looks again and gets a fresh one,
// also when the remover has marked the entry but not yet deleted it.
func TestRemovedEntryIsNotReused(t *testing.T) {
	a, err := NewLocalAbsolute(limiter.WithWindow(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	ctx := context.Background()
	if _, err := a.Inc(ctx, "k", limiter.PerSecond(10), 3); err != nil {
		t.Fatal(err)
	}
	old, _ := a.s.lock("k", false, 0)
	old.kill() // marked by a remover that has not deleted it yet
	old.mu.Unlock()
	d, err := a.Inc(ctx, "k", limiter.PerSecond(10), 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining != 9 {
		t.Fatalf("Inc after removal: Remaining %d, want 9 (a fresh key)", d.Remaining)
	}
	if !old.dead() || old.st.Used != 0 {
		t.Fatalf("the removed entry was written to: dead %v, Used %d, want dead and 0", old.dead(), old.st.Used)
	}
	v := a.s.m.load(a.s.m.hash("k"), "k")
	if v == nil || v == old || v.dead() {
		t.Fatalf("map holds %p, want a fresh live entry", v)
	}

	// Reset while another caller holds the key: the holder finishes on the
	// old entry, Reset removes it, and the next call starts from nothing.
	held, _ := a.s.lock("k", false, 0)
	done := make(chan error)
	go func() { done <- a.Reset(ctx, "k") }()
	time.Sleep(10 * time.Millisecond) // Reset is now waiting for the key's lock
	held.mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !held.dead() {
		t.Fatal("Reset did not mark the entry it removed")
	}
	if u, _ := a.Get(ctx, "k"); u != (limiter.Usage{}) {
		t.Fatalf("Get after Reset = %+v, want zero", u)
	}
	if n := a.s.keys(); n != 0 {
		t.Fatalf("keys after Reset = %d, want 0", n)
	}
}

// The sweep runs while callers hammer the same shards; -race checks it.
func TestSweepConcurrentWithCalls(t *testing.T) {
	clk := newClock()
	a, err := NewLocalAbsolute(limiter.WithClock(clk.Now), limiter.WithWindow(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 3000; i++ {
				a.Inc(context.Background(), fmt.Sprint(g, "-", i%300), limiter.PerSecond(1000), 1)
				if i%100 == 0 {
					clk.Advance(3 * time.Millisecond)
				}
			}
		}(g)
	}
	for i := 0; i < 20; i++ {
		a.s.sweep()
	}
	wg.Wait()
	clk.Advance(time.Second + time.Minute) // past W + B and the minute kept under WithClock
	a.s.sweep()
	if n := a.s.keys(); n != 0 {
		t.Fatalf("keys after all expired and a sweep = %d, want 0", n)
	}
}

// sweepEvery makes the background sweep tick every d instead of once per
// window (at least a second).
func sweepEvery(d time.Duration) limiter.Option {
	return func(c *Config) { c.SweepEvery = d }
}

// waitUntil polls cond for up to 5 s: the background loop runs on real
// time, so tests wait for it (time itself moves only on the fake clock).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s: %s", what)
		}
	}
}

// TestSweepLoopDropsIdleKeys watches the background loop itself drop the
// keys whose buckets have all expired, and only those.
func TestSweepLoopDropsIdleKeys(t *testing.T) {
	clk := newClock()
	ctx := context.Background()
	a, err := NewLocalAbsolute(limiter.WithClock(clk.Now), limiter.WithWindow(time.Second), sweepEvery(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	for i := 0; i < 1000; i++ {
		if _, err := a.Inc(ctx, fmt.Sprint("k", i), limiter.PerSecond(10), 1); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(61009 * time.Millisecond) // W + B + 1 min − 1 ms (B = W/100 = 10 ms; the minute: WithClock)
	if _, err := a.Inc(ctx, "live", limiter.PerSecond(10), 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // some 20 ticks over keys that are all live
	if n := a.s.keys(); n != 1001 {
		t.Fatalf("keys while all are live = %d, want 1001", n)
	}
	clk.Advance(time.Millisecond) // the 1000 first buckets expire; live's does not
	waitUntil(t, "the sweep loop dropped no key", func() bool { return a.s.keys() < 1001 })
	waitUntil(t, fmt.Sprintf("keys = %d, want 1", a.s.keys()), func() bool { return a.s.keys() == 1 })
	if u, err := a.Get(ctx, "live"); err != nil || u.Used != 1 {
		t.Fatalf("Get(live) after the sweep = %+v, %v; want Used 1", u, err)
	}
}

// sweepWaitsOnALock reports whether the sweep goroutine is blocked on a
// key's lock.
func sweepWaitsOnALock() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("(*store).sweep(")) && bytes.Contains(g, []byte("Mutex).Lock")) {
			return true
		}
	}
	return false
}

// TestCloseWaitsForTheSweep holds a key's lock so that the sweep blocks on
// it: Close with a short deadline must return the context's error without
// the sweep having exited, and Close after the lock is released must
// return only once the sweep goroutine has exited.
func TestCloseWaitsForTheSweep(t *testing.T) {
	a, err := NewLocalAbsolute(sweepEvery(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Inc(context.Background(), "k", limiter.PerSecond(10), 1); err != nil {
		t.Fatal(err)
	}
	e, _ := a.s.lock("k", false, 0)
	if e == nil {
		t.Fatal("no entry for k")
	}
	waitUntil(t, "the sweep never blocked on k's lock", sweepWaitsOnALock)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	err = a.Close(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close while the sweep is blocked = %v, want context.DeadlineExceeded", err)
	}
	select {
	case <-a.s.done:
		t.Fatal("the sweep exited while it was blocked on a lock")
	default:
	}
	if _, err := a.Inc(context.Background(), "other", limiter.PerSecond(10), 1); !errors.Is(err, limiter.ErrClosed) {
		t.Fatalf("Inc after a Close that timed out = %v, want ErrClosed", err)
	}

	e.mu.Unlock()
	if err := a.Close(context.Background()); err != nil {
		t.Fatalf("Close after the lock is released = %v", err)
	}
	select {
	case <-a.s.done:
	default:
		t.Fatal("Close returned before the sweep goroutine exited")
	}
}

func TestCloseStopsSweepAndIsIdempotent(t *testing.T) {
	before := runtime.NumGoroutine()
	var ls []interface{ Close(context.Context) error }
	for i := 0; i < 10; i++ {
		a, err := NewLocalAbsolute()
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewLocalSuppressed()
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, a, s)
	}
	for _, l := range ls {
		if err := l.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := l.Close(context.Background()); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("goroutines after Close = %d, before = %d: the sweep leaked", n, before)
	}
}

// TestEntrySize: a key's entry fills exactly two cache lines (its lock,
// key, state and first bucket), so a call on a cold key pulls in two lines
// of it, and the allocator's 128-byte class puts it on a line boundary.
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n != 128 {
		t.Fatalf("entry is %d bytes, want 128", n)
	}
	if n := unsafe.Sizeof(slot{}); n != 16 {
		t.Fatalf("slot is %d bytes, want 16", n)
	}
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	a, _ := NewLocalAbsolute(limiter.WithWindow(time.Second))
	defer a.Close(context.Background())
	s, _ := NewLocalSuppressed(limiter.WithWindow(time.Second), limiter.WithHardLimitFactor(2))
	defer s.Close(context.Background())
	ctx := context.Background()
	rate := limiter.PerSecond(1e6)
	a.Inc(ctx, "hot", rate, 1)
	s.Inc(ctx, "hot", rate, 1)
	for name, f := range map[string]func(){
		"LocalAbsolute.Inc":         func() { a.Inc(ctx, "hot", rate, 1) },
		"LocalAbsolute.Inc peek":    func() { a.Inc(ctx, "cold", rate, 0) },
		"LocalAbsolute.IsAllowed":   func() { a.IsAllowed(ctx, "hot") },
		"LocalAbsolute.Get":         func() { a.Get(ctx, "hot") },
		"LocalSuppressed.Inc":       func() { s.Inc(ctx, "hot", rate, 1) },
		"LocalSuppressed.IsAllowed": func() { s.IsAllowed(ctx, "hot") },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s allocates %v times per call, want 0", name, n)
		}
	}
}

// keys counts the keys held.
func (s *store) keys() int { return s.m.len() }
