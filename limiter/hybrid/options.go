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

// DefaultLeaseAheadMax bounds the default of WithLeaseAhead, W/20.
const DefaultLeaseAheadMax = time.Second

// WithSyncInterval sets how often the background sync gives back the
// unused units of idle or expiring leases and renews the leases of busy
// keys, one pipelined batch per tick. Default DefaultSyncInterval; shorter
// returns units sooner at the price of more Redis calls. A d that is not
// positive, or the option given to another provider, is
// limiter.ErrInvalidConfig.
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

// WithMaxLease bounds the units one lease reserves. Default: the key's
// capacity; 1 makes every admission ask Redis, as redisabs does. An n
// below 1, or the option given to another provider, is
// limiter.ErrInvalidConfig.
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

// WithLeaseAhead bounds D, how far after the grant a slow key's lease
// bucket may start, so that its lease serves up to D + B instead of B; D
// is also how much longer a lease may answer after Redis failed. Default
// W/20, at most DefaultLeaseAheadMax; 0 turns it off. A d outside 0 to
// W/4, or the option given to another provider, is
// limiter.ErrInvalidConfig (docs/algorithms.md, Hybrid leases).
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
