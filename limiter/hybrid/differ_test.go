package hybrid_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// TestDiffersFromRedisabs documents, one case each, where a hybrid answer
// legitimately differs from the one redisabs gives for the same state
// (docs/algorithms.md, Hybrid leases, What differs): two hybrid
// instances A and B and a redisabs instance R share one key on a
// miniredis with a frozen clock; the sync is an hour away, so only the
// calls below move leases.
func TestDiffersFromRedisabs(t *testing.T) {
	ctx := context.Background()
	rate := limiter.PerMinute(10) // C = 10
	setup := func(t *testing.T) (a, b *hybrid.Absolute, r *redisabs.Limiter) {
		mr, c := redistest.Mini(t)
		mr.SetTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
		// No per-call timeout: every decision is compared with redisabs',
		// and a call shed on a loaded machine would differ.
		opts := []limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithTimeout(0)}
		hyb := append(opts[:len(opts):len(opts)], hybrid.WithSyncInterval(time.Hour))
		a, b = newAbsolute(t, c, hyb...), newAbsolute(t, c, hyb...)
		// redisabs refuses the hybrid's options (ErrInvalidConfig).
		r, err := redisabs.New(c, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return a, b, r
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
		inc(t, l, 1)
		inc(t, l, 1)
		inc(t, l, 1)
	}

	t.Run("RemainingIsTheLatestGrants", func(t *testing.T) {
		a, b, r := setup(t)
		lease(t, a) // A: 3 admitted, 1 leased
		inc(t, b, 3)
		d := inc(t, a, 1) // from A's lease
		peek := inc(t, r, 0)
		// Redis holds A's 3 units and B's 3 (and B's lease): R sees 4
		// left at most; A reports what was left at its grant.
		if d.Remaining <= peek.Remaining {
			t.Errorf("A's Remaining from memory = %d, R's = %d; want A's to miss B's admission", d.Remaining, peek.Remaining)
		}
	})

	t.Run("GetCountsOthersLeases", func(t *testing.T) {
		a, b, r := setup(t)
		lease(t, a) // 3 admitted, 1 unused in A's lease
		ua, _ := a.Get(ctx, "k")
		ub, _ := b.Get(ctx, "k")
		ur, _ := r.Get(ctx, "k")
		if ua.Used != 3 || ub.Used != 4 || ur.Used != 4 {
			t.Errorf("Get: A %d, B %d, R %d; want 3 (its own lease left out), 4 and 4 (A's unused unit counted)", ua.Used, ub.Used, ur.Used)
		}
		if err := a.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if ur, _ = r.Get(ctx, "k"); ur.Used != 3 {
			t.Errorf("after A's Close: R's Get = %d, want the 3 units admitted", ur.Used)
		}
	})

	t.Run("CachedRefusal", func(t *testing.T) {
		a, b, r := setup(t)
		inc(t, b, 10) // full
		if d := inc(t, a, 1); d.Allowed {
			t.Fatalf("A admitted on a full key: %+v", d)
		}
		if err := r.Reset(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		// Redis is empty now: R admits, A still refuses from memory, with
		// the RetryAfter Redis gave, until a sync interval has passed.
		if d := inc(t, r, 1); !d.Allowed {
			t.Fatalf("R refused on an empty key: %+v", d)
		}
		if d := inc(t, a, 1); d.Allowed || d.RetryAfter <= 0 {
			t.Errorf("A after the reset = %+v; want its cached refusal", d)
		}
		// Another cost is not cached: A asks Redis.
		if d := inc(t, a, 2); !d.Allowed {
			t.Errorf("A's Inc(2) after the reset = %+v; want admitted by Redis", d)
		}
	})

	t.Run("ResetKeepsOthersLeases", func(t *testing.T) {
		a, b, _ := setup(t)
		lease(t, b) // B holds one unused unit
		if err := a.Reset(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		inc(t, a, 10) // the whole capacity, on the emptied key
		// B still holds its leased unit, which the Reset took out of
		// Redis: after a Reset, a window may hold C plus the units other
		// instances still hold in leases (for at most D + B).
		if d := inc(t, b, 1); !d.Allowed {
			t.Errorf("B after A's Reset = %+v; want its leased unit", d)
		}
	})
}
