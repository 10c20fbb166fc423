package sluice_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// TestOutOfRangeCountIsAnError is the regression test for a live hash
// whose used count another client set to 1e29: redisabs' Get reported
// Used = -2^63, and redissup and the suppressed hybrid refused with no
// wait. Every read and decision of such a state is now limiter.ErrLayout
// naming the hash, and Reset forgets it.
func TestOutOfRangeCountIsAnError(t *testing.T) {
	t.Run("Mini", func(t *testing.T) {
		_, c := redistest.Mini(t)
		outOfRangeCount(t, c)
	})
	t.Run("Real", func(t *testing.T) { outOfRangeCount(t, redistest.Real(t).Client(t)) })
}

func outOfRangeCount(t *testing.T, client *redis.Client) {
	ctx := context.Background()
	const huge = "100000000000000000000000000000" // 1e29
	rate := limiter.PerMinute(10)
	for _, tc := range []struct {
		name     string
		strategy string
		build    func(opts ...limiter.Option) (limiter.Limiter, error)
	}{
		{"redisabs", key.Absolute, func(o ...limiter.Option) (limiter.Limiter, error) { return redisabs.New(client, o...) }},
		{"redissup", key.Suppressed, func(o ...limiter.Option) (limiter.Limiter, error) { return redissup.New(client, o...) }},
		{"hybrid.NewSuppressed", key.Suppressed, func(o ...limiter.Option) (limiter.Limiter, error) { return hybrid.NewSuppressed(client, o...) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := redistest.Prefix(t)
			opts := []limiter.Option{limiter.WithPrefix(prefix), limiter.WithWindow(time.Minute)}
			if tc.strategy == key.Suppressed {
				opts = append(opts, limiter.WithHardLimitFactor(1.5))
			}
			l, err := tc.build(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close(ctx)
			const k = "k"
			if _, err := l.Inc(ctx, k, rate, 1); err != nil {
				t.Fatal(err)
			}
			h, _ := key.Name(prefix, k, tc.strategy, key.Hash)
			m, err := client.HGet(ctx, h, "m").Result()
			if err != nil {
				t.Fatalf("HGET %s m: %v", h, err)
			}
			// "c u o n nc" (absolute) or "u x o n nc nd" (suppressed): the
			// used count and the newest bucket's count set to 1e29.
			f := strings.Fields(m)
			if tc.strategy == key.Absolute {
				f[1], f[4] = huge, huge
			} else {
				f[0], f[4] = huge, huge
			}
			if err := client.HSet(ctx, h, "m", strings.Join(f, " ")).Err(); err != nil {
				t.Fatal(err)
			}
			check := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, limiter.ErrLayout) || !strings.Contains(err.Error(), h) {
					t.Errorf("%s(%q) on a count of 1e29: %v; want ErrLayout naming %s", op, k, err, h)
				}
			}
			u, err := l.Get(ctx, k)
			check("Get", err)
			if u.Used < 0 {
				t.Errorf("Get(%q) = %+v, want no negative count", k, u)
			}
			d, err := l.Inc(ctx, k, rate, 1)
			check("Inc", err)
			if err == nil && !d.Allowed && d.RetryAfter == 0 && !d.Never {
				t.Errorf("Inc(%q, 1) = %+v: a refusal with no wait", k, d)
			}
			_, err = l.IsAllowed(ctx, k)
			check("IsAllowed", err)
			if err := l.Reset(ctx, k); err != nil {
				t.Fatalf("Reset(%q) = %v", k, err)
			}
			if d, err := l.Inc(ctx, k, rate, 1); err != nil || !d.Allowed {
				t.Errorf("Inc(%q, 1) after Reset = %+v, %v; want admitted", k, d, err)
			}
		})
	}
}
