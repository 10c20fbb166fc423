package hybrid_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// TestSuppressedDiffers documents, one case each, where a suppressed
// hybrid answer legitimately differs from the one redissup gives for the
// same state (docs/algorithms.md, Hybrid leases, The suppressed hybrid):
// two hybrid instances A and B and a redissup instance R share one key on
// a miniredis that follows a fake clock; the sync is an hour away, so only
// the calls below move leases. S = 10, H = 20 over W = 1 s, B = 100 ms; the
// factor is not cached and every draw is the value of draw. Forward-dating
// is off (WithLeaseAhead(0)): the cases count leases unit by unit from a
// first lease of one (after the key's first call, which takes none), where
// a slow key's first lease would take ⌈S (D + B) / W⌉ = 2
// (TestSuppressedForwardDatedLease covers that).
func TestSuppressedDiffers(t *testing.T) {
	ctx := context.Background()
	rate := limiter.PerSecond(10)
	draw := 0.5
	setup := func(t *testing.T) (a, b *hybrid.Suppressed, r *redissup.Limiter, clk *conformance.Clock) {
		mr, c := redistest.Mini(t)
		clk = conformance.NewClock()
		mr.SetTime(clk.Now())
		clk.Drive(mr)
		draw = 0.5
		// No per-call timeout: every decision is compared with redissup's,
		// and a call shed on a loaded machine would differ.
		opts := []limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithTimeout(0), limiter.WithClock(clk.Now),
			limiter.WithWindow(time.Second), limiter.WithBucket(100 * time.Millisecond), limiter.WithHardLimitFactor(2),
			limiter.WithSuppressionCache(0), limiter.WithRandom(func() float64 { return draw })}
		hyb := append(opts[:len(opts):len(opts)], hybrid.WithSyncInterval(time.Hour), hybrid.WithLeaseAhead(0))
		a, b = newSuppressed(t, c, hyb...), newSuppressed(t, c, hyb...)
		// redissup refuses the hybrid's options (ErrInvalidConfig).
		r, err := redissup.New(c, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return a, b, r, clk
	}
	inc := func(t *testing.T, l limiter.Limiter, n int64) limiter.Decision {
		t.Helper()
		d, err := l.Inc(ctx, "k", rate, n)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// lease makes l hold one unused unit: its first Inc takes no lease
	// (a key without history), its second leases one unit and uses it,
	// its third asks for two and uses one.
	lease := func(t *testing.T, l limiter.Limiter) {
		t.Helper()
		if !inc(t, l, 1).Allowed || !inc(t, l, 1).Allowed || !inc(t, l, 1).Allowed {
			t.Fatal("lease: an Inc was refused")
		}
	}

	t.Run("RemainingIsTheLatestReplies", func(t *testing.T) {
		a, b, r, _ := setup(t)
		lease(t, a) // A: 3 accepted, 1 leased
		inc(t, b, 3)
		d := inc(t, a, 1) // from A's lease
		peek := inc(t, r, 0)
		// Redis holds A's 4 units and B's 3: R sees 3 left; A reports
		// what was left at its latest reply.
		if d.Remaining != 6 || peek.Remaining != 3 {
			t.Errorf("Remaining: A's from memory %d, R's %d; want 6 (B's admission not seen) and 3", d.Remaining, peek.Remaining)
		}
	})

	t.Run("GetCountsOthersLeasesNotTheirDeclines", func(t *testing.T) {
		a, b, r, _ := setup(t)
		inc(t, b, 10) // S reached
		lease(t, a)   // above S at f = 0, 1/11 and 1/6: 3 accepted, 1 leased
		draw = 0
		if d := inc(t, a, 1); d.Allowed { // refused by the draw, from memory
			t.Fatalf("A admitted at draw 0 above S: %+v", d)
		}
		ua, _ := a.Get(ctx, "k")
		ur, _ := r.Get(ctx, "k")
		if ua.Used != 13 || ua.Declined != 1 || ur.Used != 14 || ur.Declined != 0 {
			t.Errorf("Get: A %+v, R %+v; want A 13 accepted (its lease left out) and 1 declined (its own), R 14 (A's leased unit counted) and 0 (A's decline not sent yet)", ua, ur)
		}
		if err := a.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if ur, _ = r.Get(ctx, "k"); ur.Used != 13 || ur.Declined != 1 {
			t.Errorf("after A's Close: R's Get = %+v, want 13 accepted and 1 declined", ur)
		}
	})

	t.Run("FactorCountsLeasesAsOffered", func(t *testing.T) {
		a, b, r, _ := setup(t)
		inc(t, b, 10)
		lease(t, a)
		// Observed in Redis: B's 10, A's 3 and A's unused leased unit.
		// R's factor counts that unit as offered (1 − 10/14); A leaves its
		// own out (1 − 10/13).
		dr, err := r.IsAllowed(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		da, err := a.IsAllowed(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if dr.SuppressionFactor != 0.285714 || da.SuppressionFactor != 0.230769 {
			t.Errorf("IsAllowed factor: R %v, A %v; want 0.285714 and 0.230769", dr.SuppressionFactor, da.SuppressionFactor)
		}
	})

	t.Run("RetryAfterOfARefusalFromMemory", func(t *testing.T) {
		a, b, r, clk := setup(t)
		inc(t, b, 1)
		clk.Advance(200 * time.Millisecond)
		inc(t, b, 9) // S reached, in a second bucket
		lease(t, a)
		draw = 0
		da := inc(t, a, 1) // refused from memory
		dr := inc(t, r, 1) // refused by Redis
		// R walks the buckets: 4 units must expire, and the oldest bucket
		// holds 1, so the second must die (at 1.3 s). A answers when the
		// oldest bucket dies (at 1.1 s), when the window first frees units.
		if da.Allowed || dr.Allowed || da.RetryAfter != 900*time.Millisecond || dr.RetryAfter != 1100*time.Millisecond {
			t.Errorf("refusals: A %+v, R %+v; want RetryAfter 900ms (A) and 1.1s (R)", da, dr)
		}
	})

	t.Run("CachedRefusalBeyondH", func(t *testing.T) {
		a, b, r, _ := setup(t)
		inc(t, b, 10)
		if d := inc(t, b, 10); !d.Allowed { // at f = 0: H reached
			t.Fatalf("B refused its second 10 at f = 0: %+v", d)
		}
		if d := inc(t, a, 1); d.Allowed || d.SuppressionFactor != 1 {
			t.Fatalf("A admitted beyond H: %+v", d)
		}
		if err := r.Reset(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if d := inc(t, r, 1); !d.Allowed {
			t.Fatalf("R refused on an empty key: %+v", d)
		}
		// Redis is nearly empty: A still refuses the same n from memory
		// until its sync interval or Redis' RetryAfter has passed.
		if d := inc(t, a, 1); d.Allowed || d.SuppressionFactor != 1 || d.RetryAfter <= 0 {
			t.Errorf("A after the reset = %+v; want its cached refusal", d)
		}
		if d := inc(t, a, 2); !d.Allowed {
			t.Errorf("A's Inc(2) after the reset = %+v; want admitted by Redis", d)
		}
	})

	t.Run("ResetKeepsOthersLeases", func(t *testing.T) {
		a, b, _, _ := setup(t)
		lease(t, b) // B holds one unused unit
		if err := a.Reset(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		inc(t, a, 20) // up to H, on the emptied key, at f = 0
		if d := inc(t, b, 1); !d.Allowed {
			t.Errorf("B after A's Reset = %+v; want its leased unit", d)
		}
	})
}
