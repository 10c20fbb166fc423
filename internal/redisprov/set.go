package redisprov

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

// Sets is the calls on sets of limits over a Base, in its strategy, as
// every Redis provider's Guard makes them. It is the Base itself, so
// passing one allocates nothing.
type Sets Base

// SetsOf returns the calls on sets over b.
func SetsOf(b *Base) *Sets { return (*Sets)(b) }

// IncSet runs an IncSet under the failure policy.
func (p *Provider) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return p.g.DecideSet(ctx, SetsOf(&p.b), "inc set", k, set, n)
}

// GetSet runs a GetSet: an unavailable Redis is an error.
func (p *Provider) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return p.g.GetSet(ctx, SetsOf(&p.b), k, set)
}

// ResetSet UNLINKs the hashes of set's limits for k and drops what the
// fallback holds for them.
func (p *Provider) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return p.g.ResetSet(ctx, SetsOf(&p.b), k, set)
}

// incScripts are the decision scripts of b's strategy: a single limit's
// and a set's.
func (b *Base) incScripts() (one, many *redis.Script) {
	if b.sup {
		return scripts.SupInc, scripts.SupSet
	}
	return scripts.AbsInc, scripts.AbsSet
}

// setCall validates a call on set (CheckSet, then each limit's hard
// capacity) and returns its hashes and its limits, in lb.
func (s *Sets) setCall(op, k string, set *limiter.Set, n int64, lb *[window.MaxSet]window.Limit) ([]string, []window.Limit, error) {
	b := (*Base)(s)
	hs, err := b.CheckSet(op, k, set, n)
	if err != nil {
		return nil, nil, err
	}
	ls, err := window.SetLimits(set, hardFactor(&b.Cfg, b.sup), lb)
	if err != nil {
		return nil, nil, b.Errorf(op, err)
	}
	return hs, ls, nil
}

// ValidateSet checks a set call for the policy.
func (s *Sets) ValidateSet(op, k string, set *limiter.Set, n int64) error {
	var lb [window.MaxSet]window.Limit
	_, _, err := s.setCall(op, k, set, n, &lb)
	return err
}

// DecideSet is the Redis call of an IncSet (n = 0: a peek): one
// abs_set.lua or sup_set.lua call over one hash per limit.
func (s *Sets) DecideSet(ctx context.Context, op, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	b := (*Base)(s)
	var (
		lb [window.MaxSet]window.Limit
		rb [window.MaxSet]window.Result
	)
	hs, ls, err := s.setCall(op, k, set, n, &lb)
	if err != nil {
		return limiter.SetDecision{}, err
	}
	draw := drawPPM(&b.Cfg, b.sup)
	_, script := b.incScripts()
	v, err := b.Run(ctx, script, hs, setArgv(b, ls, n, draw, false)...)
	if err != nil {
		return limiter.SetDecision{}, b.Errorf(op, err)
	}
	rs := rb[:len(ls)]
	if b.sup {
		err = supReadSet(v, ls, n, draw, rs)
	} else {
		err = absReadSet(v, ls, n, rs)
	}
	if err != nil {
		return limiter.SetDecision{}, b.Errorf(op, err)
	}
	return window.SetDecision(set, rs), nil
}

// UsageSet is the Redis call of a GetSet: abs_get.lua or sup_set_get.lua
// over the set's hashes.
func (s *Sets) UsageSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	const op = "get set"
	b := (*Base)(s)
	var lb [window.MaxSet]window.Limit
	hs, ls, err := s.setCall(op, k, set, 0, &lb)
	if err != nil {
		return nil, err
	}
	args := make([]any, 1, 1+2*len(ls))
	args[0] = NowArg(&b.Cfg)
	for i := range ls {
		args = append(args, ls[i].P.W, ls[i].P.B)
	}
	us := make([]limiter.Usage, len(ls))
	if err := s.usages(ctx, op, true, hs, us, args...); err != nil {
		return nil, err
	}
	return us, nil
}

// UnlinkSet is the Redis call of a ResetSet: one UNLINK of set's hashes.
func (s *Sets) UnlinkSet(ctx context.Context, k string, set *limiter.Set) error {
	const op = "reset set"
	b := (*Base)(s)
	var lb [window.MaxSet]window.Limit
	hs, _, err := s.setCall(op, k, set, 0, &lb)
	if err != nil {
		return err
	}
	if err := b.Client.Unlink(ctx, hs...).Err(); err != nil {
		return b.Errorf(op, err)
	}
	return nil
}

// usages runs the usage script of a single limit or a set over hashes hs
// and reads one usage per hash into us: abs_get.lua's units admitted and
// capacity, or sup_get.lua's and sup_set_get.lua's units accepted,
// declined and soft capacity.
func (s *Sets) usages(ctx context.Context, op string, set bool, hs []string, us []limiter.Usage, args ...any) error {
	b := (*Base)(s)
	script, width := scripts.AbsGet, 2
	switch {
	case b.sup && set:
		script, width = scripts.SupSetGet, 3
	case b.sup:
		script, width = scripts.SupGet, 3
	}
	v, err := b.Run(ctx, script, hs, args...)
	if err != nil {
		return b.Errorf(op, err)
	}
	x, err := Int64s(v, width*len(us))
	if err != nil {
		return b.Errorf(op, err)
	}
	for i := range us {
		y := x[width*i:]
		if b.sup {
			us[i] = limiter.Usage{Used: y[0], Declined: y[1], Limit: y[2]}
		} else {
			us[i] = limiter.Usage{Used: y[0], Limit: y[1]}
		}
	}
	return nil
}
