package cleanup

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/config"
	"github.com/sluice-go/sluice/internal/failover"
	"github.com/sluice-go/sluice/internal/redisx"
	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
	"golang.org/x/time/rate"
)

// Errors of a pass, matched with errors.Is.
var (
	// ErrLocked: another cleaner holds the lease on the prefix, so this
	// one did not walk it.
	ErrLocked = errors.New("sluice: cleanup: another cleaner holds the lease")
	// ErrLeaseLost: the pass stopped early because its lease expired or was
	// taken over (a pause longer than the lease); Report.LeaseLost is set.
	ErrLeaseLost = errors.New("sluice: cleanup: lease lost during the pass")
)

// Client is what a Cleaner calls. *redis.Client, *redis.ClusterClient,
// *redis.Ring and the failover clients satisfy it, and so does the rueidis
// adapter of module sluicerueidis. A ClusterClient is walked master by
// master (ForEachMaster), a Ring shard by shard (ForEachShard) and a
// client with a ForEachNode method (see Nodes) node by node, each key
// acted on at the server that holds it; any other client is walked as one
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

// Nodes is a Client that is not go-redis' and serves its keys from more
// than one server (a cluster): ForEachNode calls fn with a Client of each
// master, concurrently or in turn, and returns the first error. A Cleaner
// walks each node's keys through it. The rueidis adapter of module
// sluicerueidis is one.
type Nodes interface {
	Client
	ForEachNode(ctx context.Context, fn func(ctx context.Context, node Client) error) error
}

// Cleaner walks the Redis keys of one prefix and reclaims what expiry
// missed (docs/operations.md, Cleanup). Its methods are safe for
// concurrent use; it runs one pass at a time. Build one with New; the zero
// value is not usable.
type Cleaner struct {
	client Client
	o      options
	lease  *lease
	lim    *rate.Limiter
	slack  int64 // ms added to a TTL set under WithClock

	passMu sync.Mutex // one pass at a time

	mu sync.Mutex
	bg *loop // the background loop, nil when not started

	// Test hooks (export_test.go): pause runs before each key, before the
	// lease is checked; inKey wraps the handling of each key after it.
	pause func()
	inKey func(redisKey string) func()
}

// loop is one run of the background loop.
type loop struct {
	stop     chan struct{}
	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// New returns a Cleaner of the keys that limiters write under the prefix
// (WithPrefix, default "sluice") through client. A nil client or a bad
// option is limiter.ErrInvalidConfig. New starts nothing: call Run for one
// pass or Start for the background loop.
func New(client Client, opts ...Option) (*Cleaner, error) {
	if client == nil || isNilPointer(client) {
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
		// A burst of a hundredth of a second's budget, at least 1: the
		// pace stays even, with no sleep per key at high rates.
		c.lim = rate.NewLimiter(rate.Limit(o.rate), max(1, int(o.rate/100)))
	}
	if o.clock != nil {
		c.slack = redisx.ClockSlackMs
	}
	return c, nil
}

func isNilPointer(c Client) bool {
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Run makes one pass over the prefix now and returns its report. It takes
// the lease first: when another cleaner holds it, Run returns ErrLocked
// at once. A pass that loses its lease stops at the next key and returns
// its report so far with ErrLeaseLost. Any other error (Redis unreachable,
// ctx done) stops the pass and comes with the report so far. Run releases
// the lease at the end unless the background loop of this Cleaner is
// running, which keeps it.
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
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if rerr := c.lease.release(rctx); rerr != nil && err == nil {
			err = rerr
		}
	}
	return r, err
}

