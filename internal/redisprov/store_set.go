package redisprov

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// CheckSet validates a call on a set as Check does a single limit's, then
// the set and the cost n (0 for calls without one), and returns the hash
// of each limit, in the set's order.
func (b *Base) CheckSet(op, k string, set *limiter.Set, n int64) ([]string, error) {
	if _, err := b.Check(op, k); err != nil {
		return nil, err
	}
	if err := window.CheckSet(set); err != nil {
		return nil, b.Errorf(op, err)
	}
	if err := window.CheckCost(n); err != nil {
		return nil, b.Errorf(op, err)
	}
	hs := make([]string, set.Len())
	for i := range hs {
		h, err := key.LimitName(b.Cfg.Prefix, k, b.strat, set.At(i).Name)
		if err != nil {
			return nil, b.Errorf(op, err)
		}
		hs[i] = h
	}
	return hs, nil
}

// SetTTL is the PEXPIRE of a write to limit l's hash: TTLMs for l's
// window.
func SetTTL(cfg *window.Config, l *window.Limit) int64 {
	ttl := l.P.Span()
	if cfg.ClockSet {
		ttl += ClockSlackMs
	}
	return ttl
}

// setArgv is the ARGV of an abs_set.lua or sup_set.lua call of n units on
// limits ls with the call's draw; wb: the write-back's (WriteBack), which
// records n whatever the limits hold. Else an absolute request over every
// capacity is refused whatever its size: the script sees the largest + 1.
func setArgv(b *Base, ls []window.Limit, n, draw int64, wb bool) []any {
	args := make([]any, 0, 4+6*len(ls))
	switch {
	case b.sup:
		args = append(args, NowArg(&b.Cfg), b.Cache, draw)
	case wb:
		args = append(args, NowArg(&b.Cfg), n)
	default:
		top := int64(0)
		for i := range ls {
			top = max(top, ls[i].Soft)
		}
		args = append(args, NowArg(&b.Cfg), min(n, top+1))
	}
	for i := range ls {
		l := &ls[i]
		args = append(args, l.P.W, l.P.B, l.Soft)
		if b.sup && wb {
			args = append(args, l.Hard, n)
		} else if b.sup {
			args = append(args, l.Hard, window.RecordedCost(n, l.Hard))
		}
		args = append(args, SetTTL(&b.Cfg, l))
	}
	if wb {
		args = append(args, WriteBack)
	}
	return args
}

// absReadSet reads abs_set.lua's reply into rs, a string of decimals each
// followed by a space: per limit remaining × 2^ShortShift + reset ms for
// an admission with fewer than ShortMaxRemaining remaining in every
// limit, else allowed, then per limit refused, remaining, retry ms, reset
// ms. Limit and Never come from the limits and n.
func absReadSet(v any, ls []window.Limit, n int64, rs []window.Result) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("%w: %T", errReply, v)
	}
	var xb [1 + 4*window.MaxSet]int64
	x := xb[:0]
	for s != "" && len(x) < len(xb) {
		d, rest, ok := strings.Cut(s, " ")
		r, err := strconv.ParseInt(d, 10, 64)
		if !ok || err != nil || r < 0 {
			return fmt.Errorf("%w: %q", errReply, v)
		}
		x, s = append(x, r), rest
	}
	cost := max(n, 1)
	switch {
	case s != "":
	case len(x) == len(ls):
		for i, r := range x {
			rs[i] = window.Result{Allowed: true, Limit: ls[i].Soft, Remaining: r >> ShortShift, ResetAfter: r & mask(ShortShift),
				Never: cost > ls[i].Soft}
		}
		return nil
	case len(x) == 1+4*len(ls) && (x[0] == 0 || x[0] == 1):
		for i := range rs {
			p := x[1+4*i:]
			if p[0] != 0 && p[0] != 1 {
				return fmt.Errorf("%w: %q", errReply, v)
			}
			rs[i] = window.Result{Allowed: x[0] == 1, Limit: ls[i].Soft, Remaining: p[1], RetryAfter: p[2], ResetAfter: p[3],
				Never: cost > ls[i].Soft, Refused: p[0] == 1}
			if p[0] == 1 {
				rs[i].Outcome = window.OutcomeRejected
			}
		}
		return nil
	}
	return fmt.Errorf("%w: %q for %d limits", errReply, v, len(ls))
}

// supReadSet reads sup_set.lua's reply into rs: {allowed, then per limit
// outcome, refused, remaining, retry ms, reset ms, factor ppm}, checked
// for flags of 0 or 1 that agree with the draw, known outcomes and factors
// in [0, PPM]. Limit and Never come from the limits and n.
func supReadSet(v any, ls []window.Limit, n, draw int64, rs []window.Result) error {
	const width = 6
	arr, ok := v.([]any)
	if !ok {
		return fmt.Errorf("%w: %T", errReply, v)
	}
	if len(arr) != 1+width*len(ls) {
		return fmt.Errorf("%w: %d values for %d limits", errReply, len(arr), len(ls))
	}
	var x [1 + width*window.MaxSet]int64
	for i, e := range arr {
		if x[i], ok = e.(int64); !ok {
			return fmt.Errorf("%w: value %d is %T", errReply, i, e)
		}
	}
	allowed := x[0] == 1
	f := int64(0)
	for i := range ls {
		y := x[1+width*i : 1+width*(i+1)]
		if y[0] != window.OutcomeAllowed && y[0] != window.OutcomeSuppressed || y[1] != 0 && y[1] != 1 ||
			y[2] < 0 || y[3] < 0 || y[4] < 0 || y[5] < 0 || y[5] > window.PPM || (y[1] == 1) != (draw < y[5]) {
			return fmt.Errorf("%w: limit %d: %v", errReply, i, y)
		}
		f = max(f, y[5])
		rs[i] = window.Result{Outcome: int(y[0]), Allowed: allowed, Limit: ls[i].Soft, Remaining: y[2],
			RetryAfter: y[3], ResetAfter: y[4], FactorPPM: y[5], Never: max(n, 1) > ls[i].Hard, Refused: y[1] == 1}
	}
	if x[0] != 0 && x[0] != 1 || allowed != (draw >= f) {
		return fmt.Errorf("%w: allowed %d with factor %d and draw %d", errReply, x[0], f, draw)
	}
	return nil
}
