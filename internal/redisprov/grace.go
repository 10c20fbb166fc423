package redisprov

import (
	"context"

	"github.com/sluice-go/sluice/limiter"
)

// The grace after an outage, for a fleet (WithFallbackInstances(n), n > 1).
//
// Each instance writes back its own fallback's units when its own probe
// finds Redis again; the others may find it later (their probes run on
// their own timers, and a pool of dead connections can cost a probe or
// two more). Until they do, Redis does not hold what their fallbacks
// admitted, and an instance back on Redis could admit that room a second
// time: up to (n − 1)/n × C more in a window. So for W + B after its
// recovery (the longest W + B of the sets its fallback decided, if
// longer) an instance charges every admission Redis grants to its
// fallback as well, and refuses one that its share (C/n, as during the
// outage) cannot hold: each instance stays within its share until every
// fallback admission that a window can still count is in Redis, or
// belongs to an instance still degraded. Redis has recorded such a
// refused call, which only makes Redis more careful. A single instance
// (n = 1) has no grace.

// startGrace begins the grace, if the fleet has one, at the recovery.
func (g *Guard) startGrace() {
	if g.cfg.FallbackInstances <= 1 || g.fb.Load() == nil {
		return
	}
	span := max(g.cfg.WindowMs+g.cfg.BucketMs, g.setSpan.Load())
	g.graceEnd.Store(g.cfg.NowMs() + span)
}

// InGrace reports whether the grace after an outage is on: every
// admission must then go through Decide, which charges it to the
// fallback's share. A provider that answers from memory without Decide
// (the hybrid's leases) must not while it is on. One atomic load while it
// is off (nearly always), inlined into the caller.
func (g *Guard) InGrace() bool { return g.graceEnd.Load() != 0 && g.inGrace() }

// inGrace reports whether the grace is on: one atomic load while it is
// off (nearly always).
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

// graceDecide charges an admission d that Redis granted to the fallback,
// and turns it into a refusal when the fallback's share cannot hold it.
func (g *Guard) graceDecide(ctx context.Context, k string, rate limiter.Rate, n int64, peek bool, d limiter.Decision) limiter.Decision {
	if peek || !d.Allowed || n == 0 {
		return d
	}
	fbp := g.fb.Load()
	if fbp == nil {
		return d
	}
	fd, err := (*fbp).Inc(ctx, k, g.scaled(rate), n)
	if err != nil || fd.Allowed {
		return d
	}
	return g.graceRefusal(d, fd)
}

// graceDecideSet is graceDecide for a set.
func (g *Guard) graceDecideSet(ctx context.Context, k string, set *limiter.Set, n int64, d limiter.SetDecision) limiter.SetDecision {
	if !d.Allowed || n == 0 {
		return d
	}
	fbp := g.fb.Load()
	if fbp == nil {
		return d
	}
	fd, err := (*fbp).(limiter.SetLimiter).IncSet(ctx, k, g.scaledSet(set), n)
	if err != nil || fd.Allowed {
		return d
	}
	d.Decision = g.graceRefusal(d.Decision, fd.Decision)
	for i := range d.Limits {
		if i < len(fd.Limits) && fd.Limits[i].Refused {
			l := &d.Limits[i]
			l.Refused, l.Remaining, l.RetryAfter = true, 0, fd.Limits[i].RetryAfter
		}
	}
	return d
}

// graceRefusal is Redis's admission d refused by the share: nothing
// remaining, and the fallback's RetryAfter.
func (g *Guard) graceRefusal(d, fd limiter.Decision) limiter.Decision {
	d.Allowed, d.Outcome, d.Remaining, d.RetryAfter = false, g.refused, 0, fd.RetryAfter
	if g.refused == limiter.Suppressed {
		d.SuppressionFactor = 1
	}
	return d
}
