package redisprov

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/limiter"
)

// verdict is what a failed Redis call of a decision leads to.
type verdict int

const (
	vReturn verdict = iota // return the error to the caller
	vPolicy                // the breaker is open: the policy answers
	vShed                  // refuse the call as shed
)

// Timeouts of calls not sent: too many calls whose callers left still wait
// for Redis, or the previous probe is still unanswered.
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
// Only the wire is evidence: wire evidence opens the breaker at once; a
// timeout proves nothing alone (the time may have gone to local waits or
// a starved CPU), so the call is shed and a confirming probe decides.
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

// confirm starts the confirming probe of a call that timed out, unless one
// is running, one succeeded within the probe interval, or the breaker is
// open. The probe opens the breaker when it fails on the wire, or times
// out while no call got a reply; a probe during a process stall of over a
// quarter of its deadline, or not sent (errUnanswered), is inconclusive.
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
			return
		case wireEvidence(err): // holds however late this process ran
		case stalled > g.probeDeadline()/4, errors.Is(err, errUnanswered):
			return
		case err == nil || !Unavailable(err) || g.replied.Load():
			g.lastOK.Store(time.Now().UnixNano())
			return
		}
		g.confirmed.Add(1)
		g.trip(fmt.Errorf("%w (a probe confirmed it: %v)", cause, err))
	})
	if !started {
		g.confirming.Store(false)
	}
}

// stallTick is how often probeWatched looks at the clock.
const stallTick = 5 * time.Millisecond

// probeWatched runs a confirming probe (half a probe interval beyond the
// usual deadline) and returns its error and the longest stall of this
// process a ticker saw meanwhile.
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

// probeDeadline is a probe's deadline: the timeout, or probeTimeout under
// WithTimeout(0).
func (g *Guard) probeDeadline() time.Duration {
	if g.cfg.Timeout <= 0 {
		return probeTimeout
	}
	return g.cfg.Timeout
}

// probeNow runs one probe with its own deadline, probeDeadline plus extra.
func (g *Guard) probeNow(extra time.Duration) error {
	ctx, cancel := context.WithTimeout(g.stopCtx, g.probeDeadline()+extra)
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
// (which a failure on the wire replaces), else on the client.
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

// bounded runs f on a worker and returns when f does, ctx is done or the
// breaker opens, whichever comes first; a left f completes in the
// background. While maxAbandoned left calls still run, f waits to start
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

// workerIdle is how long a worker waits for a call before it ends.
const workerIdle = 5 * time.Second

// spawn runs f on an idle worker of g (never a queue), or on a new one: a
// worker keeps the large stack a Redis call grows.
func (g *Guard) spawn(f func()) {
	select {
	case g.work <- f:
		return
	default:
	}
	g.mu.Lock()
	if g.closed { // Close waits for workers: no new one; g.calls counts f
		g.mu.Unlock()
		go f()
		return
	}
	g.workers.Add(1)
	g.mu.Unlock()
	go g.worker(f)
}

// worker runs f, then the calls spawn hands it, until it has waited
// workerIdle for one or g closes.
func (g *Guard) worker(f func()) {
	defer g.workers.Done()
	f()
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		select {
		case f = <-g.work:
			f()
			if !t.Stop() { // drain: right before and after Go 1.23
				select {
				case <-t.C:
				default:
				}
			}
			t.Reset(workerIdle)
		case <-t.C:
			return
		case <-g.stopCtx.Done():
			return
		}
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
