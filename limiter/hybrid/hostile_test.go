package hybrid_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// TestHostile compares hostile calls (huge costs, clock edges) of the
// absolute hybrid with the local provider, on miniredis and real Redis.
// With leases of one unit every decision is redisabs' (the suppressed
// hybrid's declines from memory are sent in sums, and its cached
// refusals keep the reply's ResetAfter: TestDeclinedSaturates checks its
// counts instead).
func TestHostile(t *testing.T) {
	t.Run("Mini", func(t *testing.T) {
		conformance.RunHostile(t, conformance.AbsoluteStrategy, conformance.LocalAbsolute, onMini(hybrid.WithMaxLease(1)))
	})
	t.Run("Real", func(t *testing.T) {
		conformance.RunHostile(t, conformance.AbsoluteStrategy, conformance.LocalAbsolute, onReal(hybrid.WithMaxLease(1)))
	})
}

// TestDeclinedSaturates: the suppressed hybrid declines huge costs from
// memory (a cached refusal beyond H) thousands of times; what it sends
// Redis stops at 2^52 declined units plus one per call, as a refusal
// records (window.MaxDeclined), so the totals stay exact and the sum
// never overflows (10,000 × 2^50 would pass 2^63).
func TestDeclinedSaturates(t *testing.T) {
	ctx := context.Background()
	for _, b := range []string{"Mini", "Real"} {
		t.Run(b, func(t *testing.T) {
			var c hybrid.Client
			clk := conformance.NewClock()
			if b == "Mini" {
				mr, mc := redistest.Mini(t)
				clk.Drive(mr)
				c = mc
			} else {
				c = realClient(t)
			}
			opts := []limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithClock(clk.Now),
				limiter.WithWindow(time.Second), limiter.WithHardLimitFactor(1)}
			l := newDefaultSuppressed(t, c, opts...)
			const units = int64(1) << 50
			rate := limiter.PerSecond(float64(units)) // S = H = 2^50
			if d, err := l.Inc(ctx, "k", rate, units); err != nil || !d.Allowed {
				t.Fatalf("Inc(k, 2^50) = %+v, %v; want admitted", d, err)
			}
			const refusals = 10_000
			for i := 0; i < refusals; i++ {
				if d, err := l.Inc(ctx, "k", rate, units); err != nil || d.Allowed {
					t.Fatalf("refusal %d: Inc(k, 2^50) = %+v, %v; want refused", i, d, err)
				}
			}
			if err := l.Close(ctx); err != nil { // sends the declines from memory
				t.Fatal(err)
			}
			r, err := redissup.New(c, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close(ctx)
			u, err := r.Get(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if u.Used != units || u.Declined < window.MaxDeclined || u.Declined > window.MaxDeclined+refusals {
				t.Fatalf("Get(k) = %+v, want Used 2^50 and Declined in [2^52, 2^52 + %d]", u, refusals)
			}
			t.Logf("Get(k) = %+v: declined 2^52 + %d", u, u.Declined-window.MaxDeclined)
		})
	}
}
