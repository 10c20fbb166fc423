// The policy's answers without Redis: FailOpen, FailClosed, and the local
// fallback, on the instance's share (WithFallbackInstances), whose
// admissions are kept for the write-back and the grace.

package redisprov

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

// refuse is the decision on a without Redis (c: a single call's
// validation): admitted (admit, unless the cost can never fit) or refused
// with RetryAfter the probe interval, in every limit of a set alike;
// marked Shed when shed, else Degraded.
func (g *Guard) refuse(a *ask, c *Call, admit, shed bool) (limiter.SetDecision, error) {
	if a.sbe != nil {
		return g.refuseSet(a, admit, shed)
	}
	never := !a.peek && a.n > c.Hard
	d := limiter.Decision{Suppressed: g.b.sup, Limit: c.C, Never: never}
	switch {
	case admit && !never:
		d = limiter.Decision{Allowed: true, Limit: c.C, Remaining: max(c.C-a.n, 0)}
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
	ls, err := window.SetLimits(a.set, hardFactor(g.cfg, g.b.sup), &lb)
	if err != nil {
		return limiter.SetDecision{}, fmt.Errorf("%s: %s: %w", g.b.pkg, a.op, err)
	}
	cost := max(a.n, 1)
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
			r.Remaining = max(l.Soft-a.n, 0)
		case r.Never || !admit:
			r.Outcome, r.Refused = window.OutcomeRejected, true
			if g.b.sup {
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

// local decides a with the fallback and remembers what it admits.
func (g *Guard) local(ctx context.Context, a *ask, c *Call) (limiter.SetDecision, error) {
	fb, err := g.fallback()
	var d limiter.SetDecision
	if err == nil {
		d, err = g.fbDecide(ctx, fb, a)
	}
	if err != nil {
		return limiter.SetDecision{}, fmt.Errorf("%s: %s: fallback: %w", g.b.pkg, a.op, err)
	}
	if !a.peek && d.Allowed && a.n > 0 {
		g.record(a, c)
	}
	d.Degraded = true
	return d, nil
}

// fbDecide is a's decision by the fallback fb, on the instance's share.
func (g *Guard) fbDecide(ctx context.Context, fb limiter.Limiter, a *ask) (d limiter.SetDecision, err error) {
	switch {
	case a.sbe != nil:
		return fb.(limiter.SetLimiter).IncSet(ctx, a.k, g.scaledSet(a.set), a.n)
	case a.peek:
		d.Decision, err = fb.IsAllowed(ctx, a.k)
	default:
		d.Decision, err = fb.Inc(ctx, a.k, share(a.rate, g.cfg.Window, g.cfg.FallbackInstances), a.n)
	}
	return d, err
}

// share is rate r of window w divided by the fleet size n, at least one
// unit per window.
func share(r limiter.Rate, w time.Duration, n int) limiter.Rate {
	if n <= 1 {
		return r
	}
	s := limiter.PerSecond(r.PerSecondValue() / float64(n))
	if c, err := limiter.Capacity(s, w); err != nil || c < 1 {
		return limiter.Every(1, w)
	}
	return s
}

// maxScaledSets bounds the cache of scaled sets (against a set per call).
const maxScaledSets = 1024

// scaledSet is set with every rate shared as share does.
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

// setID is the pending entry of key k on set: sets built per call alike
// share it.
func setID(k string, set *limiter.Set) string { return k + "\x00" + set.String() }

// record remembers the units of a that the fallback admitted.
func (g *Guard) record(a *ask, c *Call) {
	now := g.cfg.NowMs()
	id, span := a.k, g.cfg.WindowMs+g.cfg.BucketMs
	if a.sbe != nil {
		id, span = setID(a.k, a.set), 0
		for i := 0; i < a.set.Len(); i++ {
			l := a.set.At(i)
			span = max(span, (l.Window + l.Bucket).Milliseconds())
		}
		for cur := g.setSpan.Load(); span > cur && !g.setSpan.CompareAndSwap(cur, span); cur = g.setSpan.Load() {
		}
	}
	g.pmu.Lock()
	defer g.pmu.Unlock()
	p := g.pending[id]
	if p == nil {
		if len(g.pending) >= MaxPending {
			g.drop(id, a.n)
			return
		}
		p = &Pending{Key: a.k}
		g.pending[id] = p
	}
	if a.sbe != nil {
		p.Set = a.set
	} else {
		p.Hash, p.Rate = c.Hash, c.Rate
	}
	p.LastMs, p.span = now, span
	p.Units += a.n
}

// drop counts n units of entry id as not remembered, and id once (each
// call, beyond MaxPending ids). g.pmu is held.
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
	if g.b.sup {
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

// forget drops what the fallback holds for k (on set, if any) after a
// Reset on Redis, so that the write-back does not bring it back.
func (g *Guard) forget(ctx context.Context, k string, set *limiter.Set) {
	p := g.fb.Load()
	if p == nil {
		return
	}
	id := k
	if set == nil {
		(*p).Reset(ctx, k)
	} else {
		// This resets the scaled copy too: the same names.
		(*p).(limiter.SetLimiter).ResetSet(ctx, k, set)
		id = setID(k, set)
	}
	g.pmu.Lock()
	delete(g.pending, id)
	g.pmu.Unlock()
}

// startGrace begins the grace after an outage, for a fleet
// (WithFallbackInstances(n), n > 1): other instances may write their
// fallbacks' units back later than this one, so for W + B (or the longest
// set span the fallback decided) every admission Redis grants is charged
// to the fallback too, and refused when the instance's share cannot hold it.
func (g *Guard) startGrace() {
	if g.cfg.FallbackInstances <= 1 || g.fb.Load() == nil {
		return
	}
	span := max(g.cfg.WindowMs+g.cfg.BucketMs, g.setSpan.Load())
	g.graceEnd.Store(g.cfg.NowMs() + span)
}

// InGrace reports whether the grace is on: every admission must then go
// through Decide (the hybrid's leases must not answer).
func (g *Guard) InGrace() bool { return g.graceEnd.Load() != 0 && g.inGrace() }

// inGrace is InGrace's slow path: it ends an expired grace.
func (g *Guard) inGrace() bool {
	end := g.graceEnd.Load()
	if end == 0 {
		return false
	}
	if g.cfg.NowMs() < end {
		return true
	}
	g.graceEnd.CompareAndSwap(end, 0)
	return false
}

// graceDecide charges an admission d that Redis granted a to the
// fallback, refused (in each limit the fallback refused) when the
// fallback's share cannot hold it.
func (g *Guard) graceDecide(ctx context.Context, a *ask, d limiter.SetDecision) limiter.SetDecision {
	fbp := g.fb.Load()
	if a.peek || !d.Allowed || a.n == 0 || fbp == nil {
		return d
	}
	fd, err := g.fbDecide(ctx, *fbp, a)
	if err != nil || fd.Allowed {
		return d
	}
	d.Allowed, d.Suppressed, d.Remaining, d.RetryAfter = false, g.b.sup, 0, fd.RetryAfter
	if g.b.sup {
		d.SuppressionFactor = 1
	}
	for i := range d.Limits {
		if i < len(fd.Limits) && fd.Limits[i].Refused {
			l := &d.Limits[i]
			l.Refused, l.Remaining, l.RetryAfter = true, 0, fd.Limits[i].RetryAfter
		}
	}
	return d
}
