package redisprov

import (
	"context"
	"fmt"

	"github.com/sluice-go/sluice/limiter"
)

// Backend is what a Redis provider gives its Guard: the validation a
// policy answer needs, and the provider's Redis calls. *Provider
// implements it, so passing one allocates nothing.
type Backend interface {
	// Validate checks an Inc (or, with peek, an IsAllowed) as the provider
	// does before asking Redis, and describes it for the policy.
	Validate(op, k string, rate limiter.Rate, n int64, peek bool) (*Call, error)
	// Decide is the Redis call of an Inc, or with peek of an IsAllowed.
	Decide(ctx context.Context, k string, rate limiter.Rate, n int64, peek bool) (limiter.Decision, error)
	// Usage is the Redis call of a Get.
	Usage(ctx context.Context, k string) (limiter.Usage, error)
}

// ask is one decision call: an Inc or IsAllowed of be (sbe nil), or an
// IncSet of sbe. A single limit's decision travels as the Decision of a
// SetDecision.
type ask struct {
	op, k string
	n     int64
	be    Backend
	rate  limiter.Rate
	peek  bool
	sbe   *Sets
	set   *limiter.Set
}

// Decide runs an Inc (peek false) or an IsAllowed (peek true) under the
// policy (decide).
func (g *Guard) Decide(ctx context.Context, be Backend, op, k string, rate limiter.Rate, n int64, peek bool) (limiter.Decision, error) {
	g = g.at(k)
	var d limiter.SetDecision
	var err error
	if g.cfg.Observer == nil && !g.bounded && !g.Open() {
		// decide's healthy path without building an ask; anything else
		// goes on in its tail (settle).
		g.firstCall()
		cctx, cancel := g.Context(ctx)
		d.Decision, err = be.Decide(cctx, k, rate, n, peek)
		cancel()
		if err == nil {
			g.answered()
		}
		if (err == nil || err == ErrRemembered) && !g.InGrace() {
			return d.Decision, nil
		}
		err = g.settle(ctx, &ask{op: op, k: k, n: n, be: be, rate: rate, peek: peek}, &d, err)
	} else {
		err = g.decide(ctx, &ask{op: op, k: k, n: n, be: be, rate: rate, peek: peek}, &d, nil)
	}
	if err != nil {
		return limiter.Decision{}, err
	}
	return d.Decision, nil
}

// DecideSet runs an IncSet (n = 0: a peek) under the policy.
func (g *Guard) DecideSet(ctx context.Context, be *Sets, op, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	var d limiter.SetDecision
	if err := g.at(k).decide(ctx, &ask{op: op, k: k, n: n, sbe: be, set: set}, &d, nil); err != nil {
		return limiter.SetDecision{}, err
	}
	return d, nil
}

// at is the guard that decides k: on a cluster, its master's (route).
func (g *Guard) at(k string) *Guard {
	if g.nodes == nil {
		return g
	}
	return g.route(k)
}

// decide is the one path of a decision call, into d (a Decision is too
// large to copy through every frame): the policy while the breaker is
// open, else one Redis call bounded by the timeout, then settle. With an
// observer, the Redis call is timed into t (decideObserved).
func (g *Guard) decide(ctx context.Context, a *ask, d *limiter.SetDecision, t *timing) error {
	if g.cfg.Observer != nil && t == nil {
		return g.decideObserved(ctx, a, d)
	}
	if g.Open() {
		var err error
		*d, err = g.policy(ctx, a, vPolicy, nil)
		return err
	}
	g.firstCall()
	cctx, cancel := g.Context(ctx)
	t.begin()
	var err error
	if g.bounded {
		// a.call binds a copy of *a: only this path moves it to the heap.
		*d, err = bounded(g, cctx, a.call)
	} else if err = a.redis(cctx, d); err == nil {
		g.answered()
	}
	t.end(err)
	cancel()
	return g.settle(ctx, a, d, err)
}

// settle ends a decision call whose Redis call returned err: a reply
// stands (during the grace, charged to the fallback too); a failure is
// judged, and the policy answers unless the error is returned.
func (g *Guard) settle(ctx context.Context, a *ask, d *limiter.SetDecision, err error) error {
	if err == nil || err == ErrRemembered {
		if g.inGrace() {
			*d = g.graceDecide(ctx, a, *d)
		}
		return nil
	}
	v, err := g.judge(ctx, a.op, err)
	if v == vReturn {
		return err
	}
	*d, err = g.policy(ctx, a, v, err)
	return err
}

