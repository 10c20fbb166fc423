package redisprov

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/limiter"
)

// What opens the breaker (docs/operations.md, When Redis fails).
//
// Only the wire is evidence: a connection error or a "cannot serve now"
// reply (Unavailable, not a timeout) opens it at once. A timeout proves
// nothing alone (the time may have gone to local waits or a starved CPU):
// the call is shed and asks for a confirming probe (confirm), which opens
// the breaker only when it fails too and no call got a reply meanwhile.
// A probe during a process stall of over a quarter of the timeout, a
// probe not sent because the previous one is unanswered, and a call that
// never started before its deadline are inconclusive. At most one
// confirming probe runs at a time, and none within a probe interval of
// one that found Redis answering.

// verdict is what a failed Redis call of a decision leads to.
type verdict int

const (
	vReturn verdict = iota // return the error to the caller
	vPolicy                // the breaker is open: the policy answers
	vShed                  // refuse the call as shed
)

// errAbandoned is the error of a call not sent because too many calls
// whose callers left are still waiting for Redis; errUnanswered that of a
// probe not sent because the previous one is still unanswered. Both are
// timeouts: Redis has not answered calls sent long enough ago.
var (
	errAbandoned  = fmt.Errorf("redis: too many calls past their deadline still unanswered: %w", context.DeadlineExceeded)
	errUnanswered = fmt.Errorf("redis: the previous probe is still unanswered: %w", context.DeadlineExceeded)
)

// openedErr is the error of a call that left when the breaker opened while
// it waited on Redis; it wraps the breaker's cause, and the policy answers.
type openedErr struct{ cause error }

func (e *openedErr) Error() string {
	return "the circuit breaker opened during the call: " + e.cause.Error()
}
func (e *openedErr) Unwrap() error { return e.cause }

// TimedOut reports whether err is a timeout: a deadline passed (the
// call's budget, the caller's), a socket timeout, the pool's wait.
func TimedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrPoolTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// wireEvidence reports whether err proves on its own that Redis cannot
// serve now: an unavailable error that is not a timeout.
func wireEvidence(err error) bool { return Unavailable(err) && !TimedOut(err) }

// waited reports whether err says the call waited locally and was not
// sent: the breaker opened meanwhile, or the call it waited behind failed.
func waited(err error) bool {
	return errors.Is(err, ErrOpened) || errors.Is(err, ErrBehindFailure)
}

// judge reads the error of a decision's Redis call made with the caller's
// ctx: the verdict, and the error to return (with vShed, the call's own).
func (g *Guard) judge(ctx context.Context, op string, err error) (verdict, error) {
	if cerr := ctx.Err(); cerr != nil {
		return vReturn, fmt.Errorf("%s: %s: %w", g.pkg, op, cerr)
	}
	g.logFailure(op, err)
	var oe *openedErr
	switch {
	case errors.As(err, &oe), errors.Is(err, ErrOpened):
		return g.policyVerdict(op, nil)
	case errors.Is(err, ErrBehindFailure) || TimedOut(err):
		if g.Open() {
			return g.policyVerdict(op, nil)
		}
		if !waited(err) {
			g.confirm(err)
		}
		return vShed, err
	case wireEvidence(err):
		g.trip(err)
		return g.policyVerdict(op, err)
	}
	return vReturn, err
}

// policyVerdict is the verdict of a call the policy answers: under
// FailError the error (err, the call's own, or else ErrUnavailable).
func (g *Guard) policyVerdict(op string, err error) (verdict, error) {
	if g.cfg.Policy != limiter.FailError {
		return vPolicy, nil
	}
	if err == nil {
		err = g.Err(op)
	}
	return vReturn, err
}

// failedOther handles the error of a Get or Reset (which have no decision
// to shed): wire evidence opens the breaker, a timeout asks for a
// confirming probe.
func (g *Guard) failedOther(err error) {
	switch {
	case waited(err):
	case TimedOut(err):
		g.confirm(err)
	case wireEvidence(err):
		g.trip(err)
	}
}

