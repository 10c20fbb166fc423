package redisprov

import (
	"context"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

// Sets is the calls on sets of limits of either strategy over a Base
// (its strategy decides which): the SetBackend of redisabs,
// redissup and the hybrid, which decide sets alike, one script call per
// decision and no lease. It is the Base itself, so passing one allocates
// nothing.
type Sets Base

// SetsOf returns the calls on sets over b.
func SetsOf(b *Base) *Sets { return (*Sets)(b) }

var _ SetBackend = (*Sets)(nil)

func (s *Sets) base() *Base { return (*Base)(s) }

func (s *Sets) sup() bool { return s.base().Strategy() == key.Suppressed }

// IncSet runs an IncSet under the failure policy.
func (p *Provider) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return p.g.DecideSet(ctx, SetsOf(&p.b), "inc set", k, set, n)
}

// GetSet runs a GetSet: an unavailable Redis is an error under every
// policy.
func (p *Provider) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return p.g.GetSet(ctx, SetsOf(&p.b), k, set)
}

// ResetSet UNLINKs the hashes of set's limits for key and drops what the
// fallback holds for them.
func (p *Provider) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return p.g.ResetSet(ctx, SetsOf(&p.b), k, set)
}

// setCall validates a call on set as the single calls are validated (the
// key and ErrClosed first, then the set, then n: Base.CheckSet),
// then each limit's hard capacity, and returns the hashes of set's limits
// and the limits, into lb.
func (s *Sets) setCall(op, k string, set *limiter.Set, n int64, lb *[window.MaxSet]window.Limit) ([]string, []window.Limit, error) {
	b := s.base()
	hs, err := b.CheckSet(op, k, set, n)
	if err != nil {
		return nil, nil, err
	}
	ls, err := window.SetLimits(set, hardFactor(&b.Cfg, s.sup()), lb)
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
// abs_set.lua or sup_set.lua call over one hash per limit, after the
// call's draw.
func (s *Sets) DecideSet(ctx context.Context, op, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	b, sup := s.base(), s.sup()
	var (
		lb [window.MaxSet]window.Limit
		rb [window.MaxSet]window.Result
	)
	hs, ls, err := s.setCall(op, k, set, n, &lb)
	if err != nil {
		return limiter.SetDecision{}, err
	}
	draw := drawPPM(&b.Cfg, sup)
	var v any
	if sup {
		v, err = b.Run(ctx, scripts.SupSet, hs, supSetArgs(b, ls, n, draw)...)
	} else {
		v, err = b.Run(ctx, scripts.AbsSet, hs, absSetArgs(b, ls, n)...)
	}
	if err != nil {
		return limiter.SetDecision{}, b.Errorf(op, err)
	}
	rs := rb[:len(ls)]
	if sup {
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
	b := s.base()
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
	script := scripts.AbsGet
	if s.sup() {
		script = scripts.SupSetGet
	}
	us := make([]limiter.Usage, len(ls))
	if err := s.usages(ctx, op, script, hs, us, args...); err != nil {
		return nil, err
	}
	return us, nil
}

// UnlinkSet is the Redis call of a ResetSet: one UNLINK of every hash of
// set.
func (s *Sets) UnlinkSet(ctx context.Context, k string, set *limiter.Set) error {
	const op = "reset set"
	b := s.base()
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

// usages runs a usage script over hashes hs with args and reads one usage
// per hash into us: abs_get.lua's units admitted and capacity, or
// sup_get.lua's and sup_set_get.lua's accepted, declined and soft
// capacity.
func (s *Sets) usages(ctx context.Context, op string, script *redis.Script, hs []string, us []limiter.Usage, args ...any) error {
	b, sup := s.base(), s.sup()
	width := absUsageLen
	if sup {
		width = supUsageLen
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
		if sup {
			us[i] = limiter.Usage{Used: y[0], Declined: y[1], Limit: y[2]}
		} else {
			us[i] = limiter.Usage{Used: y[0], Limit: y[1]}
		}
	}
	return nil
}
