// The breaker: closed, open, and the probe that closes it.
//
// trip opens the breaker and starts run, one goroutine per outage, which
// probes Redis every probe interval, writes back what the fallback
// admitted (writeback.go) and closes the breaker. No user request probes
// (as a breaker library's half-open state would have it, each paying a
// timeout while Redis is dead): while the breaker is open, calls answer
// by the policy after one atomic load.

package redisprov

import (
	"fmt"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// Open reports whether the breaker is open: calls answer by the policy
// without touching Redis.
func (g *Guard) Open() bool { return g.open.Load() }

// trip opens the breaker and starts the probe if none is running.
func (g *Guard) trip(err error) {
	if !g.open.CompareAndSwap(false, true) {
		return
	}
	if g.node != "" {
		err = fmt.Errorf("master %s: %w", g.node, err)
		g.parent.loadSlots()
	}
	// The cause first: a call that leaves when the channel closes reads it.
	g.cause.Store(&err)
	close(*g.openCh.Load())
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.since = time.Now()
	if g.running {
		return // the probe goroutine, reconciling, sees the breaker open again
	}
	g.running = true
	g.wg.Add(1)
	go g.run()
}

// run is the probe goroutine: it reports the outage, probes until Redis
// answers, writes back, closes the breaker and reports the recovery.
func (g *Guard) run() {
	defer g.wg.Done()
	t := time.NewTimer(g.cfg.ProbeInterval)
	defer t.Stop()
	for {
		g.notify(limiter.StateChange{Degraded: true, Cause: g.causeErr()})
		if !g.probeUntilUp(t) {
			g.closedDegraded()
			return
		}
		g.mu.Lock()
		since := g.since
		g.mu.Unlock()
		// The fallback's units reach Redis before Redis decides again: a
		// pass while the breaker is open, then one once it is closed.
		r := newTally()
		for i := 0; g.reconcile(false, &r) && i < 2; i++ {
			// Redis failed again: probe on, twice at most, so that a slow
			// Redis cannot keep the limiter degraded.
			t.Reset(g.cfg.ProbeInterval)
			if !g.probeUntilUp(t) {
				break
			}
		}
		if g.stopCtx.Err() != nil {
			g.closedDegraded()
			return
		}
		// The grace starts first: it covers the second pass too.
		g.startGrace()
		g.rearm()
		g.open.Store(false)
		// A failed write is tried twice more, a probe interval apart, while
		// the breaker stays closed (a stale pooled connection is no outage).
		for i := 0; g.reconcile(true, &r) && !g.open.Load(); i++ {
			if i == 2 || !g.sleep(g.cfg.ProbeInterval) {
				g.dropPending(&r)
				break
			}
		}
		done, lost, units := r.counts()
		g.notify(limiter.StateChange{Duration: time.Since(since), Reconciled: done, Unreconciled: lost,
			UnreconciledUnits: units})
		g.mu.Lock()
		if !g.open.Load() || g.closed {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock() // opened again while reconciling: probe again
		t.Reset(g.cfg.ProbeInterval)
	}
}

// background runs f on a goroutine that Close waits for; false, with f
// not run, once g is closed.
func (g *Guard) background(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}

// sleep waits d; false when Close came first.
func (g *Guard) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-g.stopCtx.Done():
		return false
	case <-t.C:
		return true
	}
}

// closedDegraded ends the probe goroutine of a limiter closed while
// degraded, reporting it no longer degraded.
func (g *Guard) closedDegraded() {
	g.mu.Lock()
	since := g.since
	g.running = false
	g.mu.Unlock()
	g.notify(limiter.StateChange{Cause: limiter.ErrClosed, Duration: time.Since(since)})
}

// probeUntilUp probes every interval, one probe at a time; false when
// stopped by Close.
func (g *Guard) probeUntilUp(t *time.Timer) bool {
	for {
		select {
		case <-g.stopCtx.Done():
			return false
		case <-t.C:
		}
		err := g.probeNow(0)
		if g.stopCtx.Err() != nil {
			return false
		}
		if err == nil || !Unavailable(err) {
			return true // Redis answered, if only with an error of another kind
		}
		g.cause.Store(&err)
		t.Reset(g.cfg.ProbeInterval)
	}
}

// Opened returns a channel closed when the breaker opens: a caller waiting
// for a local resource selects on it, to go to the policy at once.
func (g *Guard) Opened() <-chan struct{} { return *g.openCh.Load() }

// rearm gives the breaker a fresh Opened channel, before it closes.
func (g *Guard) rearm() {
	ch := make(chan struct{})
	g.openCh.Store(&ch)
}
