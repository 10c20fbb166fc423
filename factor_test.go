package sluice_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/local"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// TestHardLimitFactorBound is the regression test for a hard-limit factor
// no rate can use (1e300): New of every suppressed provider refuses it
// with ErrInvalidConfig naming the factor, where every Inc used to fail
// with an error that blamed the rate. The largest factor accepted, 2^50,
// is accepted, and a rate whose hard capacity passes 2^50 under it is the
// call's ErrInvalidRate naming the factor.
func TestHardLimitFactorBound(t *testing.T) {
	ctx := context.Background()
	_, client := redistest.Mini(t)
	for _, tc := range []struct {
		name  string
		build func(opts ...limiter.Option) (limiter.Limiter, error)
	}{
		{"local.NewSuppressed", func(o ...limiter.Option) (limiter.Limiter, error) { return local.NewSuppressed(o...) }},
		{"redissup.New", func(o ...limiter.Option) (limiter.Limiter, error) { return redissup.New(client, o...) }},
		{"hybrid.NewSuppressed", func(o ...limiter.Option) (limiter.Limiter, error) { return hybrid.NewSuppressed(client, o...) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prefix []limiter.Option // the prefix, for the providers in Redis alone
			if tc.name != "local.NewSuppressed" {
				prefix = append(prefix, limiter.WithPrefix(redistest.Prefix(t)))
			}
			for _, f := range []float64{1e300, math.MaxFloat64, 1<<50 + 1<<10} {
				l, err := tc.build(append(prefix, limiter.WithHardLimitFactor(f))...)
				if err == nil {
					l.Close(ctx)
				}
				if !errors.Is(err, limiter.ErrInvalidConfig) || !strings.Contains(err.Error(), "hard limit factor") {
					t.Errorf("%s(WithHardLimitFactor(%v)) = %v, want ErrInvalidConfig naming the factor", tc.name, f, err)
				}
			}
			l, err := tc.build(append(prefix, limiter.WithHardLimitFactor(1<<50))...)
			if err != nil {
				t.Fatalf("%s(WithHardLimitFactor(2^50)) = %v, want a limiter", tc.name, err)
			}
			defer l.Close(ctx)
			_, err = l.Inc(ctx, "k", limiter.PerMinute(10), 1)
			if !errors.Is(err, limiter.ErrInvalidRate) || !strings.Contains(err.Error(), "hard limit factor") {
				t.Errorf("Inc(%q, 10/min) with F = 2^50 = %v, want ErrInvalidRate naming the factor", "k", err)
			}
			if _, err := l.Inc(ctx, "k", limiter.PerMinute(1), 1); err != nil {
				t.Errorf("Inc(%q, 1/min) with F = 2^50 = %v, want a decision (H = 2^50)", "k", err)
			}
		})
	}
}
