package hybrid_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
)

// TestServerDown: a stopped or frozen Redis gives every call of both hybrids
// (FailError) a wrapped error within the deadline, and no panic, as for
// the Redis providers.
func TestServerDown(t *testing.T) {
	t.Run("Absolute", func(t *testing.T) {
		conformance.RunOutage(t, "hybrid", func(t *testing.T, c *redis.Client) limiter.Limiter {
			return newDefaultAbsolute(t, c, limiter.WithFailurePolicy(limiter.FailError))
		})
	})
	t.Run("Suppressed", func(t *testing.T) {
		conformance.RunOutage(t, "hybrid", func(t *testing.T, c *redis.Client) limiter.Limiter {
			return newDefaultSuppressed(t, c, limiter.WithFailurePolicy(limiter.FailError))
		})
	})
}

// TestConfigErrors: both hybrids reject every bad option with
// ErrInvalidConfig, as the other providers do.
func TestConfigErrors(t *testing.T) {
	_, c := redistest.Mini(t)
	// closed is New's error, or Close's of the limiter it built.
	closed := func(l limiter.Limiter, err error) error {
		if err == nil {
			return l.Close(context.Background())
		}
		return err
	}
	conformance.ConfigErrors(t, func(opts ...limiter.Option) error { return closed(hybrid.NewAbsolute(c, opts...)) })
	conformance.ConfigErrors(t, func(opts ...limiter.Option) error { return closed(hybrid.NewSuppressed(c, opts...)) })
}
