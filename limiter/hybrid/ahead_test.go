package hybrid_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// meta reads the newest bucket's start and count of key k's hash on mr
// (docs/data-model.md: "m" = "<c> <u> <o> <n> <nc>").
func meta(t *testing.T, mr *miniredis.Miniredis, k string) (newest, count int64) {
	t.Helper()
	for _, name := range mr.Keys() {
		if !strings.Contains(name, "{"+k+"}") {
			continue
		}
		m := mr.HGet(name, "m")
		var c, u, o int64
		if _, err := fmt.Sscanf(m, "%d %d %d %d %d", &c, &u, &o, &newest, &count); err != nil {
			t.Fatalf("meta of %s = %q: %v", name, m, err)
		}
		return newest, count
	}
	t.Fatalf("no hash of key %q among %v", k, mr.Keys())
	return 0, 0
}

// TestForwardDatedLease follows one key of C = 100 per minute (B = 600
// ms, lease ahead min(W/20, 1 s) = 1 s) on a miniredis whose clock is the test's:
// a key's first call takes no lease; its first lease (its second call) is
// forward-dated; it serves past its grant's B
// without a Redis call; a redisabs call joins its bucket; the hash lives,
// and counts those units, until that bucket dies. D shrinks past a
// quarter of the capacity, no lease is forward-dated past three quarters,
// and WithLeaseAhead(0) turns it off.
func TestForwardDatedLease(t *testing.T) {
	ctx := context.Background()
	rate := limiter.PerMinute(100)
	const w, b = 60_000, 600 // ms
	setup := func(t *testing.T, opts ...limiter.Option) (*conformance.Clock, *miniredis.Miniredis, *hybrid.Absolute, *redisabs.Limiter) {
		clk := conformance.NewClock()
		mr, c := redistest.Mini(t)
		clk.Drive(mr)
		// No per-call timeout: the test counts exact leases and decisions,
		// and a call shed on a loaded machine would differ.
		common := []limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithTimeout(0),
			limiter.WithClock(clk.Now), limiter.WithWindow(time.Minute)}
		a := newAbsolute(t, c, append(append(common, hybrid.WithSyncInterval(time.Hour)), opts...)...)
		r, err := redisabs.New(c, common...)
		if err != nil {
			t.Fatal(err)
		}
		return clk, mr, a, r
	}
	inc := func(t *testing.T, l limiter.Limiter, k string, n int64) {
		t.Helper()
		d, err := l.Inc(ctx, k, rate, n)
		if err != nil || !d.Allowed {
			t.Fatalf("Inc(%q, %d) = %+v, %v; want admitted", k, n, d, err)
		}
	}
	fetches := func(a *hybrid.Absolute) int64 { f, _, _ := a.Calls(); return f }

	t.Run("Forward", func(t *testing.T) {
		clk, mr, a, r := setup(t)
		// The first call of a key with no history takes no lease (its
		// unit goes into a bucket at now); the next one, at once, is a
		// slow key's: its first lease is ⌈C (D + B) / W⌉ = 3 units, filed
		// at now + D, as the grant leaves more than three quarters of the
		// capacity free.
		inc(t, a, "k", 1)
		if start, count := meta(t, mr, "k"); start != clk.Now().UnixMilli() || count != 1 || fetches(a) != 1 {
			t.Fatalf("the first call of a key: newest bucket at now + %d with %d units after %d calls; want now with 1 (no lease) after 1", start-clk.Now().UnixMilli(), count, fetches(a))
		}
		inc(t, a, "k", 1)
		now := clk.Now().UnixMilli()
		start, count := meta(t, mr, "k")
		if want := now + 1000; start != want || count != 3 {
			t.Fatalf("lease bucket starts at now + %d with %d units; want now + 1000 with 3", start-now, count)
		}
		// The lease serves until its bucket's start + B, from memory.
		clk.Advance(time.Duration(start+b-1-now) * time.Millisecond)
		f := fetches(a)
		inc(t, a, "k", 2)
		if got := fetches(a); got != f {
			t.Errorf("Inc at the forward lease's start + B − 1 made %d Redis calls, want 0", got-f)
		}
		// A redisabs admission joins the newest bucket, which counts longer.
		inc(t, r, "k", 1)
		if s, c := meta(t, mr, "k"); s != start || c != 4 {
			t.Errorf("after redisabs' Inc: newest bucket %d with %d units, want %d with 4", s, c, start)
		}
		// The units count until that bucket dies, and no longer.
		now = clk.Now().UnixMilli()
		clk.Advance(time.Duration(start+w+b-1-now) * time.Millisecond)
		if u, err := r.Get(ctx, "k"); err != nil || u.Used != 4 {
			t.Errorf("Get 1 ms before the lease's bucket dies = %+v, %v; want 4 units", u, err)
		}
		clk.Advance(time.Millisecond)
		if u, err := r.Get(ctx, "k"); err != nil || u.Used != 0 {
			t.Errorf("Get when the lease's bucket dies = %+v, %v; want 0", u, err)
		}
	})

	t.Run("TTLUnderRedisTime", func(t *testing.T) {
		// Without WithClock the script reads Redis TIME and sets TTLs
		// with no slack: the hash must outlive the forward-dated bucket.
		// (W = 10 s: B = 100 ms, ahead 500 ms.)
		mr, c := redistest.Mini(t)
		mr.SetTime(time.Now())
		a := newAbsolute(t, c, limiter.WithPrefix(redistest.Prefix(t)), limiter.WithWindow(10*time.Second),
			hybrid.WithSyncInterval(time.Hour))
		for i := 0; i < 2; i++ { // the second takes the key's first lease
			if d, err := a.Inc(ctx, "k", limiter.Every(100, 10*time.Second), 1); err != nil || !d.Allowed {
				t.Fatalf("Inc = %+v, %v", d, err)
			}
		}
		now := time.Now().UnixMilli()
		start, _ := meta(t, mr, "k")
		if start <= now {
			t.Fatalf("lease bucket starts at now + %d ms, want a forward-dated one", start-now)
		}
		if ttl, want := mr.TTL(mr.Keys()[0]), time.Duration(start-now+10_100)*time.Millisecond; ttl < want-5*time.Millisecond {
			t.Errorf("TTL %v, want %v: until the lease's bucket dies", ttl, want)
		}
	})

	t.Run("NotNearCapacity", func(t *testing.T) {
		clk, mr, a, r := setup(t)
		inc(t, r, "k", 73)
		inc(t, a, "k", 1) // no history: no lease
		inc(t, a, "k", 1) // with the lease's 3: more than three quarters
		if start, c := meta(t, mr, "k"); start != clk.Now().UnixMilli() || c != 77 {
			t.Errorf("lease bucket starts at now + %d ms with %d units on a key three quarters full, want now with 77", start-clk.Now().UnixMilli(), c)
		}
	})

	t.Run("HalfFull", func(t *testing.T) {
		clk, mr, a, r := setup(t)
		// With the lease's 3 units the key is half full:
		// d = D (1.5 C − 2 · 50) / C = D/2. The clock passes B so that
		// now + D/2 does not join the bucket of the calls before.
		inc(t, r, "k", 46)
		inc(t, a, "k", 1) // no history: no lease
		clk.Advance(b * time.Millisecond)
		inc(t, a, "k", 1)
		if start, c := meta(t, mr, "k"); start != clk.Now().UnixMilli()+500 || c != 3 {
			t.Errorf("lease bucket starts at now + %d ms with %d units on a key half full, want now + 500 with 3", start-clk.Now().UnixMilli(), c)
		}
	})

	t.Run("Off", func(t *testing.T) {
		clk, mr, a, _ := setup(t, hybrid.WithLeaseAhead(0))
		inc(t, a, "k", 1)
		inc(t, a, "k", 1) // a lease of 2
		if start, _ := meta(t, mr, "k"); start != clk.Now().UnixMilli() {
			t.Errorf("with WithLeaseAhead(0) the lease bucket starts at now + %d ms, want now", start-clk.Now().UnixMilli())
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		_, c := redistest.Mini(t)
		for _, d := range []time.Duration{-time.Millisecond, 15*time.Second + time.Millisecond} {
			_, err := hybrid.NewAbsolute(c, limiter.WithWindow(time.Minute), hybrid.WithLeaseAhead(d))
			if !errors.Is(err, limiter.ErrInvalidConfig) {
				t.Errorf("WithLeaseAhead(%v) at W = 1 min: err = %v, want ErrInvalidConfig", d, err)
			}
		}
	})
}

