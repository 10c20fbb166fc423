package redisprov

import (
	"errors"
	"fmt"

	"github.com/sluice-go/sluice/internal/window"
)

// decisionLen is the length of the decision at the head of sup_inc.lua's
// long replies.
const decisionLen = 8

// supArgs is the ARGV of a sup_inc.lua call. decl > 0 reports units
// declined from memory (hot-key relief) with the call, through the
// hybrid's arguments of the script, whose reply begins with the decision.
func supArgs(b *Base, soft, hard, n, draw, decl int64) []any {
	args := []any{NowArg(&b.Cfg), b.W, b.B, soft, hard, window.RecordedCost(n, hard), b.Cache, draw, b.TTL}
	if decl > 0 {
		args = append(args, 0, 0, 0, decl)
	}
	return args
}

// supUsageLen is the length of sup_get.lua's reply, and of
// sup_set_get.lua's per limit: accepted, declined, soft capacity.
const supUsageLen = 3

// errSetReply is the error of a sup_set.lua reply that is not what the
// script answers.
var errSetReply = errors.New("malformed script reply")

// setArgs, per limit of a sup_set.lua call: W, B, S, H, n, TTL; and
// setReplyLen, per limit of its reply: outcome, refused, remaining, retry
// ms, reset ms, factor ppm.
const setArgs, setReplyLen = 6, 6

// supSetArgs is the ARGV of a sup_set.lua call for n units on limits ls
// with the call's draw.
func supSetArgs(b *Base, ls []window.Limit, n, draw int64) []any {
	args := make([]any, 3, 3+setArgs*len(ls))
	args[0], args[1], args[2] = NowArg(&b.Cfg), b.Cache, draw
	for i := range ls {
		p := &ls[i]
		args = append(args, p.P.W, p.P.B, p.Soft, p.Hard, window.RecordedCost(n, p.Hard), SetTTL(&b.Cfg, p))
	}
	return args
}

// supReadSet reads sup_set.lua's reply into rs: {allowed, then per limit
// outcome, refused, remaining, retry ms, reset ms, factor ppm}. Limit and
// Never come from the limits and n; a reply whose flags are not 0 or 1,
// whose outcome the strategy cannot return, whose factor is out of [0,
// PPM] or whose allowed and refused flags disagree with the draw is
// malformed.
func supReadSet(v any, ls []window.Limit, n, draw int64, rs []window.Result) error {
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
