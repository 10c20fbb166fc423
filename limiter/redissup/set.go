package redissup

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-go/sluice/internal/redisx"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

var _ limiter.SetLimiter = (*Limiter)(nil)

// errSetReply is the error of a sup_set.lua reply that is not what the
// script answers.
var errSetReply = errors.New("malformed script reply")

// setArgs, per limit of a sup_set.lua call: W, B, S, H, n, TTL; and
// setReplyLen, per limit of its reply: outcome, refused, remaining, retry
// ms, reset ms, factor ppm.
const setArgs, setReplyLen = 6, 6

// setCall validates a call on set as the single calls are validated (the
// key and ErrClosed first, then the set, then n: redisx.Base.CheckSet),
// then each limit's hard capacity, and returns the hashes of set's limits
// and the limits, into lb.
func (l *Limiter) setCall(op, k string, set *limiter.Set, n int64, lb *[window.MaxSet]window.Limit) ([]string, []window.Limit, error) {
	hs, err := l.b.CheckSet(op, k, set, n)
	if err != nil {
		return nil, nil, err
	}
	ls, err := window.SetLimits(set, l.b.Cfg.HardLimitFactor, lb)
	if err != nil {
		return nil, nil, l.b.Errorf(op, err)
	}
	return hs, ls, nil
}

// incSet is IncSet's call to Redis: one sup_set.lua call, after one draw.
func (l *Limiter) incSet(ctx context.Context, op, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	var (
		lb [window.MaxSet]window.Limit
		rb [window.MaxSet]window.Result
	)
	keys, ls, err := l.setCall(op, k, set, n, &lb)
	if err != nil {
		return limiter.SetDecision{}, err
	}
	draw := window.DrawPPM(l.b.Cfg.Rand())
	args := make([]any, 3, 3+setArgs*len(ls))
	args[0], args[1], args[2] = redisx.NowArg(&l.b.Cfg), l.b.Cache, draw
	for i := range ls {
		p := &ls[i]
		args = append(args, p.P.W, p.P.B, p.Soft, p.Hard, window.RecordedCost(n, p.Hard), redisx.SetTTL(&l.b.Cfg, p))
	}
	v, err := l.b.Run(ctx, scripts.SupSet, keys, args...)
	if err != nil {
		return limiter.SetDecision{}, l.b.Errorf(op, err)
	}
	rs := rb[:len(ls)]
	if err := readSet(v, ls, n, draw, rs); err != nil {
		return limiter.SetDecision{}, l.b.Errorf(op, err)
	}
	return window.SetDecision(set, rs), nil
}

// readSet reads sup_set.lua's reply into rs: {allowed, then per limit
// outcome, refused, remaining, retry ms, reset ms, factor ppm}. Limit and
// Never come from the limits and n; a reply whose flags are not 0 or 1,
// whose outcome the strategy cannot return, whose factor is out of [0,
// PPM] or whose allowed and refused flags disagree with the draw is
// malformed.
func readSet(v any, ls []window.Limit, n, draw int64, rs []window.Result) error {
	arr, ok := v.([]any)
	if !ok {
		return fmt.Errorf("%w: %T", errSetReply, v)
	}
	if len(arr) != 1+setReplyLen*len(ls) {
		return fmt.Errorf("%w: %d values for %d limits", errSetReply, len(arr), len(ls))
	}
	var x [1 + setReplyLen*window.MaxSet]int64
	for i, e := range arr {
		if x[i], ok = e.(int64); !ok {
			return fmt.Errorf("%w: value %d is %T", errSetReply, i, e)
		}
	}
	allowed := x[0] == 1
	f := int64(0)
	for i := range ls {
		y := x[1+setReplyLen*i : 1+setReplyLen*(i+1)]
		if y[0] != window.OutcomeAllowed && y[0] != window.OutcomeSuppressed || y[1] != 0 && y[1] != 1 ||
			y[2] < 0 || y[3] < 0 || y[4] < 0 || y[5] < 0 || y[5] > window.PPM || (y[1] == 1) != (draw < y[5]) {
			return fmt.Errorf("%w: limit %d: %v", errSetReply, i, y)
		}
		f = max(f, y[5])
		rs[i] = window.Result{
			Outcome:    int(y[0]),
			Allowed:    allowed,
			Limit:      ls[i].Soft,
			Remaining:  y[2],
			RetryAfter: y[3],
			ResetAfter: y[4],
			FactorPPM:  y[5],
			Never:      max(n, 1) > ls[i].Hard,
			Refused:    y[1] == 1,
		}
	}
	if x[0] != 0 && x[0] != 1 || allowed != (draw >= f) {
		return fmt.Errorf("%w: allowed %d with factor %d and draw %d", errSetReply, x[0], f, draw)
	}
	return nil
}

