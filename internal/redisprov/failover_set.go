package redisprov

import (
	"context"
	"fmt"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

// SetBackend is what a Redis provider gives its Guard for calls on sets of
// limits.
type SetBackend interface {
	// ValidateSet checks a set call as the provider does before asking
	// Redis (n = 0 for GetSet and ResetSet).
	ValidateSet(op, k string, set *limiter.Set, n int64) error
	// DecideSet is the Redis call of an IncSet (n = 0: a peek).
	// op names the call in its errors ("inc set").
	DecideSet(ctx context.Context, op, k string, set *limiter.Set, n int64) (limiter.SetDecision, error)
	// UsageSet is the Redis call of a GetSet.
	UsageSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error)
	// UnlinkSet is the Redis call of a ResetSet.
	UnlinkSet(ctx context.Context, k string, set *limiter.Set) error
}

// DecideSet runs an IncSet (n = 0: a peek) under the policy, as
// Decide runs an Inc. The local fallback decides sets with its own
// IncSet (on the set scaled by WithFallbackInstances); what it admits is
// written back to every limit of the set when Redis answers again, as for
// Inc (docs/operations.md, When Redis fails).
func (g *Guard) DecideSet(ctx context.Context, be SetBackend, op, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	if g.nodes != nil {
		if ng := g.route(k); ng != g {
			return ng.DecideSet(ctx, be, op, k, set, n)
		}
	}
	if g.cfg.Observer != nil {
		if _, ok := be.(*timedSet); !ok {
			return g.decideSetObserved(ctx, be, op, k, set, n)
		}
	}
	var err error
	v := vPolicy
	if !g.Open() {
		g.firstCall()
		cctx, cancel := g.Context(ctx)
		var d limiter.SetDecision
		if g.bounded {
			inner, t := untimedSet(be)
			d, err = bounded(g, cctx, func(ctx context.Context) (limiter.SetDecision, error) {
				return inner.DecideSet(ctx, op, k, set, n)
			})
			t.end(err)
		} else if d, err = be.DecideSet(cctx, op, k, set, n); err == nil {
			g.answered()
		}
		cancel()
		if err == nil {
			if g.inGrace() {
				return g.graceDecideSet(ctx, k, set, n, d), nil
			}
			return d, nil
		}
		if v, err = g.judge(ctx, op, err); v == vReturn {
			return limiter.SetDecision{}, err
		}
	}
	if verr := be.ValidateSet(op, k, set, n); verr != nil {
		return limiter.SetDecision{}, verr
	}
	if v == vShed {
		return g.shedSet(op, set, n, err)
	}
	return g.answerSet(ctx, op, k, set, n)
}

// answerSet decides a set call by the policy, without Redis; every
// decision it returns has Degraded set.
func (g *Guard) answerSet(ctx context.Context, op, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	switch g.cfg.Policy {
	case limiter.FailError:
		return limiter.SetDecision{}, g.Err(op)
	case limiter.FallbackLocal:
		fb, err := g.fallback()
		if err != nil {
			return limiter.SetDecision{}, fmt.Errorf("%s: %s: fallback: %w", g.pkg, op, err)
		}
		d, err := fb.(limiter.SetLimiter).IncSet(ctx, k, g.scaledSet(set), n)
		if err != nil {
			return limiter.SetDecision{}, fmt.Errorf("%s: %s: fallback: %w", g.pkg, op, err)
		}
		if d.Allowed && n > 0 {
			g.recordSet(k, set, n)
		}
		d.Degraded = true
		return d, nil
	}
	return g.refuseSet(op, set, n, g.cfg.Policy == limiter.FailOpen, false)
}

// shedSet is Shed for a set call: every limit refuses, and the decision
// is marked Shed (under FailError: ErrShed).
func (g *Guard) shedSet(op string, set *limiter.Set, n int64, cause error) (limiter.SetDecision, error) {
	g.noteShed()
	if g.cfg.Policy == limiter.FailError {
		return limiter.SetDecision{}, fmt.Errorf("%s: %s: %w: %w", g.pkg, op, limiter.ErrShed, cause)
	}
	return g.refuseSet(op, set, n, false, true)
}

