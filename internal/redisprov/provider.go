package redisprov

import (
	"context"
	"errors"

	"github.com/sluice-go/sluice/limiter"
)

// Backend is what a Redis provider gives its Guard: the validation a
// policy answer needs, and the provider's Redis calls. Each provider
// implements it on a pointer-shaped adapter of its Limiter, so passing one
// allocates nothing.
type Backend interface {
	// Validate checks an Inc (or, with peek, an IsAllowed) as the provider
	// does before asking Redis, and describes it for the policy.
	Validate(op, k string, rate limiter.Rate, n int64, peek bool) (*Call, error)
	// Decide is the Redis call of an Inc, or with peek of an IsAllowed.
	Decide(ctx context.Context, k string, rate limiter.Rate, n int64, peek bool) (limiter.Decision, error)
	// Usage is the Redis call of a Get.
	Usage(ctx context.Context, k string) (limiter.Usage, error)
}

// ErrRemembered is what a Backend's Decide returns, with its decision,
// for a decision it answered from memory (a refusal hot-key relief
// remembers) without asking Redis: the guard returns the decision with a
// nil error, reports it as not asked of Redis (DecisionEvent.Backend
// false), and does not count it as a reply of Redis's (memory is not the
// wire: the confirming probe's rule, evidence.go).
var ErrRemembered = errors.New("answered from memory")

// Decide runs an Inc (peek false) or an IsAllowed (peek true) of a Redis
// provider under the policy: straight to the policy while the breaker is
// open, else one Redis call bounded by the timeout, whose failure is
// judged (judge): the policy answers when the breaker is open, a call
// that ran out of time is shed.
func (g *Guard) Decide(ctx context.Context, be Backend, op, k string, rate limiter.Rate, n int64, peek bool) (limiter.Decision, error) {
	if g.nodes != nil {
		if ng := g.route(k); ng != g {
			return ng.Decide(ctx, be, op, k, rate, n, peek)
		}
	}
	if g.cfg.Observer != nil {
		if _, ok := be.(*timed); !ok {
			return g.decideObserved(ctx, be, op, k, rate, n, peek)
		}
	}
	if g.Open() {
		return g.answer(ctx, be, op, k, rate, n, peek, nil)
	}
	g.firstCall()
	cctx, cancel := g.Context(ctx)
	var d limiter.Decision
	var err error
	if g.bounded {
		// The call may finish in the background after this returns: an
		// observed call is timed here, not by its timed Backend.
		inner, t := untimed(be)
		d, err = bounded(g, cctx, func(ctx context.Context) (limiter.Decision, error) {
			return inner.Decide(ctx, k, rate, n, peek)
		})
		t.end(err)
	} else if d, err = be.Decide(cctx, k, rate, n, peek); err == nil {
		g.answered()
	}
	cancel()
	if err == ErrRemembered {
		err = nil
	}
	if err != nil {
		return g.answer(ctx, be, op, k, rate, n, peek, err)
	}
	if g.inGrace() {
		return g.graceDecide(ctx, k, rate, n, peek, d), nil
	}
	return d, nil
}

// answer is the policy's answer to a call Redis cannot take (err is nil
// when the breaker is open, else the Redis call's error).
func (g *Guard) answer(ctx context.Context, be Backend, op, k string, rate limiter.Rate, n int64, peek bool, err error) (limiter.Decision, error) {
	v := vPolicy
	if err != nil { // the Redis call failed
		if v, err = g.judge(ctx, op, err); v == vReturn {
			return limiter.Decision{}, err
		}
	}
	c, verr := be.Validate(op, k, rate, n, peek)
	if verr != nil {
		return limiter.Decision{}, verr
	}
	if v == vShed {
		return g.Shed(c, err)
	}
	return g.Answer(ctx, c)
}

// guarded runs one Redis call of a Get or Reset bounded by the timeout.
func guarded[T any](g *Guard, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	cctx, cancel := g.Context(ctx)
	defer cancel()
	if g.bounded {
		return bounded(g, cctx, f)
	}
	return f(cctx)
}

// Get runs a Get: it has no Decision to mark as degraded, so under every
// policy an unavailable Redis is an error, Redis's own or ErrUnavailable
// while the breaker is open.
func (g *Guard) Get(ctx context.Context, be Backend, b *Base, k string) (limiter.Usage, error) {
	if g.nodes != nil {
		if ng := g.route(k); ng != g {
			return ng.Get(ctx, be, b, k)
		}
	}
	if g.Open() {
		if _, err := b.Check("get", k); err != nil {
			return limiter.Usage{}, err
		}
		return limiter.Usage{}, g.Err("get")
	}
	u, err := guarded(g, ctx, func(ctx context.Context) (limiter.Usage, error) { return be.Usage(ctx, k) })
	if err != nil {
		return limiter.Usage{}, g.FailedErr(ctx, "get", err)
	}
	return u, nil
}

// Reset UNLINKs the key's hash and drops what the local fallback holds for
// it. Redis failures are errors, as for Get.
func (g *Guard) Reset(ctx context.Context, b *Base, k string) error {
	if g.nodes != nil {
		if ng := g.route(k); ng != g {
			return ng.Reset(ctx, b, k)
		}
	}
	if g.Open() {
		if _, err := b.Check("reset", k); err != nil {
			return err
		}
		return g.Err("reset")
	}
	_, err := guarded(g, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, b.Reset(ctx, k) })
	if err != nil {
		return g.FailedErr(ctx, "reset", err)
	}
	g.Forget(ctx, k)
	return nil
}
