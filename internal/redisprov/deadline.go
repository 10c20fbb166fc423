// Bounded calls: the per-call deadline, and calls the caller can leave on
// a client that ignores context deadlines on its sockets.

package redisprov

import (
	"context"
	"sync/atomic"
	"time"
)

// SlackDiv sets how much a shared deadline may shorten a call: a call whose
// context can never be cancelled gets a deadline between timeout −
// timeout/SlackDiv and timeout from its start (see Context).
const SlackDiv = 16

// shared is a deadline context that the calls starting before fresh share.
// Nothing cancels it: the calls still using it keep their bound.
type shared struct {
	ctx    context.Context
	cancel context.CancelFunc // kept for vet; calling it would cut short the calls in flight
	fresh  time.Time
}

// withValues is a shared deadline context with the caller's values
// (go-redis hooks, tracing).
type withValues struct {
	context.Context // the shared deadline: Deadline, Done, Err
	values          context.Context
}

func (c *withValues) Value(k any) any { return c.values.Value(k) }

func nop() {}

// Context bounds one Redis call by the timeout on top of ctx; call the
// cancel function when the call returns. A deadline already within the
// timeout is kept; a cancellable ctx gets context.WithTimeout; a ctx that
// is never cancelled shares, with no timer or allocation per call, one
// deadline context with the calls starting within timeout/SlackDiv of it.
func (g *Guard) Context(ctx context.Context) (context.Context, context.CancelFunc) {
	t := g.cfg.Timeout
	if t <= 0 {
		return ctx, nop
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= t {
		return ctx, nop
	}
	if ctx.Done() != nil {
		return context.WithTimeout(ctx, t)
	}
	sh := g.sharedDeadline(t)
	if ctx == context.Background() {
		return sh, nop
	}
	return &withValues{Context: sh, values: ctx}, nop
}

// sharedDeadline returns the deadline context of the calls starting now:
// the current one while it is fresh, else a new one ending t from now
// (two calls that find it stale at once both make one: both are bounds).
func (g *Guard) sharedDeadline(t time.Duration) context.Context {
	now := time.Now()
	if s := g.deadline.Load(); s != nil && now.Before(s.fresh) {
		return s.ctx
	}
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(t))
	g.deadline.Store(&shared{ctx: ctx, cancel: cancel, fresh: now.Add(t / SlackDiv)})
	return ctx
}

// openedErr is the error of a call that left when the breaker opened while
// it waited on Redis; it wraps the breaker's cause, and the policy answers.
type openedErr struct{ cause error }

func (e *openedErr) Error() string {
	return "the circuit breaker opened during the call: " + e.cause.Error()
}
func (e *openedErr) Unwrap() error { return e.cause }

// bounded runs f on a worker and returns when f does, ctx is done or the
// breaker opens; a left f completes in the background. While maxAbandoned
// left calls still run, f waits to start (errAbandoned if ctx ends first).
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
