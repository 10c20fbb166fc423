package redisabs

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-go/sluice/internal/redisx"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

var _ limiter.SetLimiter = (*Limiter)(nil)

// IncSet admits n units of key if every limit of set has room for them,
// and then records them in every limit; a refusal records nothing. n = 0
// decides for one unit and records nothing. It costs one script call over
// one hash per limit (all in the key's hash slot), bounded by WithTimeout,
// and Redis failures are handled as for Inc; the local fallback decides
// sets too.
func (l *Limiter) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return l.g.DecideSet(ctx, (*backend)(l), "inc set", k, set, n)
}

// IsAllowedSet reports whether one more unit of key would be admitted by
// every limit of set now: IncSet with n = 0.
func (l *Limiter) IsAllowedSet(ctx context.Context, k string, set *limiter.Set) (limiter.SetDecision, error) {
	return l.g.DecideSet(ctx, (*backend)(l), "is allowed set", k, set, 0)
}

// GetSet returns key's usage in each limit of set, in the set's order.
// Redis failures are errors, as for Get.
func (l *Limiter) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return l.g.GetSet(ctx, (*backend)(l), k, set)
}

// ResetSet forgets key's state in every limit of set: one UNLINK of the
// set's hashes. Redis failures are errors, as for Reset.
func (l *Limiter) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return l.g.ResetSet(ctx, (*backend)(l), k, set)
}

// ValidateSet checks a set call for the policy.
func (be *backend) ValidateSet(op, k string, set *limiter.Set, n int64) error {
	_, err := (*Limiter)(be).b.CheckSet(op, k, set, n)
	return err
}

// DecideSet is the Redis call of an IncSet: abs_set.lua.
func (be *backend) DecideSet(ctx context.Context, op, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	l := (*Limiter)(be)
	hs, err := l.b.CheckSet(op, k, set, n)
	if err != nil {
		return limiter.SetDecision{}, err
	}
	var lb [window.MaxSet]window.Limit
	ls, _ := window.SetLimits(set, 1, &lb)
	// A request over every capacity is refused whatever its size: the
	// script sees the largest capacity + 1, so its numbers stay exact.
	top := int64(0)
	for _, x := range ls {
		top = max(top, x.Soft)
	}
	sent := min(n, top+1)
	args := make([]any, 2, 2+4*len(ls))
	args[0], args[1] = redisx.NowArg(&l.b.Cfg), sent
	for i := range ls {
		args = append(args, ls[i].P.W, ls[i].P.B, ls[i].Soft, redisx.SetTTL(&l.b.Cfg, &ls[i]))
	}
	v, err := l.b.Run(ctx, scripts.AbsSet, hs, args...)
	if err != nil {
		return limiter.SetDecision{}, l.b.Errorf(op, err)
	}
	var rb [window.MaxSet]window.Result
	rs := rb[:len(ls)]
	if err := readSet(v, ls, n, rs); err != nil {
		return limiter.SetDecision{}, l.b.Errorf(op, err)
	}
	return window.SetDecision(set, rs), nil
}

// readSet reads abs_set.lua's reply into rs: a string of decimals, each
// followed by a space. An admission with fewer than 2^21 units remaining
// in every limit is one value per limit, remaining × 2^32 + reset ms; any
// other decision is allowed, then per limit: refused, remaining, retry
// ms, reset ms. Limit and Never come from the limits and n.
func readSet(v any, ls []window.Limit, n int64, rs []window.Result) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("malformed script reply %T", v)
	}
	var xb [1 + 4*window.MaxSet]int64
	x := xb[:0]
	for s != "" && len(x) < len(xb) {
		d, rest, ok := strings.Cut(s, " ")
		r, err := strconv.ParseInt(d, 10, 64)
		if !ok || err != nil || r < 0 {
			return fmt.Errorf("malformed script reply %q", v)
		}
		x, s = append(x, r), rest
	}
	cost := max(n, 1)
	switch {
	case s != "":
	case len(x) == len(ls):
		for i, r := range x {
			rs[i] = window.Result{Allowed: true, Limit: ls[i].Soft, Remaining: r >> 32, ResetAfter: r & (1<<32 - 1),
				Never: cost > ls[i].Soft}
		}
		return nil
	case len(x) == 1+4*len(ls) && (x[0] == 0 || x[0] == 1):
		for i := range rs {
			p := x[1+4*i:]
			if p[0] != 0 && p[0] != 1 {
				return fmt.Errorf("malformed script reply %q", v)
			}
			r := &rs[i]
			*r = window.Result{Allowed: x[0] == 1, Limit: ls[i].Soft, Remaining: p[1], RetryAfter: p[2], ResetAfter: p[3],
				Never: cost > ls[i].Soft, Refused: p[0] == 1}
			if r.Refused {
				r.Outcome = window.OutcomeRejected
			}
		}
		return nil
	}
	return fmt.Errorf("malformed script reply %q for %d limits", v, len(ls))
}

// UsageSet is the Redis call of a GetSet: abs_get.lua over the set's
// hashes.
func (be *backend) UsageSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	l := (*Limiter)(be)
	hs, err := l.b.CheckSet("get set", k, set, 0)
	if err != nil {
		return nil, err
	}
	args := make([]any, 1, 1+2*set.Len())
	args[0] = redisx.NowArg(&l.b.Cfg)
	for i := 0; i < set.Len(); i++ {
		x := set.At(i)
		args = append(args, x.Window.Milliseconds(), x.Bucket.Milliseconds())
	}
	v, err := l.b.Run(ctx, scripts.AbsGet, hs, args...)
	if err != nil {
		return nil, l.b.Errorf("get set", err)
	}
	x, err := redisx.Int64s(v, 2*set.Len())
	if err != nil {
		return nil, l.b.Errorf("get set", err)
	}
	us := make([]limiter.Usage, set.Len())
	for i := range us {
		us[i] = limiter.Usage{Used: x[2*i], Limit: x[2*i+1]}
	}
	return us, nil
}

// UnlinkSet is the Redis call of a ResetSet.
func (be *backend) UnlinkSet(ctx context.Context, k string, set *limiter.Set) error {
	l := (*Limiter)(be)
	hs, err := l.b.CheckSet("reset set", k, set, 0)
	if err != nil {
		return err
	}
	if err := l.b.Client.Unlink(ctx, hs...).Err(); err != nil {
		return l.b.Errorf("reset set", err)
	}
	return nil
}
