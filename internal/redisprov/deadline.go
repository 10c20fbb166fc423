// The per-call deadline and the errors of calls Redis did not take.

package redisprov

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// SlackDiv sets how much a shared deadline may shorten a call: a call whose
// context can never be cancelled gets a deadline between timeout −
// timeout/SlackDiv and timeout from its start (see Context).
const SlackDiv = 16

// shared is a deadline context that the calls starting before fresh share.
// Nothing cancels it: it ends at its deadline, so that the calls still
// using it keep their bound.
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
// the current one while it is fresh, else a new one ending t from now.
// Two calls that find it stale at once both make one; the last stored
// wins, and both contexts are valid bounds.
func (g *Guard) sharedDeadline(t time.Duration) context.Context {
	now := time.Now()
	if s := g.deadline.Load(); s != nil && now.Before(s.fresh) {
		return s.ctx
	}
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(t))
	g.deadline.Store(&shared{ctx: ctx, cancel: cancel, fresh: now.Add(t / SlackDiv)})
	return ctx
}

func (g *Guard) causeErr() error {
	if p := g.cause.Load(); p != nil {
		return *p
	}
	return errors.New("unknown cause")
}

// Err is the error of a call made while the breaker is open that has no
// Decision to mark (Get, Reset, and every call under FailError).
func (g *Guard) Err(op string) error { return g.unavailable(op, g.causeErr()) }

// otherErr is the error of a Get's or Reset's failed Redis call made with
// the caller's ctx, returned under every policy. As for a decision, wire
// evidence opens the breaker and a timeout asks for a confirming probe.
func (g *Guard) otherErr(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %s: %w", g.pkg, op, cerr)
	}
	g.observeErr(ctx, op, err)
	g.logFailure(op, err)
	switch {
	case waited(err):
	case TimedOut(err):
		g.confirm(err)
	case wireEvidence(err):
		g.trip(err)
	}
	var oe *openedErr
	if errors.As(err, &oe) {
		return g.Err(op)
	}
	if Unavailable(err) {
		return g.unavailable(op, err)
	}
	return err
}

// unavailable is ErrUnavailable for op, wrapping err, the reason.
func (g *Guard) unavailable(op string, err error) error {
	return &unavailableErr{prefix: g.pkg + ": " + op + ": ", err: err}
}

// unavailableErr reads "<pkg>: <op>: sluice: redis unavailable: <the
// wire's error>" (its own prefix not repeated), wrapping both errors.
type unavailableErr struct {
	prefix string
	err    error
}

func (e *unavailableErr) Error() string {
	return e.prefix + limiter.ErrUnavailable.Error() + ": " + strings.TrimPrefix(e.err.Error(), e.prefix)
}

func (e *unavailableErr) Unwrap() []error { return []error{limiter.ErrUnavailable, e.err} }
