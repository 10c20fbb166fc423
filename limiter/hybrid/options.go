package hybrid

import (
	"fmt"
	"time"

	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

// DefaultSyncInterval is the period of the background sync when
// WithSyncInterval is not given.
const DefaultSyncInterval = 50 * time.Millisecond

// DefaultLeaseAheadMax bounds the default of WithLeaseAhead, W/20: a
// forward-dated lease lives at most this plus B, and that is how long an
// instance may go on answering from a lease after Redis failed before its
// calls find out (docs/algorithms.md, Hybrid leases, Failure).
const DefaultLeaseAheadMax = time.Second

// WithSyncInterval sets how often the background sync visits the keys
// touched since its last visit: it gives back the unused units of leases
// that are idle or about to expire, and renews the leases of busy keys,
// one pipelined batch per tick. Default 50 ms (DefaultSyncInterval). It
// must be positive; shorter intervals return unused units sooner (less
// under-admission for the rest of the fleet) at the price of more Redis
// calls. Other providers reject it (limiter.ErrInvalidConfig).
func WithSyncInterval(d time.Duration) limiter.Option {
	return func(c *window.Config) {
		c.Record(settings.OptSyncInterval)
		if d <= 0 {
			c.Fail(fmt.Errorf("%w: sync interval %v must be positive", limiter.ErrInvalidConfig, d))
			return
		}
		c.SyncInterval = d
	}
}

// WithMaxLease bounds the units one lease reserves. Default: no bound but
// the key's capacity (the lease size follows the key's rate). 1 makes
// every admission ask Redis, so the provider decides as redisabs does,
// call for call. It must be at least 1. Other providers reject it
// (limiter.ErrInvalidConfig).
func WithMaxLease(n int64) limiter.Option {
	return func(c *window.Config) {
		c.Record(settings.OptMaxLease)
		if n < 1 {
			c.Fail(fmt.Errorf("%w: max lease %d must be at least 1", limiter.ErrInvalidConfig, n))
			return
		}
		c.MaxLease = n
	}
}

// WithLeaseAhead bounds how far after the grant a lease's bucket may
// start (D): a slow key gets leases whose units go into a bucket up to D
// ahead, so a lease serves up to D + B instead of B; a key near its
// capacity gets none. D is also how much longer a lease may go on
// answering after Redis failed. Default W/20, at most DefaultLeaseAheadMax
// (1 s); 0 turns forward-dating off. It must be between 0 and W/4. Other
// providers reject it (limiter.ErrInvalidConfig; docs/algorithms.md,
// Hybrid leases).
func WithLeaseAhead(d time.Duration) limiter.Option {
	return func(c *window.Config) {
		c.Record(settings.OptLeaseAhead)
		if d < 0 {
			c.Fail(fmt.Errorf("%w: lease ahead %v must not be negative", limiter.ErrInvalidConfig, d))
			return
		}
		c.LeaseAhead = d
		if d == 0 {
			c.LeaseAhead = -1 // off, as opposed to unset
		}
	}
}