// confirm starts the confirming probe of a call that timed out, unless one
// is running, one succeeded within the probe interval, or the breaker is
// open (its own probe runs then).
func (g *Guard) confirm(cause error) {
	if g.Open() || !g.confirming.CompareAndSwap(false, true) {
		return
	}
	if ok := g.lastOK.Load(); ok != 0 && time.Since(time.Unix(0, ok)) < g.cfg.ProbeInterval {
		g.confirming.Store(false)
		return
	}
	started := g.background(func() {
		defer g.confirming.Store(false)
		g.replied.Store(false)
		err, stalled := g.probeWatched()
		switch {
		case g.stopCtx.Err() != nil:
		case wireEvidence(err): // holds however late this process ran
			g.confirmed.Add(1)
			g.trip(fmt.Errorf("%w (a probe confirmed it: %v)", cause, err))
		case stalled > g.probeDeadline()/4, errors.Is(err, errUnanswered):
			// Inconclusive: the next call that times out asks again.
		case err == nil || !Unavailable(err) || g.replied.Load():
			g.lastOK.Store(time.Now().UnixNano())
		default:
			g.confirmed.Add(1)
			g.trip(fmt.Errorf("%w (a probe confirmed it: %v)", cause, err))
		}
	})
	if !started {
		g.confirming.Store(false)
	}
}

// stallTick is how often probeWatched looks at the clock.
const stallTick = 5 * time.Millisecond

// probeWatched runs a confirming probe (probeNow, half a probe interval
// extra) and returns its error and the longest stall of this process seen
// meanwhile by a ticker of stallTick.
func (g *Guard) probeWatched() (err error, stalled time.Duration) {
	done := make(chan error, 1)
	go func() { done <- g.probeNow(g.cfg.ProbeInterval / 2) }()
	tk := time.NewTicker(stallTick)
	defer tk.Stop()
	last := time.Now()
	for {
		select {
		case err = <-done:
			return err, max(stalled, time.Since(last)-stallTick, g.stallFloor)
		case <-tk.C:
			now := time.Now()
			stalled = max(stalled, now.Sub(last)-stallTick)
			last = now
		}
	}
}

// probeNow runs one probe (probeBy) with a deadline of its own: the
// timeout, or probeTimeout under WithTimeout(0), plus extra.
func (g *Guard) probeNow(extra time.Duration) error {
	to := g.probeDeadline()
	ctx, cancel := context.WithTimeout(g.stopCtx, to+extra)
	defer cancel()
	return g.probeBy(ctx)
}

