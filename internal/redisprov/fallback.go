// The failure policy's answers while the breaker is open: the local
// fallback (scaled to the instance's share under WithFallbackInstances),
// FailOpen, FailClosed, FailError, and what the fallback admitted, kept for
// the write-back.

package redisprov

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// refuse is the decision on a without Redis (c: a single call's
// validation): it admits (admit, unless the cost can never fit) or
// refuses, with RetryAfter the probe interval; marked Shed when shed,
// else Degraded. A set's every limit decides alike.
func (g *Guard) refuse(a *ask, c *Call, admit, shed bool) (limiter.SetDecision, error) {
	if a.sbe != nil {
		return g.refuseSet(a, admit, shed)
	}
	never := !c.Peek && c.N > c.Hard
	d := limiter.Decision{Suppressed: g.sup, Limit: c.C, Never: never}
	switch {
	case admit && !never:
		d = limiter.Decision{Allowed: true, Limit: c.C, Remaining: max(c.C-c.N, 0)}
	case !never:
		d.RetryAfter = g.cfg.ProbeInterval
	}
	if !d.Allowed && d.Suppressed {
		d.SuppressionFactor = 1
	}
	d.Degraded, d.Shed = !shed, shed
	return limiter.SetDecision{Decision: d}, nil
}

// refuseSet is refuse for a set.
func (g *Guard) refuseSet(a *ask, admit, shed bool) (limiter.SetDecision, error) {
	var lb [window.MaxSet]window.Limit
	ls, err := window.SetLimits(a.set, hardFactor(g.cfg, g.sup), &lb)
	if err != nil {
		return limiter.SetDecision{}, fmt.Errorf("%s: %s: %w", g.pkg, a.op, err)
	}
	n := a.n
	cost := max(n, 1)
	never := false
	for _, l := range ls {
		never = never || cost > l.Hard
	}
	open := admit && !never
	var rb [window.MaxSet]window.Result
	rs := rb[:len(ls)]
	for i, l := range ls {
		r := &rs[i]
		*r = window.Result{Allowed: open, Limit: l.Soft, Remaining: l.Soft, Never: cost > l.Hard}
		switch {
		case open:
			r.Remaining = max(l.Soft-n, 0)
		case r.Never || !admit:
			r.Outcome, r.Refused = window.OutcomeRejected, true
			if g.sup {
				r.Outcome = window.OutcomeSuppressed
				r.FactorPPM = window.PPM
			}
			if !never {
				r.RetryAfter = g.cfg.ProbeInterval.Milliseconds()
			}
		}
	}
	d := window.SetDecision(a.set, rs)
	d.Degraded, d.Shed = !shed, shed
	return d, nil
}

// local decides a with the in-process fallback and remembers what it
// admits (c: a single call's validation).
func (g *Guard) local(ctx context.Context, a *ask, c *Call) (limiter.SetDecision, error) {
	fb, err := g.fallback()
	var d limiter.SetDecision
	if err == nil {
		d, err = g.fbDecide(ctx, fb, a)
	}
	if err != nil {
		return limiter.SetDecision{}, fmt.Errorf("%s: %s: fallback: %w", g.pkg, a.op, err)
	}
	if !a.peek && d.Allowed && a.n > 0 {
		g.record(a, c)
	}
	d.Degraded = true
	return d, nil
}

// fbDecide is a's decision by the fallback fb, on the rate or the set
// scaled to the instance's share.
func (g *Guard) fbDecide(ctx context.Context, fb limiter.Limiter, a *ask) (d limiter.SetDecision, err error) {
	switch {
	case a.sbe != nil:
		return fb.(limiter.SetLimiter).IncSet(ctx, a.k, g.scaledSet(a.set), a.n)
	case a.peek:
		d.Decision, err = fb.IsAllowed(ctx, a.k)
	default:
		d.Decision, err = fb.Inc(ctx, a.k, g.scaled(a.rate), a.n)
	}
	return d, err
}

// scaled divides r by the fleet size, keeping at least one unit per window.
func (g *Guard) scaled(r limiter.Rate) limiter.Rate {
	if g.cfg.FallbackInstances <= 1 {
		return r
	}
	return share(r, g.cfg.Window, g.cfg.FallbackInstances)
}

// share is rate r of window w divided by n, at least one unit per window.
func share(r limiter.Rate, w time.Duration, n int) limiter.Rate {
	s := limiter.PerSecond(r.PerSecondValue() / float64(n))
	if c, err := limiter.Capacity(s, w); err != nil || c < 1 {
		return limiter.Every(1, w)
	}
	return s
}

