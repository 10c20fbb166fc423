package redisprov

import (
	"context"

	"github.com/sluice-go/sluice/limiter"
)

// The grace after an outage, for a fleet (WithFallbackInstances(n), n > 1).
//
// Other instances may write their fallbacks' units back later than this
// one, and until then Redis could admit that room twice. So for W + B
// after recovery (or the longest set span its fallback decided) every
// admission Redis grants is charged to the fallback too, and refused when
// the instance's share (C/n) cannot hold it. n = 1 has no grace.

// startGrace begins the grace, if the fleet has one, at the recovery.
func (g *Guard) startGrace() {
	if g.cfg.FallbackInstances <= 1 || g.fb.Load() == nil {
		return
	}
	span := max(g.cfg.WindowMs+g.cfg.BucketMs, g.setSpan.Load())
	g.graceEnd.Store(g.cfg.NowMs() + span)
}

// InGrace reports whether the grace is on: every admission must then go
// through Decide (the hybrid's leases must not answer). One inlined atomic
// load while it is off.
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
// fallback, and turns it into a refusal when the fallback's share cannot
// hold it: nothing remaining, the fallback's RetryAfter, and on a set
// each limit the fallback refused refused.
func (g *Guard) graceDecide(ctx context.Context, a *ask, d limiter.SetDecision) limiter.SetDecision {
	if a.peek || !d.Allowed || a.n == 0 {
		return d
	}
	fbp := g.fb.Load()
	if fbp == nil {
		return d
	}
	fd, err := g.fbDecide(ctx, *fbp, a)
	if err != nil || fd.Allowed {
		return d
	}
	d.Allowed, d.Suppressed, d.Remaining, d.RetryAfter = false, g.sup, 0, fd.RetryAfter
	if g.sup {
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