// probeBy runs one probe that returns by ctx's deadline whatever the
// client: on a client that ignores context deadlines (not the probe's own)
// it runs on a goroutine, and no next probe is sent while it is unanswered.
func (g *Guard) probeBy(ctx context.Context) error {
	if !g.bounded || g.own != nil {
		return g.probeOnce(ctx)
	}
	if !g.probeBusy.CompareAndSwap(false, true) {
		return errUnanswered
	}
	ch := make(chan error, 1)
	go func() {
		ch <- g.probeOnce(ctx)
		g.probeBusy.Store(false)
	}()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// probeOnce sends one probe, on the probe's own client when it has one
// (which a failure on the wire replaces: dial.go), else on the client.
func (g *Guard) probeOnce(ctx context.Context) error {
	if g.own == nil {
		err := g.probe(ctx, g.client)
		if err != nil && Unavailable(err) {
			g.followTopology()
		}
		return err
	}
	c := g.own.client()
	err := g.probe(ctx, c)
	if err != nil {
		g.own.failed(c, err)
	}
	return err
}

// answered notes that a call got its reply from Redis: one atomic load
// on the healthy path, a store only while a confirming probe watches.
func (g *Guard) answered() {
	if !g.replied.Load() {
		g.replied.Store(true)
	}
}

// probeDeadline is a probe's deadline before any extra: the timeout, or
// probeTimeout under WithTimeout(0).
func (g *Guard) probeDeadline() time.Duration {
	if g.cfg.Timeout <= 0 {
		return probeTimeout
	}
	return g.cfg.Timeout
}

// Shed is the answer to a call c whose budget ran out while Redis was not
// known to be down: a refusal marked Shed with RetryAfter the probe
// interval (or Never), or under FailError ErrShed wrapping cause.
func (g *Guard) Shed(c *Call, cause error) (limiter.Decision, error) {
	g.noteShed()
	if g.cfg.Policy == limiter.FailError {
		return limiter.Decision{}, fmt.Errorf("%s: %s: %w: %w", g.pkg, c.Op, limiter.ErrShed, cause)
	}
	d := limiter.Decision{Suppressed: g.sup, Limit: c.C, Never: !c.Peek && c.N > c.Hard, Shed: true}
	if !d.Never {
		d.RetryAfter = g.cfg.ProbeInterval
	}
	if g.sup {
		d.SuppressionFactor = 1
	}
	return d, nil
}

// shedLogEvery is how often at most the default log hears about shed calls.
const shedLogEvery = 10 * time.Second

// noteShed counts a shed call and, at most once per shedLogEvery, logs
// how many were shed since the last record.
func (g *Guard) noteShed() {
	n := g.shed.Add(1)
	l := g.logger()
	if l == nil {
		return
	}
	now := time.Now().UnixNano()
	last := g.shedLogAt.Load()
	if last != 0 && now-last < int64(shedLogEvery) || !g.shedLogAt.CompareAndSwap(last, now) {
		return
	}
	prev := g.shedLogged.Swap(n)
	l.Warn("sluice: calls shed: their budget ran out while Redis was not known to be down (a busy client, not an outage)",
		"provider", g.pkg, "shed", n-prev, "total", n)
}

// ShedCount is the number of calls shed so far, for tests.
func (g *Guard) ShedCount() int64 { return g.shed.Load() }

// Confirmed is the number of times a confirming probe opened the breaker,
// for tests.
func (g *Guard) Confirmed() int64 { return g.confirmed.Load() }

// Opened returns a channel closed when the breaker opens: a caller waiting
// for a local resource selects on it, to go to the policy at once.
func (g *Guard) Opened() <-chan struct{} { return *g.openCh.Load() }

// rearm gives the breaker a fresh Opened channel, before it closes.
func (g *Guard) rearm() {
	ch := make(chan struct{})
	g.openCh.Store(&ch)
}

// maxAbandonedFor is the most calls whose callers left that may wait for
// Redis in the background: the client's pool size, so a long freeze cannot
// pile up goroutines.
func maxAbandonedFor(c Client) int64 {
	size := 0
	switch c := c.(type) {
	case *redis.Client:
		size = c.Options().PoolSize
	case *redis.ClusterClient:
		size = c.Options().PoolSize
	case *redis.Ring:
		size = c.Options().PoolSize
	}
	if size <= 0 {
		size = 10 * runtime.GOMAXPROCS(0) // go-redis's default
	}
	return int64(max(size, 1))
}

// bounded runs f on a worker (workers.go) and returns when f does, ctx is
// done or the breaker opens, whichever comes first; a left f completes in
// the background. It bounds calls on clients that ignore context
// deadlines. While maxAbandoned left calls still run, f waits to start
// (errAbandoned if ctx ends first, never sent).
func bounded[T any](g *Guard, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	var zero T
	for g.abandoned.Load() >= g.maxAbandoned {
		select {
		case <-g.released:
		case <-ctx.Done():
			return zero, errAbandoned
		}
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	opened := g.Opened()   // taken before the call
	var state atomic.Int32 // 0 running, 1 answered, 2 left by its caller
	var started atomic.Bool
	g.calls.Add(1)
	g.spawn(func() {
		defer g.calls.Done()
		started.Store(true)
		v, err := f(ctx)
		if err == nil {
			g.answered() // not for ErrRemembered: memory is not the wire
		}
		ch <- result{v, err}
		if !state.CompareAndSwap(0, 1) {
			g.abandoned.Add(-1)
			select {
			case g.released <- struct{}{}:
			default:
			}
		}
	})
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		if state.CompareAndSwap(0, 2) {
			g.abandoned.Add(1)
			if !started.Load() { // never got a CPU: no evidence
				return zero, ErrBehindFailure
			}
			return zero, ctx.Err()
		}
		r := <-ch
		return r.v, r.err
	case <-opened: // the breaker's cause is this call's error too
		if state.CompareAndSwap(0, 2) {
			g.abandoned.Add(1)
			return zero, &openedErr{g.causeErr()}
		}
		r := <-ch
		return r.v, r.err
	}
}

// WaitCalls waits until every call run by bounded has ended, or returns
// ctx's error.
func (g *Guard) WaitCalls(ctx context.Context) error {
	done := make(chan struct{})
	go func() { g.calls.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Abandoned is the number of calls whose callers left that still wait for
// Redis, for tests.
func (g *Guard) Abandoned() int64 { return g.abandoned.Load() }