// refuseSet is the decision on a set without Redis: every limit admits
// (open, unless the cost can never fit) or refuses, with RetryAfter the
// probe interval; marked Shed when shed, else Degraded.
func (g *Guard) refuseSet(op string, set *limiter.Set, n int64, admit, shed bool) (limiter.SetDecision, error) {
	var lb [window.MaxSet]window.Limit
	ls, err := window.SetLimits(set, g.hardFactor(), &lb)
	if err != nil {
		return limiter.SetDecision{}, fmt.Errorf("%s: %s: %w", g.pkg, op, err)
	}
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
	d := window.SetDecision(set, rs)
	d.Degraded, d.Shed = !shed, shed
	return d, nil
}

// setID is the pending entry of key k on set: the set's description
// (names, rates, windows) tells two sets apart, so that sets built per
// call share an entry.
func setID(k string, set *limiter.Set) string { return k + "\x00" + set.String() }

// recordSet remembers n units of k that the fallback admitted on set.
func (g *Guard) recordSet(k string, set *limiter.Set, n int64) {
	now := g.cfg.NowMs()
	span := int64(0)
	for i := 0; i < set.Len(); i++ {
		l := set.At(i)
		span = max(span, (l.Window + l.Bucket).Milliseconds())
	}
	for cur := g.setSpan.Load(); span > cur && !g.setSpan.CompareAndSwap(cur, span); cur = g.setSpan.Load() {
	}
	g.pmu.Lock()
	if p := g.pendingFor(setID(k, set), k, n); p != nil {
		p.Set, p.LastMs, p.span = set, now, span
		p.Units += n
	}
	g.pmu.Unlock()
}

// hardFactor is the hard-limit factor of the strategy: 1 for absolute.
func (g *Guard) hardFactor() float64 {
	if g.sup {
		return g.cfg.HardLimitFactor
	}
	return 1
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
		s := limiter.PerSecond(ls[i].Rate.PerSecondValue() / float64(n))
		if c, err := limiter.Capacity(s, ls[i].Window); err != nil || c < 1 {
			s = limiter.Every(1, ls[i].Window)
		}
		ls[i].Rate = s
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

// GetSet runs a GetSet: like Get, an unavailable Redis is an error under
// every policy.
func (g *Guard) GetSet(ctx context.Context, be SetBackend, k string, set *limiter.Set) ([]limiter.Usage, error) {
	if g.nodes != nil {
		if ng := g.route(k); ng != g {
			return ng.GetSet(ctx, be, k, set)
		}
	}
	if g.Open() {
		if err := be.ValidateSet("get set", k, set, 0); err != nil {
			return nil, err
		}
		return nil, g.Err("get set")
	}
	u, err := guarded(g, ctx, func(ctx context.Context) ([]limiter.Usage, error) { return be.UsageSet(ctx, k, set) })
	if err != nil {
		return nil, g.FailedErr(ctx, "get set", err)
	}
	return u, nil
}

// ResetSet UNLINKs the set's hashes of k and drops what the fallback
// holds for them. Redis failures are errors, as for Reset.
func (g *Guard) ResetSet(ctx context.Context, be SetBackend, k string, set *limiter.Set) error {
	if g.nodes != nil {
		if ng := g.route(k); ng != g {
			return ng.ResetSet(ctx, be, k, set)
		}
	}
	if g.Open() {
		if err := be.ValidateSet("reset set", k, set, 0); err != nil {
			return err
		}
		return g.Err("reset set")
	}
	_, err := guarded(g, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, be.UnlinkSet(ctx, k, set) })
	if err != nil {
		return g.FailedErr(ctx, "reset set", err)
	}
	if p := g.fb.Load(); p != nil {
		// The fallback finds a limit's state by its name: the set
		// resets its scaled copy too.
		(*p).(limiter.SetLimiter).ResetSet(ctx, k, set)
		g.pmu.Lock()
		delete(g.pending, setID(k, set))
		g.pmu.Unlock()
	}
	return nil
}
