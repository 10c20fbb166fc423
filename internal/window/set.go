package window

import (
	"fmt"

	"github.com/sluice-go/sluice/limiter"
)

// MaxSet is the most limits a set holds (limiter.NewSet's 8).
const MaxSet = 8

// expired returns s expired at now, or for a peek a view of it in *buf.
func expired(s, buf *State, now, span int64, peek bool) *State {
	if peek {
		*buf = s.view(now, span)
		return buf
	}
	s.Expire(now, span)
	return s
}

// Limit is one limit of a set decision (docs/algorithms.md, Sets of
// limits): its window and bucket, its (soft) capacity and its hard one.
type Limit struct {
	P          Params
	Soft, Hard int64
}

// IncAbsoluteSet decides an absolute Inc of n units (n = 0: a peek for one
// unit that writes nothing) on a set: states[i] is limit ls[i]'s state and
// rs[i] its part (Refused when it has no room, RetryAfter until it has).
// Admitted only if every limit has room; then n is recorded in every
// state, else in none. The set's decision is Combine(rs).
func IncAbsoluteSet(states []*State, ls []Limit, now, n int64, rs []Result) {
	cost := max(n, 1)
	var peek [MaxSet]State
	var st [MaxSet]*State
	allowed := true
	for i, s := range states {
		st[i] = expired(s, &peek[i], now, ls[i].P.Span(), n == 0)
		c := ls[i].Soft
		rs[i] = Result{Limit: c, Never: cost > c}
		if st[i].Used+cost > c {
			rs[i].Outcome, rs[i].Refused = OutcomeRejected, true
			allowed = false
		}
	}
	for i := range states {
		rs[i].Allowed = allowed
		st[i].absRecord(ls[i].P, now, n, cost, ls[i].Soft, rs[i].Refused, &rs[i])
	}
}

// IncSuppressedSet decides a suppressed Inc of n units on a set (n = 0: a
// peek that writes nothing). Each limit computes a single Inc's factor;
// the call is admitted when randPPM ≥ the largest, and the offer recorded
// in every limit (declined in all when refused). rs[i] is limit i's part:
// Refused when it alone would refuse with the same draw; RetryAfter, when
// the set refused, until limit i has room under its soft capacity.
func IncSuppressedSet(states []*State, ls []Limit, now, n, cacheMs, randPPM int64, rs []Result) {
	var peek [MaxSet]State
	var st [MaxSet]*State
	var in [MaxSet]Suppressed
	f := int64(0)
	for i, s := range states {
		l, r := &ls[i], &rs[i]
		st[i] = expired(s, &peek[i], now, l.P.Span(), n == 0)
		in[i] = Suppressed{Soft: l.Soft, Hard: l.Hard, CacheMs: cacheMs}
		st[i].supFactor(l.P, now, n, max(RecordedCost(n, l.Hard), 1), &in[i], r)
		r.Refused = randPPM < r.FactorPPM
		f = max(f, r.FactorPPM)
	}
	for i := range states {
		rs[i].Allowed = randPPM >= f
		n := RecordedCost(n, ls[i].Hard)
		st[i].supRecord(ls[i].P, now, n, max(n, 1), &in[i], &rs[i])
	}
}

// Combine returns the set's decision from its parts: the first refusing
// part's outcome, Never if any, the largest factor and RetryAfter (0 when
// Never), and Limit, Remaining and ResetAfter of the binding part, the
// first with the fewest units remaining.
func Combine(rs []Result) (set Result, binding int) {
	for i := range rs {
		r := &rs[i]
		if r.Remaining < rs[binding].Remaining {
			binding = i
		}
		if set.Outcome == OutcomeAllowed && r.Outcome != OutcomeAllowed {
			set.Outcome = r.Outcome
		}
		set.Never = set.Never || r.Never
		set.FactorPPM = max(set.FactorPPM, r.FactorPPM)
		set.RetryAfter = max(set.RetryAfter, r.RetryAfter)
	}
	b := &rs[binding]
	set.Allowed = b.Allowed
	set.Limit, set.Remaining, set.ResetAfter = b.Limit, b.Remaining, b.ResetAfter
	if set.Never {
		set.RetryAfter = 0
	}
	return set, binding
}

// SetDecision converts the parts of a decision on set into the public
// SetDecision (Combine gives the set's own decision).
func SetDecision(set *limiter.Set, rs []Result) limiter.SetDecision {
	r, _ := Combine(rs)
	d := limiter.SetDecision{Decision: r.Decision(), Limits: make([]limiter.LimitDecision, len(rs))}
	for i := range rs {
		p := &rs[i]
		d.Limits[i] = limiter.LimitDecision{
			Name:              set.At(i).Name,
			Limit:             p.Limit,
			Remaining:         p.Remaining,
			RetryAfter:        msDuration(p.RetryAfter),
			ResetAfter:        msDuration(p.ResetAfter),
			SuppressionFactor: factorOf(p.FactorPPM),
			Refused:           p.Refused,
			Never:             p.Never,
		}
	}
	return d
}

// SetLimits returns set's limits as the set functions take them, with
// hard capacities at factor (1 for absolute), into buf.
func SetLimits(set *limiter.Set, factor float64, buf *[MaxSet]Limit) ([]Limit, error) {
	ls := buf[:set.Len()]
	for i := range ls {
		l := set.At(i)
		c, _ := limiter.Capacity(l.Rate, l.Window) // NewSet checked it
		ls[i] = Limit{P: Params{W: l.Window.Milliseconds(), B: l.Bucket.Milliseconds()}, Soft: c, Hard: c}
		if factor != 1 {
			h, err := HardCapacity(l.Rate, l.Window, factor)
			if err != nil {
				return nil, fmt.Errorf("limit %q: %w", l.Name, err)
			}
			ls[i].Hard = h
		}
	}
	return ls, nil
}
