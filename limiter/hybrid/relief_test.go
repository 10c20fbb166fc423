package hybrid_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
)

// TestHotKeyRelief: three hybrid instances of 64 goroutines each on one
// refusing key (C = 2,000 per second), with default options but the window
// and the timeout (conformance.RunHotKey says why), make at most one script
// call per 20 refused decisions (leases, renewals and releases included),
// admit no more than C (accept no more than H) in a window, and never
// answer degraded.
func TestHotKeyRelief(t *testing.T) {
	for _, p := range []struct {
		name string
		f    func(c *redis.Client, opts ...limiter.Option) (limiter.Limiter, error)
	}{
		{"Absolute", func(c *redis.Client, opts ...limiter.Option) (limiter.Limiter, error) {
			return hybrid.NewAbsolute(c, opts...)
		}},
		{"Suppressed", func(c *redis.Client, opts ...limiter.Option) (limiter.Limiter, error) {
			return hybrid.NewSuppressed(c, opts...)
		}},
	} {
		t.Run(p.name, func(t *testing.T) {
			conformance.RunHotKey(t, func(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter {
				l, err := p.f(c, opts...)
				if err != nil {
					t.Fatalf("New%s: %v", p.name, err)
				}
				t.Cleanup(func() { l.Close(context.Background()) })
				return l
			}, 20, 2000)
		})
	}
}