// supMeta reads the newest bucket's start and offered units of key k's
// suppressed hash on mr (docs/data-model.md: "m" = "<u> <x> <o> <n> <nc>
// <nd>").
func supMeta(t *testing.T, mr *miniredis.Miniredis, k string) (newest, count int64) {
	t.Helper()
	for _, name := range mr.Keys() {
		if !strings.Contains(name, "{"+k+"}") {
			continue
		}
		m := mr.HGet(name, "m")
		var u, x, o, nd int64
		if _, err := fmt.Sscanf(m, "%d %d %d %d %d %d", &u, &x, &o, &newest, &count, &nd); err != nil {
			t.Fatalf("meta of %s = %q: %v", name, m, err)
		}
		return newest, count
	}
	t.Fatalf("no hash of key %q among %v", k, mr.Keys())
	return 0, 0
}

// TestSuppressedForwardDatedLease is TestForwardDatedLease for the
// suppressed hybrid (S = H = 100 per minute, B = 600 ms, D = 1 s): a slow
// key's lease is forward-dated while the call leaves three quarters of S
// free, serves past B from memory, a redissup call joins its bucket, the
// units count until that bucket dies, the hash lives as long, and
// WithLeaseAhead(0) turns it off.
func TestSuppressedForwardDatedLease(t *testing.T) {
	ctx := context.Background()
	rate := limiter.PerMinute(100)
	const w, b = 60_000, 600 // ms
	setup := func(t *testing.T, opts ...limiter.Option) (*conformance.Clock, *miniredis.Miniredis, *hybrid.Suppressed, *redissup.Limiter) {
		clk := conformance.NewClock()
		mr, c := redistest.Mini(t)
		clk.Drive(mr)
		// No per-call timeout: the test counts exact leases and decisions,
		// and a call shed on a loaded machine would differ.
		common := []limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithTimeout(0),
			limiter.WithClock(clk.Now), limiter.WithWindow(time.Minute)}
		s := newSuppressed(t, c, append(append(common, hybrid.WithSyncInterval(time.Hour)), opts...)...)
		r, err := redissup.New(c, common...)
		if err != nil {
			t.Fatal(err)
		}
		return clk, mr, s, r
	}
	inc := func(t *testing.T, l limiter.Limiter, k string, n int64) {
		t.Helper()
		d, err := l.Inc(ctx, k, rate, n)
		if err != nil || !d.Allowed {
			t.Fatalf("Inc(%q, %d) = %+v, %v; want admitted", k, n, d, err)
		}
	}
	fetches := func(s *hybrid.Suppressed) int64 { f, _, _, _ := s.Calls(); return f }

	t.Run("Forward", func(t *testing.T) {
		clk, mr, s, r := setup(t)
		// The first call of a key with no history takes no lease (its
		// unit goes into a bucket at now); the next one, at once, takes
		// the key's first lease, ⌈S (D + B) / W⌉ = 3 units, filed at
		// now + D.
		inc(t, s, "k", 1)
		if start, count := supMeta(t, mr, "k"); start != clk.Now().UnixMilli() || count != 1 || fetches(s) != 1 {
			t.Fatalf("the first call of a key: newest bucket at now + %d with %d units after %d calls; want now with 1 (no lease) after 1", start-clk.Now().UnixMilli(), count, fetches(s))
		}
		inc(t, s, "k", 1)
		now := clk.Now().UnixMilli()
		start, count := supMeta(t, mr, "k")
		if want := now + 1000; start != want || count != 3 || s.Forwards() != 1 {
			t.Fatalf("lease bucket starts at now + %d with %d units (%d forward-dated); want now + 1000 with 3 (1)", start-now, count, s.Forwards())
		}
		clk.Advance(time.Duration(start+b-1-now) * time.Millisecond)
		f := fetches(s)
		inc(t, s, "k", 2)
		if got := fetches(s); got != f {
			t.Errorf("Inc at the forward lease's start + B − 1 made %d Redis calls, want 0", got-f)
		}
		inc(t, r, "k", 1)
		if st, c := supMeta(t, mr, "k"); st != start || c != 4 {
			t.Errorf("after redissup's Inc: newest bucket %d with %d units, want %d with 4", st, c, start)
		}
		now = clk.Now().UnixMilli()
		clk.Advance(time.Duration(start+w+b-1-now) * time.Millisecond)
		if u, err := r.Get(ctx, "k"); err != nil || u.Used != 4 {
			t.Errorf("Get 1 ms before the lease's bucket dies = %+v, %v; want 4 units", u, err)
		}
		clk.Advance(time.Millisecond)
		if u, err := r.Get(ctx, "k"); err != nil || u.Used != 0 {
			t.Errorf("Get when the lease's bucket dies = %+v, %v; want 0", u, err)
		}
	})

	t.Run("TTLUnderRedisTime", func(t *testing.T) {
		mr, c := redistest.Mini(t)
		mr.SetTime(time.Now())
		s := newSuppressed(t, c, limiter.WithPrefix(redistest.Prefix(t)), limiter.WithWindow(10*time.Second),
			hybrid.WithSyncInterval(time.Hour))
		for i := 0; i < 2; i++ { // the second takes the key's first lease
			if d, err := s.Inc(ctx, "k", limiter.Every(100, 10*time.Second), 1); err != nil || !d.Allowed {
				t.Fatalf("Inc = %+v, %v", d, err)
			}
		}
		now := time.Now().UnixMilli()
		start, _ := supMeta(t, mr, "k")
		if start <= now {
			t.Fatalf("lease bucket starts at now + %d ms, want a forward-dated one", start-now)
		}
		if ttl, want := mr.TTL(mr.Keys()[0]), time.Duration(start-now+10_100)*time.Millisecond; ttl < want-5*time.Millisecond {
			t.Errorf("TTL %v, want %v: until the lease's bucket dies", ttl, want)
		}
	})

	t.Run("NotNearSoft", func(t *testing.T) {
		clk, mr, s, r := setup(t)
		inc(t, r, "k", 73)
		inc(t, s, "k", 1) // no history: no lease
		inc(t, s, "k", 1) // with the lease's 3: more than three quarters of S
		if start, c := supMeta(t, mr, "k"); start != clk.Now().UnixMilli() || c != 77 {
			t.Errorf("lease bucket starts at now + %d ms with %d units on a key three quarters full, want now with 77", start-clk.Now().UnixMilli(), c)
		}
	})

	t.Run("Off", func(t *testing.T) {
		clk, mr, s, _ := setup(t, hybrid.WithLeaseAhead(0))
		inc(t, s, "k", 1)
		inc(t, s, "k", 1) // the key's first lease
		if start, _ := supMeta(t, mr, "k"); start != clk.Now().UnixMilli() || s.Forwards() != 0 {
			t.Errorf("with WithLeaseAhead(0) the lease bucket starts at now + %d ms, want now", start-clk.Now().UnixMilli())
		}
	})

	t.Run("SparseKeyTakesNoLease", func(t *testing.T) {
		// Calls further apart than a lease lives (B + D = 1.6 s) take no
		// lease after the first: one Redis call each, which gives back
		// what is left of the first lease; the sync (an hour away) has
		// nothing to give back.
		clk, _, s, r := setup(t)
		for i := 0; i < 5; i++ {
			inc(t, s, "k", 1)
			clk.Advance(2 * time.Second)
		}
		if f, _, rel, _ := s.Calls(); f != 5 || rel != 0 {
			t.Errorf("5 calls 2 s apart: %d lease requests and %d releases, want 5 and 0", f, rel)
		}
		if u, err := s.Get(ctx, "k"); err != nil || u.Used != 5 {
			t.Errorf("Get = %+v, %v; want the 5 admitted units and no leased one", u, err)
		}
		inc(t, s, "k", 1) // 2 s after the previous call: no lease
		inc(t, s, "k", 1) // at once after it: a lease
		if u, err := r.Get(ctx, "k"); err != nil || u.Used <= 7 {
			t.Errorf("redissup's Get after a call that follows its previous one at once = %+v, %v; want more than the 7 admitted units (a lease)", u, err)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		_, c := redistest.Mini(t)
		_, err := hybrid.NewSuppressed(c, limiter.WithWindow(time.Minute), hybrid.WithLeaseAhead(15*time.Second+time.Millisecond))
		if !errors.Is(err, limiter.ErrInvalidConfig) {
			t.Errorf("WithLeaseAhead(15.001 s) at W = 1 min: err = %v, want ErrInvalidConfig", err)
		}
	})
}
