package redisprov

import (
	"context"

	"github.com/sluice-go/sluice/internal/redisx"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

// IncSet runs an IncSet (n = 0: IsAllowedSet, op "is allowed set") under
// the failure policy.
func (p *Provider) IncSet(ctx context.Context, op, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return p.g.DecideSet(ctx, (*backend)(p), op, k, set, n)
}

// GetSet runs a GetSet: an unavailable Redis is an error under every
// policy.
func (p *Provider) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return p.g.GetSet(ctx, (*backend)(p), k, set)
}

// ResetSet UNLINKs the hashes of set's limits for key and drops what the
// fallback holds for them.
func (p *Provider) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return p.g.ResetSet(ctx, (*backend)(p), k, set)
}

// setCall validates a call on set as the single calls are validated (the
// key and ErrClosed first, then the set, then n: redisx.Base.CheckSet),
// then each limit's hard capacity, and returns the hashes of set's limits
// and the limits, into lb.
func (p *Provider) setCall(op, k string, set *limiter.Set, n int64, lb *[window.MaxSet]window.Limit) ([]string, []window.Limit, error) {
	hs, err := p.b.CheckSet(op, k, set, n)
	if err != nil {
		return nil, nil, err
	}
	ls, err := window.SetLimits(set, p.factor(), lb)
	if err != nil {
		return nil, nil, p.b.Errorf(op, err)
	}
	return hs, ls, nil
}

// ValidateSet checks a set call for the policy (failover.SetBackend).
func (be *backend) ValidateSet(op, k string, set *limiter.Set, n int64) error {
	var lb [window.MaxSet]window.Limit
	_, _, err := (*Provider)(be).setCall(op, k, set, n, &lb)
	return err
}

// DecideSet is the Redis call of an IncSet (n = 0: IsAllowedSet): one
// abs_set.lua or sup_set.lua call over one hash per limit, after the
// call's draw.
func (be *backend) DecideSet(ctx context.Context, op, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	p := (*Provider)(be)
	var (
		lb [window.MaxSet]window.Limit
		rb [window.MaxSet]window.Result
	)
	hs, ls, err := p.setCall(op, k, set, n, &lb)
	if err != nil {
		return limiter.SetDecision{}, err
	}
	draw := p.draw()
	var v any
	if p.sup {
		v, err = p.b.Run(ctx, scripts.SupSet, hs, supSetArgs(&p.b, ls, n, draw)...)
	} else {
		v, err = p.b.Run(ctx, scripts.AbsSet, hs, absSetArgs(&p.b, ls, n)...)
	}
	if err != nil {
		return limiter.SetDecision{}, p.b.Errorf(op, err)
	}
	rs := rb[:len(ls)]
	if p.sup {
		err = supReadSet(v, ls, n, draw, rs)
	} else {
		err = absReadSet(v, ls, n, rs)
	}
	if err != nil {
		return limiter.SetDecision{}, p.b.Errorf(op, err)
	}
	return window.SetDecision(set, rs), nil
}

// UsageSet is the Redis call of a GetSet: abs_get.lua or sup_set_get.lua
// over the set's hashes.
func (be *backend) UsageSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	const op = "get set"
	p := (*Provider)(be)
	var lb [window.MaxSet]window.Limit
	hs, ls, err := p.setCall(op, k, set, 0, &lb)
	if err != nil {
		return nil, err
	}
	args := make([]any, 1, 1+2*len(ls))
	args[0] = redisx.NowArg(&p.b.Cfg)
	for i := range ls {
		args = append(args, ls[i].P.W, ls[i].P.B)
	}
	script := scripts.AbsGet
	if p.sup {
		script = scripts.SupSetGet
	}
	us := make([]limiter.Usage, len(ls))
	if err := p.usages(ctx, op, script, hs, us, args...); err != nil {
		return nil, err
	}
	return us, nil
}

// UnlinkSet is the Redis call of a ResetSet: one UNLINK of every hash of
// set.
func (be *backend) UnlinkSet(ctx context.Context, k string, set *limiter.Set) error {
	const op = "reset set"
	p := (*Provider)(be)
	var lb [window.MaxSet]window.Limit
	hs, _, err := p.setCall(op, k, set, 0, &lb)
	if err != nil {
		return err
	}
	if err := p.b.Client.Unlink(ctx, hs...).Err(); err != nil {
		return p.b.Errorf(op, err)
	}
	return nil
}
