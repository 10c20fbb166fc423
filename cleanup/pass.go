package cleanup

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/internal/redisprov"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/key"
)

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
			return fmt.Errorf("cleanup: %s: %w", redisprov.Addr(node), err)
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

// failed records why the pass stopped (nil: it did not) and its class.
func (r *Report) failed(ctx context.Context, err error) {
	r.Err, r.ErrorClass = err, ""
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		r.ErrorClass = redisprov.ErrorClass(ctx, err)
	}
}

// paced takes one unit of the budget and reports whether the pass still
// holds the lease (else r.LeaseLost is set).
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
