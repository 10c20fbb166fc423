package cleanup

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	win "github.com/sluice-go/sluice/internal/window"

	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"golang.org/x/time/rate"
)

// Errors of a pass, matched with errors.Is: another cleaner holds the
// lease on the prefix (ErrLocked), or the pass lost its lease (a pause
// longer than the lease) and stopped early (ErrLeaseLost, with
// Report.LeaseLost set).
var (
	ErrLocked    = errors.New("sluice: cleanup: another cleaner holds the lease")
	ErrLeaseLost = errors.New("sluice: cleanup: lease lost during the pass")
)

// Client is what a Cleaner calls, as go-redis' clients and module
// sluicerueidis' adapter have it. A cluster is walked master by master, a
// ring shard by shard and a Nodes node by node; any other client as one
// server.
type Client interface {
	redis.Scripter
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
	HScan(ctx context.Context, key string, cursor uint64, match string, count int64) *redis.ScanCmd
	Unlink(ctx context.Context, keys ...string) *redis.IntCmd
	PTTL(ctx context.Context, key string) *redis.DurationCmd
}

type masters interface {
	ForEachMaster(ctx context.Context, fn func(ctx context.Context, client *redis.Client) error) error
}

type shards interface {
	ForEachShard(ctx context.Context, fn func(ctx context.Context, client *redis.Client) error) error
}

// Nodes is a Client of several servers (the rueidis adapter of a
// cluster): ForEachNode calls fn with a Client of each master,
// concurrently or in turn, and returns the first error.
type Nodes interface {
	Client
	ForEachNode(ctx context.Context, fn func(ctx context.Context, node Client) error) error
}

// Cleaner walks the Redis keys of one prefix and reclaims what expiry
// missed. Its methods are safe for concurrent use; it runs one pass at a
// time. Build one with New; the zero value is not usable.
type Cleaner struct {
	client Client
	o      options
	lease  *lease
	lim    *rate.Limiter
	slack  int64 // ms added to a TTL set under WithClock

	passMu sync.Mutex // one pass at a time

	mu sync.Mutex
	bg *loop // the background loop, nil when not started

	// Test hooks (export_test.go).
	pause func()
	inKey func(redisKey string) func()
}

// New returns a Cleaner of the keys limiters write under the prefix
// (WithPrefix) through client. A nil client or a bad option is
// limiter.ErrInvalidConfig. It starts nothing: call Run or Start.
func New(client Client, opts ...Option) (*Cleaner, error) {
	if v := reflect.ValueOf(client); client == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fmt.Errorf("cleanup: %w: nil client", limiter.ErrInvalidConfig)
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("cleanup: %w", err)
	}
	c := &Cleaner{client: client, o: o, lease: newLease(client, o.prefix, o.lease)}
	if math.IsInf(o.rate, 1) {
		c.lim = rate.NewLimiter(rate.Inf, 1)
	} else {
		// A hundredth of a second's budget: no sleep per key at high rates.
		c.lim = rate.NewLimiter(rate.Limit(o.rate), max(1, int(o.rate/100)))
	}
	if o.clock != nil {
		c.slack = redisprov.ClockSlackMs
	}
	return c, nil
}

// Run makes one pass over the prefix now and returns its report: at once
// ErrLocked when another cleaner holds the lease, or the report so far
// and the error that stopped the pass (ErrLeaseLost, Redis, ctx). It
// releases the lease unless this Cleaner's background loop runs.
func (c *Cleaner) Run(ctx context.Context) (Report, error) {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	r, err := c.pass(ctx)
	if !errors.Is(err, ErrLocked) {
		c.observe(ctx, r, err)
	}
	c.mu.Lock()
	bg := c.bg != nil
	c.mu.Unlock()
	if !bg {
		if rerr := c.lease.release(ctx); rerr != nil && err == nil {
			err = rerr
		}
	}
	return r, err
}

// report hands a pass of the background loop to WithReports and
// WithObserver.
func (c *Cleaner) report(ctx context.Context, r Report, err error) {
	if c.o.reports != nil {
		c.o.reports(r, err)
	}
	c.observe(ctx, r, err)
}

// observe sends r to WithObserver's observer as a "cleanup" Event.
func (c *Cleaner) observe(ctx context.Context, r Report, err error) {
	if c.o.observer == nil {
		return
	}
	r.failed(ctx, err)
	c.o.observer.ObserveEvent(ctx, limiter.Event{Kind: win.EventCleanup, Provider: win.ProviderCleanup,
		Cleanup: r.CleanupReport})
}

// Ping checks that Redis answers the cleaner: one SCAN step and a SCRIPT
// LOAD, bounded by ctx or else one second. A failure is an error naming
// the address. Call it at start-up.
func (c *Cleaner) Ping(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Second)
		defer cancel()
	}
	err := c.client.Scan(ctx, 0, key.Pattern(c.o.prefix), 1).Err()
	if err == nil {
		err = cleanScript.Load(ctx, c.client).Err()
	}
	if err != nil {
		return redisprov.PingError("cleanup", c.client, err)
	}
	return nil
}