// maxScaledSets bounds the cache of scaled sets (an application that
// builds a set per call would otherwise grow it during an outage).
const maxScaledSets = 1024

// scaledSet divides every rate of set by the fleet size, keeping at least
// one unit per window, as scaled does for a single rate.
func (g *Guard) scaledSet(set *limiter.Set) *limiter.Set {
	n := g.cfg.FallbackInstances
	if n <= 1 {
		return set
	}
	if v, ok := g.scaledSets.Load(set); ok {
		return v.(*limiter.Set)
	}
	ls := make([]limiter.Limit, set.Len())
	for i := range ls {
		ls[i] = set.At(i)
		ls[i].Rate = share(ls[i].Rate, ls[i].Window, n)
	}
	scaled, err := limiter.NewSet(ls...)
	if err != nil {
		return set // cannot happen: the scaled rates are valid
	}
	if g.nScaled.Add(1) <= maxScaledSets {
		g.scaledSets.Store(set, scaled)
	}
	return scaled
}

// setID is the pending entry of key k on set: the set's description
// (names, rates, windows) tells two sets apart, so that sets built per
// call share an entry.
func setID(k string, set *limiter.Set) string { return k + "\x00" + set.String() }

// record remembers the n units of a that the fallback admitted (c: a
// single call's validation), on the key or on the key and the set.
func (g *Guard) record(a *ask, c *Call) {
	now := g.cfg.NowMs()
	id, span := a.k, g.cfg.WindowMs+g.cfg.BucketMs
	if a.sbe != nil {
		id, span = setID(a.k, a.set), 0
		for i := 0; i < a.set.Len(); i++ {
			l := a.set.At(i)
			span = max(span, (l.Window + l.Bucket).Milliseconds())
		}
		raise(&g.setSpan, span)
	}
	g.pmu.Lock()
	if p := g.pendingFor(id, a.k, a.n); p != nil {
		if a.sbe != nil {
			p.Set = a.set
		} else {
			p.Hash, p.Rate = c.Hash, c.Rate
		}
		p.LastMs, p.span = now, span
		p.Units += a.n
	}
	g.pmu.Unlock()
}

// raise makes x at least v.
func raise(x *atomic.Int64, v int64) {
	for cur := x.Load(); v > cur && !x.CompareAndSwap(cur, v); cur = x.Load() {
	}
}

// drop counts n units of id as not remembered, and id once (while fewer
// than MaxPending keys were dropped; each call beyond). g.pmu must be
// held.
func (g *Guard) drop(id string, n int64) {
	g.droppedUnits += n
	switch {
	case g.droppedIDs[id]:
	case len(g.droppedIDs) < MaxPending:
		if g.droppedIDs == nil {
			g.droppedIDs = make(map[string]bool)
		}
		g.droppedIDs[id] = true
	default:
		g.dropped++
	}
}

// pendingFor returns the Pending of id (the key, or the key and the set),
// made for key k when new, or nil when MaxPending keys are pending already
// (the n units are then counted as dropped). g.pmu must be held.
func (g *Guard) pendingFor(id, k string, n int64) *Pending {
	p := g.pending[id]
	if p == nil {
		if len(g.pending) >= MaxPending {
			g.drop(id, n)
			return nil
		}
		p = &Pending{Key: k}
		g.pending[id] = p
	}
	return p
}

// fallback returns the local limiter, built on first use.
func (g *Guard) fallback() (limiter.Limiter, error) {
	if p := g.fb.Load(); p != nil {
		return *p, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.fb.Load(); p != nil {
		return *p, nil
	}
	if g.closed {
		return nil, limiter.ErrClosed
	}
	var l limiter.Limiter
	var err error
	if g.strategy == key.Suppressed {
		l, err = window.NewLocalSuppressed(g.opts...)
	} else {
		l, err = window.NewLocalAbsolute(g.opts...)
	}
	if err != nil {
		return nil, err
	}
	g.fb.Store(&l)
	return l, nil
}

// forget drops what the fallback holds for k (on set, when not nil),
// after a Reset succeeded on Redis, so that the write-back does not bring
// back units the caller reset.
func (g *Guard) forget(ctx context.Context, k string, set *limiter.Set) {
	p := g.fb.Load()
	if p == nil {
		return
	}
	id := k
	if set == nil {
		(*p).Reset(ctx, k)
	} else {
		// The fallback finds a limit's state by its name: the set
		// resets its scaled copy too.
		(*p).(limiter.SetLimiter).ResetSet(ctx, k, set)
		id = setID(k, set)
	}
	g.pmu.Lock()
	delete(g.pending, id)
	g.pmu.Unlock()
}