// pass walks every node once, holding the lease.
func (c *Cleaner) pass(ctx context.Context) (Report, error) {
	start := time.Now()
	r := Report{Prefix: c.o.prefix, DryRun: c.o.dryRun}
	ok, err := c.lease.acquire(ctx)
	if err != nil {
		return r, err
	}
	if !ok {
		return r, fmt.Errorf("%w on prefix %q", ErrLocked, c.o.prefix)
	}
	var mu sync.Mutex
	var nodes atomic.Int64
	walk := func(ctx context.Context, node Client) error {
		nodes.Add(1)
		var nr Report
		err := c.walk(ctx, node, &nr)
		mu.Lock()
		r.add(&nr)
		mu.Unlock()
		if err != nil {
			return fmt.Errorf("cleanup: %s: %w", failover.Addr(node), err)
		}
		return nil
	}
	walkClient := func(ctx context.Context, node *redis.Client) error { return walk(ctx, node) }
	switch cl := c.client.(type) {
	case masters:
		err = cl.ForEachMaster(ctx, walkClient)
	case shards:
		err = cl.ForEachShard(ctx, walkClient)
	case Nodes:
		err = cl.ForEachNode(ctx, walk)
	default:
		nodes.Add(1)
		err = c.walk(ctx, c.client, &r)
		if err != nil {
			err = fmt.Errorf("cleanup: %w", err)
		}
	}
	r.Nodes = int(nodes.Load())
	r.Duration = time.Since(start)
	if err == nil && r.LeaseLost {
		err = fmt.Errorf("%w on prefix %q", ErrLeaseLost, c.o.prefix)
	}
	r.failed(ctx, err)
	return r, err
}

