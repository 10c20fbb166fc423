// The failure policy's answers while the breaker is open: the local
// fallback (scaled to the instance's share under WithFallbackInstances),
// FailOpen, FailClosed, FailError, and what the fallback admitted, kept for
// the write-back.

package redisprov

import (
	"context"
	"fmt"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// Answer decides c by the policy, without Redis. Every Decision it returns
// has Degraded set.
func (g *Guard) Answer(ctx context.Context, c *Call) (limiter.Decision, error) {
	var d limiter.Decision
	switch g.cfg.Policy {
	case limiter.FailError:
		return d, g.Err(c.Op)
	case limiter.FallbackLocal:
		return g.local(ctx, c)
	case limiter.FailOpen:
		if c.Peek || c.N <= c.Hard {
			d = limiter.Decision{Allowed: true, Limit: c.C, Remaining: max(c.C-c.N, 0)}
			break
		}
		d = limiter.Decision{Suppressed: g.sup, Limit: c.C, Never: true}
	default: // FailClosed
		d = limiter.Decision{Suppressed: g.sup, Limit: c.C, Never: !c.Peek && c.N > c.Hard}
		if !d.Never {
			d.RetryAfter = g.cfg.ProbeInterval
		}
	}
	if d.Suppressed && !d.Allowed {
		d.SuppressionFactor = 1
	}
	d.Degraded = true
	return d, nil
}

// local decides with the in-process fallback and remembers what it admits.
func (g *Guard) local(ctx context.Context, c *Call) (limiter.Decision, error) {
	fb, err := g.fallback()
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("%s: %s: fallback: %w", g.pkg, c.Op, err)
	}
	var d limiter.Decision
	if c.Peek {
		d, err = fb.IsAllowed(ctx, c.Key)
	} else {
		d, err = fb.Inc(ctx, c.Key, g.scaled(c.Rate), c.N)
	}
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("%s: %s: fallback: %w", g.pkg, c.Op, err)
	}
	if !c.Peek && d.Allowed && c.N > 0 {
		g.record(c)
	}
	d.Degraded = true
	return d, nil
}

// scaled divides r by the fleet size, keeping at least one unit per window.
func (g *Guard) scaled(r limiter.Rate) limiter.Rate {
	n := g.cfg.FallbackInstances
	if n <= 1 {
		return r
	}
	s := limiter.PerSecond(r.PerSecondValue() / float64(n))
	if c, err := limiter.Capacity(s, g.cfg.Window); err != nil || c < 1 {
		return g.minRate
	}
	return s
}

func (g *Guard) record(c *Call) {
	now := g.cfg.NowMs()
	g.pmu.Lock()
	if p := g.pendingFor(c.Key, c.Key, c.N); p != nil {
		p.Hash, p.Rate, p.LastMs, p.span = c.Hash, c.Rate, now, g.cfg.WindowMs+g.cfg.BucketMs
		p.Units += c.N
	}
	g.pmu.Unlock()
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

// Forget drops what the fallback holds for k, after Reset succeeded on
// Redis, so that reconciliation does not bring back units the caller reset.
func (g *Guard) Forget(ctx context.Context, k string) {
	if p := g.fb.Load(); p != nil {
		(*p).Reset(ctx, k)
		g.pmu.Lock()
		delete(g.pending, k)
		g.pmu.Unlock()
	}
}