// redis is a's Redis call, into d.
func (a *ask) redis(ctx context.Context, d *limiter.SetDecision) (err error) {
	if a.sbe == nil {
		d.Decision, err = a.be.Decide(ctx, a.k, a.rate, a.n, a.peek)
	} else {
		*d, err = a.sbe.DecideSet(ctx, a.op, a.k, a.set, a.n)
	}
	return err
}

// call is redis returning its decision, for bounded.
func (a ask) call(ctx context.Context) (d limiter.SetDecision, err error) {
	err = a.redis(ctx, &d)
	return d, err
}

// policy is the answer to a call Redis cannot take (v vPolicy or vShed,
// cause the Redis call's error), after the backend's validation.
func (g *Guard) policy(ctx context.Context, a *ask, v verdict, cause error) (limiter.SetDecision, error) {
	var c *Call
	var err error
	if a.sbe == nil {
		c, err = a.be.Validate(a.op, a.k, a.rate, a.n, a.peek)
	} else {
		err = a.sbe.ValidateSet(a.op, a.k, a.set, a.n)
	}
	if err != nil {
		return limiter.SetDecision{}, err
	}
	if v == vShed {
		g.noteShed()
		if g.cfg.Policy == limiter.FailError {
			return limiter.SetDecision{}, fmt.Errorf("%s: %s: %w: %w", g.b.pkg, a.op, limiter.ErrShed, cause)
		}
		return g.refuse(a, c, false, true)
	}
	switch g.cfg.Policy {
	case limiter.FailError:
		return limiter.SetDecision{}, g.Err(a.op)
	case limiter.FallbackLocal:
		return g.local(ctx, a, c)
	}
	return g.refuse(a, c, g.cfg.Policy == limiter.FailOpen, false)
}

// other runs a Get, Reset, GetSet or ResetSet: f, its Redis call, bounded
// by the timeout; while the breaker is open, check, its validation, and
// ErrUnavailable. With no Decision to mark, an unavailable Redis is an
// error under every policy.
func other[T any](g *Guard, ctx context.Context, op string, check func() error, f func(context.Context) (T, error)) (T, error) {
	var zero T
	if g.Open() {
		if err := check(); err != nil {
			return zero, err
		}
		return zero, g.Err(op)
	}
	cctx, cancel := g.Context(ctx)
	var v T
	var err error
	if g.bounded {
		v, err = bounded(g, cctx, f)
	} else {
		v, err = f(cctx)
	}
	cancel()
	if err != nil {
		return zero, g.otherErr(ctx, op, err)
	}
	return v, nil
}

// Get runs a Get.
func (g *Guard) Get(ctx context.Context, be Backend, b *Base, k string) (limiter.Usage, error) {
	return other(g.at(k), ctx, "get", func() error { _, err := b.Check("get", k); return err },
		func(ctx context.Context) (limiter.Usage, error) { return be.Usage(ctx, k) })
}

// GetSet runs a GetSet.
func (g *Guard) GetSet(ctx context.Context, be *Sets, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return other(g.at(k), ctx, "get set", func() error { return be.ValidateSet("get set", k, set, 0) },
		func(ctx context.Context) ([]limiter.Usage, error) { return be.UsageSet(ctx, k, set) })
}

// Reset UNLINKs the key's hash and drops what the fallback holds for it.
func (g *Guard) Reset(ctx context.Context, b *Base, k string) error {
	g = g.at(k)
	_, err := other(g, ctx, "reset", func() error { _, err := b.Check("reset", k); return err },
		func(ctx context.Context) (struct{}, error) { return struct{}{}, b.Reset(ctx, k) })
	if err == nil {
		g.forget(ctx, k, nil)
	}
	return err
}

// ResetSet UNLINKs the set's hashes of k and drops what the fallback
// holds for them.
func (g *Guard) ResetSet(ctx context.Context, be *Sets, k string, set *limiter.Set) error {
	g = g.at(k)
	_, err := other(g, ctx, "reset set", func() error { return be.ValidateSet("reset set", k, set, 0) },
		func(ctx context.Context) (struct{}, error) { return struct{}{}, be.UnlinkSet(ctx, k, set) })
	if err == nil {
		g.forget(ctx, k, set)
	}
	return err
}
