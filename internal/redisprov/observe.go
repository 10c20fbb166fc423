package redisprov

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/sluice-go/sluice/internal/window"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// ErrorClass sorts the error of a Redis call made with the caller's ctx
// into the classes of window.ErrorTimeout and friends; "" for errors that
// are not the backend's (bad input, ErrClosed), which no event reports.
func ErrorClass(ctx context.Context, err error) string {
	switch {
	case notBackend(err):
		return ""
	case ctx.Err() != nil, errors.Is(err, context.Canceled):
		return window.ErrorCanceled
	case !Unavailable(err):
		return window.ErrorReply
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrPoolTimeout):
		return window.ErrorTimeout
	}
	var re redis.Error
	if errors.As(err, &re) {
		return window.ErrorUnavailable
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return window.ErrorTimeout
	}
	return window.ErrorConnection
}

// opName is the observer's name of an operation ("is allowed" →
// window.OpIsAllowed).
func opName(op string) string {
	switch op {
	case "inc":
		return window.OpInc
	case "is allowed":
		return window.OpIsAllowed
	case "inc set":
		return window.OpIncSet
	case "get":
		return window.OpGet
	case "reset":
		return window.OpReset
	case "get set":
		return window.OpGetSet
	case "reset set":
		return window.OpResetSet
	}
	return op
}

// observer returns the observer of WithObserver, nil for none.
func (g *Guard) observer() limiter.Observer {
	return g.cfg.Observer
}

func (g *Guard) strategyName() string {
	if g.strategy == key.Suppressed {
		return window.StrategySuppressed
	}
	return window.StrategyAbsolute
}

// timing records the Redis call of one decision.
type timing struct {
	asked bool
	start time.Time
	took  time.Duration
	err   error
}

// begin starts a timed call; nothing for a nil timing.
func (t *timing) begin() {
	if t != nil {
		t.asked, t.start = true, time.Now()
	}
}

// end records the end of a timed call; nothing for a nil timing. A
// decision answered from memory (ErrRemembered) did not ask Redis.
func (t *timing) end(err error) {
	switch {
	case t == nil:
	case err == ErrRemembered:
		*t = timing{}
	default:
		t.took, t.err = time.Since(t.start), err
	}
}

// decideObserved is decide with an observer: the Redis call is timed, a
// failure is reported as a "backend_error" Event, and a decision as a
// DecisionEvent.
func (g *Guard) decideObserved(ctx context.Context, a *ask, d *limiter.SetDecision) error {
	var t timing
	err := g.decide(ctx, a, d, &t)
	g.report(ctx, a.op, a.k, a.n, &t, d.Decision, d.Limits, err)
	return err
}

// report sends the events of one decision call.
func (g *Guard) report(ctx context.Context, op, k string, n int64, t *timing, d limiter.Decision, limits []limiter.LimitDecision, err error) {
	obs := g.observer()
	class := ""
	if t.asked {
		if class = ErrorClass(ctx, t.err); class != "" {
			obs.ObserveEvent(ctx, limiter.Event{Kind: window.EventBackendError, Provider: g.pkg, Op: opName(op),
				ErrorClass: class, Err: t.err, Duration: t.took})
		}
	}
	if err != nil {
		return
	}
	e := limiter.DecisionEvent{Provider: g.pkg, Strategy: g.strategyName(), Op: opName(op), Key: k, Cost: n,
		Decision: d, Limits: limits, Backend: t.asked, ErrorClass: class,
		Source: window.DecisionSource(g.pkg, &d, t.asked), Policy: window.DecisionPolicy(limits)}
	if t.asked {
		e.Start, e.Duration = t.start, t.took
	}
	obs.ObserveDecision(ctx, e)
}

// observeErr reports the failed Redis call of a Get, Reset, GetSet or
// ResetSet.
func (g *Guard) observeErr(ctx context.Context, op string, err error) {
	obs := g.observer()
	if obs == nil {
		return
	}
	if class := ErrorClass(ctx, err); class != "" {
		obs.ObserveEvent(ctx, limiter.Event{Kind: window.EventBackendError, Provider: g.pkg, Op: opName(op),
			ErrorClass: class, Err: err})
	}
}

// Observe reports a decision made without asking Redis (a hybrid lease, a
// remembered refusal) to the observer, if there is one, as a decision
// with Backend false.
func (g *Guard) Observe(ctx context.Context, op, k string, n int64, d limiter.Decision) {
	if g.cfg.Observer != nil {
		g.observeLocal(ctx, op, k, n, d)
	}
}

func (g *Guard) observeLocal(ctx context.Context, op, k string, n int64, d limiter.Decision) {
	g.cfg.Observer.ObserveDecision(ctx, limiter.DecisionEvent{Provider: g.pkg, Strategy: g.strategyName(), Op: opName(op),
		Key: k, Cost: n, Decision: d, Source: window.DecisionSource(g.pkg, &d, false)})
}