// setUsageLen is the length of sup_set_get.lua's reply per limit.
const setUsageLen = 3

// getSet is GetSet's call to Redis: one sup_set_get.lua call.
func (l *Limiter) getSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	const op = "get set"
	var lb [window.MaxSet]window.Limit
	keys, ls, err := l.setCall(op, k, set, 0, &lb)
	if err != nil {
		return nil, err
	}
	args := make([]any, 1, 1+2*len(ls))
	args[0] = redisx.NowArg(&l.b.Cfg)
	for i := range ls {
		args = append(args, ls[i].P.W, ls[i].P.B)
	}
	v, err := l.b.Run(ctx, scripts.SupSetGet, keys, args...)
	if err != nil {
		return nil, l.b.Errorf(op, err)
	}
	x, err := redisx.Int64s(v, setUsageLen*len(ls))
	if err != nil {
		return nil, l.b.Errorf(op, err)
	}
	us := make([]limiter.Usage, len(ls))
	for i := range us {
		us[i] = limiter.Usage{Used: x[3*i], Declined: x[3*i+1], Limit: x[3*i+2]}
	}
	return us, nil
}

// resetSet is ResetSet's call to Redis: one UNLINK of every hash of set.
func (l *Limiter) resetSet(ctx context.Context, k string, set *limiter.Set) error {
	const op = "reset set"
	var lb [window.MaxSet]window.Limit
	keys, _, err := l.setCall(op, k, set, 0, &lb)
	if err != nil {
		return err
	}
	if err := l.b.Client.Unlink(ctx, keys...).Err(); err != nil {
		return l.b.Errorf(op, err)
	}
	return nil
}

// ValidateSet checks a set call for the policy (failover.SetBackend).
func (be *backend) ValidateSet(op, k string, set *limiter.Set, n int64) error {
	var lb [window.MaxSet]window.Limit
	_, _, err := (*Limiter)(be).setCall(op, k, set, n, &lb)
	return err
}

// DecideSet is the Redis call of an IncSet (n = 0: IsAllowedSet).
func (be *backend) DecideSet(ctx context.Context, op, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return (*Limiter)(be).incSet(ctx, op, k, set, n)
}

// UsageSet is the Redis call of a GetSet.
func (be *backend) UsageSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return (*Limiter)(be).getSet(ctx, k, set)
}

// UnlinkSet is the Redis call of a ResetSet.
func (be *backend) UnlinkSet(ctx context.Context, k string, set *limiter.Set) error {
	return (*Limiter)(be).resetSet(ctx, k, set)
}

// IncSet offers n units of key to every limit of set, in one script call
// that reads and writes one hash per limit (<prefix>:{<key>}:sup:h:<name>,
// all in the key's slot: docs/data-model.md). Each limit computes what a
// single Inc at its rate, window and bucket would: Allowed at or below its
// soft capacity, factor 1 above its hard capacity (Never when n exceeds
// it), else its own factor, cached in its own hash. The call is admitted
// when the draw is at or above the largest of the factors, so with the
// probability of the most suppressing limit, and the offer is recorded in
// every limit, as declined in every limit when refused. n = 0 is a peek
// for one unit that records nothing. Like Inc, every call with valid
// arguments that asks Redis or the local fallback draws exactly one
// number, before Redis is asked; a call is never retried. The call is
// bounded by WithTimeout and Redis failures are handled as for Inc: the
// local fallback decides sets too, and what it admits is not written back
// to Redis when Redis returns (docs/operations.md, When Redis fails).
func (l *Limiter) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return l.g.DecideSet(ctx, (*backend)(l), "inc set", k, set, n)
}

// IsAllowedSet reports whether one more unit of key would be admitted by
// every limit of set now: IncSet with n = 0, which writes nothing and
// draws a number.
func (l *Limiter) IsAllowedSet(ctx context.Context, k string, set *limiter.Set) (limiter.SetDecision, error) {
	return l.g.DecideSet(ctx, (*backend)(l), "is allowed set", k, set, 0)
}

// GetSet returns key's accepted (Used) and declined units in the live
// window of each limit of set, in the set's order, with each limit's
// stored soft capacity. It writes nothing. Redis failures are errors, as
// for Get.
func (l *Limiter) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return l.g.GetSet(ctx, (*backend)(l), k, set)
}

// ResetSet forgets key's state in every limit of set: one UNLINK of their
// hashes, and what the local fallback holds for them. The key's
// single-limit hash and the hashes of limits of other names stay. Redis
// failures are errors, as for Reset.
func (l *Limiter) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return l.g.ResetSet(ctx, (*backend)(l), k, set)
}