// walk SCANs one node and handles every key it returns.
func (c *Cleaner) walk(ctx context.Context, node Client, r *Report) error {
	pattern := key.Pattern(c.o.prefix)
	var cursor uint64
	for {
		if err := c.lim.Wait(ctx); err != nil {
			return err
		}
		keys, next, err := node.Scan(ctx, cursor, pattern, scanCount).Result()
		if err != nil {
			return fmt.Errorf("SCAN: %w", err)
		}
		for _, k := range keys {
			if c.pause != nil {
				c.pause()
			}
			if held, err := c.paced(ctx, r); err != nil || !held {
				return err
			}
			r.Scanned++
			done := func() {}
			if c.inKey != nil {
				done = c.inKey(k)
			}
			err = c.clean(ctx, node, k, r)
			done()
			if err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// span returns the W + B and the B in ms the caller gives for k, and
// whether it gives any (else 0, 0). clean.lua judges each hash by the
// window it records, made longer by this one (never shorter).
func (c *Cleaner) span(p key.Parsed) (sp, b int64, known bool) {
	if c.o.fn != nil {
		if w, b, ok := c.o.fn(p); ok {
			if sp, b, err := spanMs(w, b); err == nil {
				return sp, b, true
			}
		}
	}
	if p.Limit != "" {
		if w, ok := c.o.limits[p.Limit]; ok {
			return w.span, w.bucket, true
		}
	}
	if c.o.all.span > 0 {
		return c.o.all.span, c.o.all.bucket, true
	}
	return 0, 0, false
}

// Replies of clean.lua.
const (
	stateGone    = 0
	stateLive    = 1
	stateDeleted = 2
	stateLayout  = 3
	moreSteps    = 1
	moreBatches  = 2
)

// clean handles one key.
func (c *Cleaner) clean(ctx context.Context, node Client, k string, r *Report) error {
	p, err := key.Parse(k)
	probe := false
	if strategy, ok := redisx.ParseProbe(k, c.o.prefix); ok {
		// The failure policy's probe hash: of the schema's layout, with
		// its record and TTL, though its key part is no user key's.
		p, err, probe = key.Parsed{Prefix: c.o.prefix, Strategy: strategy, Suffix: key.Hash}, nil, true
	}
	switch {
	case err != nil || p.Prefix != c.o.prefix:
		return c.unknown(ctx, node, k, Foreign, r)
	case p.Strategy != key.Absolute && p.Strategy != key.Suppressed:
		return c.unknown(ctx, node, k, UnknownStrategy, r)
	case p.Suffix != key.Hash:
		return c.unknown(ctx, node, k, UnknownLayout, r)
	}
	var sp, b int64
	if probe {
		sp, b = c.o.all.span, c.o.all.bucket // a WindowFunc is for user keys
	} else {
		sp, b, _ = c.span(p)
	}
	var now any = ""
	if c.o.clock != nil {
		now = settings.ClampMs(c.o.clock.Now().UnixMilli())
	}
	args := []any{now, p.Strategy, sp, unknownSpan.Milliseconds(), c.slack, c.o.threshold, step, b01(c.o.dryRun), b}
	res, err := c.run(ctx, node, k, args)
	if err != nil {
		return c.failed(k, err, r)
	}
	switch res[0] {
	case stateGone:
		r.skip(Gone, k)
		return nil
	case stateDeleted:
		r.Deleted++
		r.list(k, res)
		return nil
	case stateLayout:
		return c.unknown(ctx, node, k, UnknownLayout, r)
	}
	if res[4] == 1 {
		r.Live++
	} else {
		r.skip(NoWindow, k)
	}
	if res[1] > 0 {
		r.TTLSet++
	}
	trimmed := res[2]
	// Further steps of a large trim, each paced and under the lease.
	for more := res[3]; more != 0; {
		held, err := c.paced(ctx, r)
		if err != nil {
			return err
		}
		if !held {
			break
		}
		if more == moreBatches {
			n, err := c.batches(ctx, node, k, args)
			trimmed += n
			if err != nil {
				return c.failed(k, err, r)
			}
			break
		}
		if c.o.clock != nil {
			args[0] = settings.ClampMs(c.o.clock.Now().UnixMilli())
		}
		res, err = c.run(ctx, node, k, args)
		if err != nil {
			return c.failed(k, err, r)
		}
		if res[0] != stateLive {
			break
		}
		trimmed += res[2]
		more = res[3]
		if more == moreSteps && res[2] == 0 {
			break // no progress: never loop
		}
	}
	if trimmed > 0 {
		r.Trimmed++
		r.Buckets += trimmed
	}
	return nil
}

// batches trims a large hash whose links are broken: HSCAN hands its field
// names to clean.lua a page at a time.
func (c *Cleaner) batches(ctx context.Context, node Client, k string, args []any) (int64, error) {
	var trimmed int64
	var cursor uint64
	for {
		kv, next, err := node.HScan(ctx, k, cursor, "", step).Result()
		if err != nil {
			return trimmed, err
		}
		a := args
		for i := 0; i < len(kv); i += 2 {
			if f := kv[i]; f != "" && (f[0] >= '0' && f[0] <= '9' || f[0] == '-' || f[0] == 'd') {
				a = append(a, f)
			}
		}
		if len(a) > len(args) {
			if c.o.clock != nil {
				a[0] = settings.ClampMs(c.o.clock.Now().UnixMilli())
			}
			res, err := c.run(ctx, node, k, a)
			if err != nil {
				return trimmed, err
			}
			if res[0] != stateLive {
				return trimmed, nil
			}
			trimmed += res[2]
		}
		if next == 0 {
			return trimmed, nil
		}
		cursor = next
		if err := c.lim.Wait(ctx); err != nil {
			return trimmed, err
		}
		if held, err := c.lease.check(ctx); err != nil || !held {
			return trimmed, err
		}
	}
}

func (c *Cleaner) run(ctx context.Context, node Client, k string, args []any) ([]int64, error) {
	res, err := scripts.Clean.Run(ctx, node, []string{k}, args...).Int64Slice()
	if err == nil && len(res) != 8 {
		err = fmt.Errorf("clean.lua replied %v", res)
	}
	return res, err
}

// failed counts a key whose script Redis refused (a reply error), and
// passes any other error (the connection, ctx) up to stop the pass.
func (c *Cleaner) failed(k string, err error, r *Report) error {
	var rerr redis.Error
	if errors.As(err, &rerr) && ctxErr(err) == nil {
		r.skip(Failed, k)
		return nil
	}
	return fmt.Errorf("%s: %w", k, err)
}

func ctxErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// unknown reports a key the cleaner does not read, or deletes it when
// WithDeleteUnknown names it.
func (c *Cleaner) unknown(ctx context.Context, node Client, k string, why Reason, r *Report) error {
	if c.o.unknown == nil || !c.o.unknown(k) {
		r.skip(why, k)
		return nil
	}
	if !c.o.dryRun {
		if err := node.Unlink(ctx, k).Err(); err != nil {
			return c.failed(k, err, r)
		}
	}
	r.Unlinked++
	return nil
}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Start starts the background loop: it takes the lease (retrying every
// tenth of a lease while another cleaner holds it), makes a pass, waits
// WithPeriod, makes the next, and keeps the lease renewed in between, so
// one cleaner of a fleet does the work and another takes over when it
// stops. Each pass's report goes to WithReports, and so does the first
// error of a series of failed attempts to take the lease (Redis
// unreachable). Start on a running loop does nothing. Stop stops it.
func (c *Cleaner) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bg != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &loop{stop: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	c.bg = l
	go c.loop(ctx, l)
}

// Stop stops the background loop and waits for it to exit, the pass in
// flight included; then the lease is released. If ctx ends first, Stop
// cancels the pass (it stops at its next Redis call), still waits for the
// loop's goroutine to exit, and returns ctx's error. Stop without a
// running loop returns nil.
func (c *Cleaner) Stop(ctx context.Context) error {
	c.mu.Lock()
	l := c.bg
	c.mu.Unlock()
	if l == nil {
		return nil
	}
	l.stopOnce.Do(func() { close(l.stop) })
	var err error
	select {
	case <-l.done:
	case <-ctx.Done():
		err = ctx.Err()
		l.cancel()
		<-l.done
	}
	c.mu.Lock()
	if c.bg == l {
		c.bg = nil
	}
	c.mu.Unlock()
	return err
}

func (c *Cleaner) loop(ctx context.Context, l *loop) {
	defer close(l.done)
	defer l.cancel()
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c.lease.release(rctx)
	}()
	retry := c.o.lease / 10
	next := time.Now() // the first pass at once
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	failing := false // the last attempt to take the lease failed (reported once)
	for {
		held, err := c.lease.acquire(ctx)
		if err != nil && !failing && ctx.Err() == nil {
			c.report(ctx, Report{Prefix: c.o.prefix, DryRun: c.o.dryRun}, err)
		}
		failing = err != nil
		wait := retry
		if err == nil && !held {
			// Wake when the holder's lease would expire, so that a holder
			// that froze right after renewing is taken over one lease
			// after it froze, not a lease and a poll later.
			if left, err := c.lease.remaining(ctx); err == nil && left > 0 {
				wait = min(retry, left+time.Millisecond)
			}
		}
		if err == nil && held {
			if !time.Now().Before(next) {
				c.passMu.Lock()
				r, err := c.pass(ctx)
				c.passMu.Unlock()
				if !errors.Is(err, ErrLocked) {
					c.report(ctx, r, err)
				}
				next = time.Now().Add(c.o.period)
				if r.LeaseLost || err != nil {
					wait = retry
				} else {
					wait = min(c.o.lease/3, time.Until(next))
				}
			} else {
				wait = min(c.o.lease/3, time.Until(next))
			}
		}
		timer.Reset(max(wait, time.Millisecond))
		select {
		case <-l.stop:
			return
		case <-ctx.Done():
			return
		case <-timer.C:
		}
	}
}

// report hands a pass of the background loop (or its failure to take the
// lease) to WithReports and WithObserver.
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
	c.o.observer.ObserveEvent(ctx, limiter.Event{Kind: config.EventCleanup, Provider: config.ProviderCleanup,
		Cleanup: r.CleanupReport})
}

// failed records why the pass stopped, err (nil: it did not), and its
// class.
func (r *Report) failed(ctx context.Context, err error) {
	r.Err, r.ErrorClass = err, ""
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		r.ErrorClass = failover.ErrorClass(ctx, err)
	}
}

// paced takes one unit of the budget (WithRate) and checks that the pass
// still holds the lease; when it does not, it sets r.LeaseLost and
// returns false.
func (c *Cleaner) paced(ctx context.Context, r *Report) (bool, error) {
	if err := c.lim.Wait(ctx); err != nil {
		return false, err
	}
	held, err := c.lease.check(ctx)
	if err != nil {
		return false, err
	}
	if !held {
		r.LeaseLost = true
	}
	return held, nil
}

// pingTimeout bounds Ping when ctx has no deadline of its own.
const pingTimeout = time.Second

// Ping checks that Redis answers the cleaner: one SCAN of its prefix's
// pattern (a single step, COUNT 1) and a SCRIPT LOAD of its script,
// bounded by ctx, or by one second when ctx has no deadline. A failure is
// an error naming the address. Call it at start-up, before Start.
func (c *Cleaner) Ping(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, pingTimeout)
		defer cancel()
	}
	err := c.client.Scan(ctx, 0, key.Pattern(c.o.prefix), 1).Err()
	if err == nil {
		err = scripts.Clean.Load(ctx, c.client).Err()
	}
	if err != nil {
		return failover.PingError("cleanup", c.client, err)
	}
	return nil
}
