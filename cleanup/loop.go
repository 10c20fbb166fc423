package cleanup

import (
	"context"
	"errors"
	"sync"
	"time"
)

// loop is one run of the background loop.
type loop struct {
	stop     chan struct{}
	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// Start starts the background loop: it takes the lease (retrying every
// tenth of a lease while another cleaner holds it), makes a pass, waits
// WithPeriod, makes the next, and keeps the lease renewed in between, so
// one cleaner of a fleet does the work and another takes over when it
// stops. Reports go to WithReports. Start on a running loop does nothing.
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

// Stop stops the background loop, waits for the pass in flight and
// releases the lease. If ctx ends first, Stop cancels the pass, still
// waits for the loop to exit, and returns ctx's error. Without a running
// loop it returns nil.
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
	defer c.lease.release(ctx)
	retry := c.o.lease / 10
	next := time.Now() // the first pass at once
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	failing := false // the last attempt to take the lease failed
	for {
		held, err := c.lease.acquire(ctx)
		if err != nil && !failing && ctx.Err() == nil {
			c.report(ctx, Report{Prefix: c.o.prefix, DryRun: c.o.dryRun}, err)
		}
		failing = err != nil
		wait := retry
		switch {
		case err != nil:
		case !held:
			// Wake when the holder's lease would expire.
			if left, err := c.lease.remaining(ctx); err == nil && left > 0 {
				wait = min(retry, left+time.Millisecond)
			}
		default:
			ok := true
			if !time.Now().Before(next) {
				c.passMu.Lock()
				r, err := c.pass(ctx)
				c.passMu.Unlock()
				if !errors.Is(err, ErrLocked) {
					c.report(ctx, r, err)
				}
				next = time.Now().Add(c.o.period)
				ok = err == nil && !r.LeaseLost
			}
			if ok { // else retry soon
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
