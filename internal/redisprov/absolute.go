package redisprov

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-go/sluice/internal/window"
)

// absUsageLen is the length of abs_get.lua's reply per hash: units
// admitted, capacity.
const absUsageLen = 2

// absSetArgs is the ARGV of an abs_set.lua call for n units on limits ls.
// A request over every capacity is refused whatever its size: the script
// sees the largest capacity + 1, so its numbers stay exact.
func absSetArgs(b *Base, ls []window.Limit, n int64) []any {
	top := int64(0)
	for _, x := range ls {
		top = max(top, x.Soft)
	}
	args := make([]any, 2, 2+4*len(ls))
	args[0], args[1] = NowArg(&b.Cfg), min(n, top+1)
	for i := range ls {
		args = append(args, ls[i].P.W, ls[i].P.B, ls[i].Soft, SetTTL(&b.Cfg, &ls[i]))
	}
	return args
}

// absReadSet reads abs_set.lua's reply into rs: a string of decimals,
// each followed by a space. An admission with fewer than 2^21 units
// remaining in every limit is one value per limit, remaining × 2^32 +
// reset ms (ShortShift, ShortMaxRemaining); any other decision is allowed, then per limit: refused,
// remaining, retry ms, reset ms. Limit and Never come from the limits and
// n.
func absReadSet(v any, ls []window.Limit, n int64, rs []window.Result) error {
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
			rs[i] = window.Result{Allowed: true, Limit: ls[i].Soft, Remaining: r >> ShortShift, ResetAfter: r & (1<<ShortShift - 1),
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
