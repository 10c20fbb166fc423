// Package window is the reference sliding window (docs/algorithms.md) on
// one key's state (window.go, set.go), which the Redis scripts mirror, and
// the in-process store around it (local*.go, keymap.go) that package local
// faces and the Redis providers fall back on. Times are whole milliseconds.
package window

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// PPM is one in parts per million: factors and random draws cross to Redis
// as integers in [0, PPM].
const PPM = 1_000_000

// Bucket is a run of calls coalesced from Start (ms).
type Bucket struct {
	Start    int64
	Count    int64 // units recorded (absolute: admitted; suppressed: observed)
	Declined int64 // suppressed: units refused
}

// State is one key's buckets and meta data. The zero value is an empty key;
// a State is not safe for concurrent use.
type State struct {
	ring       []Bucket // ring buffer, len is a power of two or 0
	head, size int32    // oldest at ring[head]; int32 keeps a local entry in two cache lines

	Used     int64 // sum of Count over stored buckets
	Capacity int64 // stored capacity (soft for suppressed); meaningful while Live
	Declined int64 // sum of Declined over stored buckets
	Hard     int64 // stored hard capacity (suppressed)

	factorAt  int64
	factorPPM int32 // ≤ PPM
	factorOK  bool
}

// Live reports whether the key holds a bucket (after Expire).
func (s *State) Live() bool { return s.size > 0 }

// At returns the i-th stored bucket, oldest first.
func (s *State) At(i int) Bucket { return s.ring[(int(s.head)+i)&(len(s.ring)-1)] }

func (s *State) newest() *Bucket { return &s.ring[int(s.head+s.size-1)&(len(s.ring)-1)] }

// Newest returns the start of the newest bucket; ok is false when empty.
func (s *State) Newest() (start int64, ok bool) {
	if s.size == 0 {
		return 0, false
	}
	return s.newest().Start, true
}

// Expire drops the buckets no longer live at now (now − start ≥ span), and
// the whole key when FromFuture; a key left empty forgets its capacities
// and factor. It writes no ring slot, so a copy can be expired (view).
func (s *State) Expire(now, span int64) {
	if s.size > 0 && FromFuture(now, s.newest().Start, span) {
		*s = State{ring: s.ring}
		return
	}
	for s.size > 0 {
		b := &s.ring[s.head]
		if now-b.Start < span {
			return
		}
		s.Used -= b.Count
		s.Declined -= b.Declined
		s.head = (s.head + 1) & int32(len(s.ring)-1)
		s.size--
	}
	*s = State{ring: s.ring}
}

// FromFuture reports whether a key whose newest bucket starts at newest is
// dead at now: it starts span or more after now, written under a clock
// that has since stepped back (docs/algorithms.md, Clocks that jump).
func FromFuture(now, newest, span int64) bool { return newest-now >= span }

// view returns a copy of s expired at now for reads, which never drop a
// bucket (as the scripts' reads). It shares s's ring: do not write it.
func (s *State) view(now, span int64) State {
	v := *s
	v.Expire(now, span)
	return v
}

// Usage returns the units accepted and declined over the buckets live at
// now, and the stored capacity (0 for a key with none).
func (s *State) Usage(p Params, now int64) (accepted, declined, capacity int64) {
	v := s.view(now, p.Span())
	if !v.Live() {
		return 0, 0, 0
	}
	return v.Used - v.Declined, v.Declined, v.Capacity
}

// Reset empties the state, keeping its memory.
func (s *State) Reset() { *s = State{ring: s.ring} }

// record adds count (and declined) at now, coalescing into the newest bucket
// when now − newest.start < b.
func (s *State) record(now, b, count, declined int64) {
	s.Used += count
	s.Declined += declined
	if s.size > 0 {
		if nb := s.newest(); now-nb.Start < b {
			nb.Count += count
			nb.Declined += declined
			return
		}
	}
	if int(s.size) == len(s.ring) {
		s.grow()
	}
	s.ring[int(s.head+s.size)&(len(s.ring)-1)] = Bucket{Start: now, Count: count, Declined: declined}
	s.size++
}

func (s *State) grow() {
	n := len(s.ring) * 2
	if n == 0 {
		n = 4
	}
	r := make([]Bucket, n)
	for i := 0; i < int(s.size); i++ {
		r[i] = s.At(i)
	}
	s.ring, s.head = r, 0
}

// retryAfter returns how long until the expiry of the oldest bucket that
// lets cost fit in capacity (or frees every held unit). accepted counts
// Count − Declined (suppressed) instead of Count.
func (s *State) retryAfter(now, span, held, cost, capacity int64, accepted bool) int64 {
	freed := int64(0)
	for i := 0; i < int(s.size); i++ {
		b := s.At(i)
		u := b.Count
		if accepted {
			u -= b.Declined
		}
		if u == 0 {
			continue
		}
		freed += u
		if held-freed+cost <= capacity || freed >= held {
			return b.Start + span - now
		}
	}
	return 0
}

// resetAfter is the time until the newest bucket dies: newest + span − now.
func (s *State) resetAfter(now, span int64) int64 {
	if st, ok := s.Newest(); ok {
		return st + span - now
	}
	return 0
}

// Result is a decision in integer milliseconds (Decision converts it).
type Result struct {
	Outcome    int // OutcomeAllowed, OutcomeRejected or OutcomeSuppressed
	Allowed    bool
	Limit      int64
	Remaining  int64
	RetryAfter int64 // ms
	ResetAfter int64 // ms
	FactorPPM  int64
	Never      bool
	Refused    bool // set decisions: this limit refused the call
}

// admit writes an admission into r field by field: a composite literal
// costs a store-forwarding stall.
func (r *Result) admit(limit, remaining, reset int64, never bool) {
	*r = Result{}
	r.Allowed, r.Limit, r.Remaining, r.ResetAfter, r.Never = true, limit, remaining, reset, never
}

// Outcome values as the scripts return them.
const (
	OutcomeAllowed    = 0
	OutcomeRejected   = 1
	OutcomeSuppressed = 2
)

// Params are a limiter's window W and bucket B in ms.
type Params struct{ W, B int64 }

// Span is W + B, how long a bucket lives, so each unit is held at least W
// (docs/algorithms.md, The window guarantee).
func (p Params) Span() int64 { return p.W + p.B }

// IncAbsolute decides an absolute Inc of n units (n = 0: a peek for one
// unit that writes nothing) at capacity c into r (an out parameter, as for
// admit). n > c is refused with Never set and records nothing.
func (s *State) IncAbsolute(p Params, now, c, n int64, r *Result) {
	if n == 0 {
		v := s.view(now, p.Span())
		v.incAbsolute(p, now, c, 0, r)
		return
	}
	s.Expire(now, p.Span())
	s.incAbsolute(p, now, c, n, r)
}

// incAbsolute decides on a state already expired at now.
func (s *State) incAbsolute(p Params, now, c, n int64, r *Result) {
	span := p.Span()
	cost := max(n, 1)
	never := cost > c
	if !never && s.Used+cost <= c {
		if n > 0 {
			s.record(now, p.B, n, 0)
			s.Capacity = c
		}
		r.admit(c, c-s.Used, s.resetAfter(now, span), false)
		return
	}
	*r = Result{Outcome: OutcomeRejected, Limit: c, Never: never}
	s.absRecord(p, now, n, cost, c, true, r)
}

// absRecord records n (n = 0: nothing) when r is allowed at capacity c,
// and fills r's counts; refused asks for r's RetryAfter.
func (s *State) absRecord(p Params, now, n, cost, c int64, refused bool, r *Result) {
	span := p.Span()
	if n > 0 {
		if r.Allowed {
			s.record(now, p.B, n, 0)
			s.Capacity = c
		} else if s.Live() {
			s.Capacity = c // the latest rate wins, even on a refusal
		}
	}
	r.Remaining = max(c-s.Used, 0)
	if refused && !r.Never {
		r.RetryAfter = s.retryAfter(now, span, s.Used, cost, c, false)
	}
	r.ResetAfter = s.resetAfter(now, span)
}

// IsAllowedAbsolute answers for one unit at the stored capacity, allowed
// for a key with no live bucket. It writes nothing.
func (s *State) IsAllowedAbsolute(p Params, now int64) Result {
	span := p.Span()
	v := s.view(now, span)
	if !v.Live() {
		return Result{Allowed: true}
	}
	c := v.Capacity
	r := Result{Limit: c, Remaining: max(c-v.Used, 0), ResetAfter: v.resetAfter(now, span)}
	if v.Used+1 <= c {
		r.Allowed = true
		return r
	}
	r.Outcome = OutcomeRejected
	r.RetryAfter = v.retryAfter(now, span, v.Used, 1, c, false)
	return r
}

// Suppressed holds the per-call inputs of the suppressed strategy.
type Suppressed struct {
	Soft, Hard int64
	CacheMs    int64
	RandPPM    int64 // the call's draw, floor(r × 1e6) in [0, 999999], or DrawWhenNeeded
}

// DrawWhenNeeded as Suppressed.RandPPM draws from math/rand/v2 only when a
// factor decides the call (the local default).
const DrawWhenNeeded = -1

// DrawPPM turns a draw in [0, 1) into parts per million.
func DrawPPM(r float64) int64 {
	v := int64(r * PPM)
	return min(max(v, 0), PPM-1)
}

// FactorPPM is the suppression factor in ppm of a key that observed
// observed units in its window of w ms, recent of them in the last
// R = min(w, 1 s), at soft capacity soft: clamp(1 − (soft/W)/perceived, 0, 1)
// with perceived = max(observed/W, recent/R), rounded to the nearest ppm.
// It computes 1 − soft·R / max(observed·R, recent·W) so that Go and Lua,
// both on IEEE doubles, get the very same bits.
func FactorPPM(observed, recent, w, soft int64) int64 {
	r := min(w, 1000)
	a := float64(observed) * float64(r)
	bb := float64(recent) * float64(w)
	m := math.Max(a, bb)
	if m <= 0 {
		return 0
	}
	f := 1 - float64(soft)*float64(r)/m
	ppm := math.Floor(float64(f*PPM) + 0.5)
	return int64(min(max(ppm, 0), PPM))
}

// factor returns the cached factor while fresh, else computes it from the
// units observed in the last min(W, 1 s) and caches it when store is set.
func (s *State) factor(p Params, now int64, in Suppressed, store bool) int64 {
	if s.factorOK && in.CacheMs > 0 && now-s.factorAt < in.CacheMs {
		return int64(s.factorPPM)
	}
	recent, r := int64(0), min(p.W, 1000)
	for i := int(s.size) - 1; i >= 0 && now-s.At(i).Start < r; i-- {
		recent += s.At(i).Count
	}
	f := FactorPPM(s.Used, recent, p.W, in.Soft)
	if store && in.CacheMs > 0 {
		s.factorPPM, s.factorAt, s.factorOK = int32(f), now, true
	}
	return f
}

// MaxDeclined bounds the declined units a key records (a refusal records
// min(n, max(1, MaxDeclined − declined))): totals stay exact in a double.
const MaxDeclined = int64(1) << 52

// RecordedCost is what a suppressed Inc records for n units: n, or hard + 1
// when n > hard, so one huge cost cannot fix the key's factor for a window.
func RecordedCost(n, hard int64) int64 {
	if n > hard {
		return hard + 1
	}
	return n
}

// IncSuppressed decides a suppressed Inc of n units (n = 0: a peek that
// writes nothing) into r. n > in.Hard is refused with Never set and
// recorded as RecordedCost says.
func (s *State) IncSuppressed(p Params, now, n int64, in *Suppressed, r *Result) {
	if n == 0 {
		v := s.view(now, p.Span())
		v.incSuppressed(p, now, 0, in, r)
		return
	}
	s.Expire(now, p.Span())
	s.incSuppressed(p, now, RecordedCost(n, in.Hard), in, r)
}

// incSuppressed decides on a state already expired at now: under the soft
// capacity here, above it in suppress.
func (s *State) incSuppressed(p Params, now, n int64, in *Suppressed, r *Result) {
	cost := max(n, 1)
	if s.Used-s.Declined+cost > in.Soft {
		s.suppress(p, now, n, cost, in, r)
		return
	}
	if n > 0 {
		s.record(now, p.B, n, 0)
		s.Capacity, s.Hard = in.Soft, in.Hard
	}
	r.admit(in.Soft, in.Soft-(s.Used-s.Declined), s.resetAfter(now, p.Span()), cost > in.Hard)
}

// suppress decides a call over the soft capacity: refused above the hard
// capacity, else admitted with probability 1 − f.
func (s *State) suppress(p Params, now, n, cost int64, in *Suppressed, r *Result) {
	s.supFactor(p, now, n, cost, in, r)
	if s.Used-s.Declined+cost <= in.Hard {
		draw := in.RandPPM
		if draw == DrawWhenNeeded {
			draw = DrawPPM(rand.Float64())
		}
		r.Allowed = draw >= r.FactorPPM
	}
	s.supRecord(p, now, n, cost, in, r)
}

// supFactor starts a set limit's r for an offer of cost units (n
// recorded): no factor at or under the soft capacity, PPM above the hard
// one, else the key's.
func (s *State) supFactor(p Params, now, n, cost int64, in *Suppressed, r *Result) {
	*r = Result{Limit: in.Soft, Never: cost > in.Hard}
	switch forecast := s.Used - s.Declined + cost; {
	case forecast <= in.Soft:
	case forecast > in.Hard:
		r.Outcome, r.FactorPPM = OutcomeSuppressed, PPM
	default:
		r.Outcome, r.FactorPPM = OutcomeSuppressed, s.factor(p, now, *in, n > 0)
	}
}

// supRecord records a set limit's offer of n units (n = 0: nothing),
// declined unless r is allowed, and fills r's counts.
func (s *State) supRecord(p Params, now, n, cost int64, in *Suppressed, r *Result) {
	span := p.Span()
	if n > 0 {
		count, declined := n, int64(0)
		if !r.Allowed {
			count = min(n, max(1, MaxDeclined-s.Declined))
			declined = count
		}
		s.record(now, p.B, count, declined)
		s.Capacity, s.Hard = in.Soft, in.Hard
	}
	accepted := s.Used - s.Declined
	r.Remaining = max(in.Soft-accepted, 0)
	if !r.Allowed && !r.Never && accepted+cost > in.Soft {
		r.RetryAfter = s.retryAfter(now, span, accepted, cost, in.Soft, true)
	}
	r.ResetAfter = s.resetAfter(now, span)
}

// IsAllowedSuppressed answers whether one more unit would be admitted
// without suppression at the stored capacities; above the soft capacity it
// reports the factor an Inc would apply. It writes nothing.
func (s *State) IsAllowedSuppressed(p Params, now, cacheMs int64) Result {
	span := p.Span()
	v := s.view(now, span)
	if !v.Live() {
		return Result{Allowed: true}
	}
	accepted := v.Used - v.Declined
	r := Result{Limit: v.Capacity, Remaining: max(v.Capacity-accepted, 0), ResetAfter: v.resetAfter(now, span)}
	switch {
	case accepted+1 <= v.Capacity:
		r.Allowed = true
		return r
	case accepted+1 > v.Hard:
		r.FactorPPM = PPM
	default:
		r.FactorPPM = v.factor(p, now, Suppressed{Soft: v.Capacity, Hard: v.Hard, CacheMs: cacheMs}, false)
	}
	r.Outcome = OutcomeSuppressed
	r.RetryAfter = v.retryAfter(now, span, accepted, 1, v.Capacity, true)
	return r
}

// Decision converts r into the public Decision.
func (r *Result) Decision() limiter.Decision {
	return limiter.Decision{
		Allowed:           r.Allowed,
		Suppressed:        r.Outcome == OutcomeSuppressed,
		Limit:             r.Limit,
		Remaining:         r.Remaining,
		RetryAfter:        msDuration(r.RetryAfter),
		ResetAfter:        msDuration(r.ResetAfter),
		SuppressionFactor: factorOf(r.FactorPPM),
		Never:             r.Never,
	}
}

// factorOf converts a factor in ppm to [0, 1], without the division for 0.
func factorOf(ppm int64) float64 {
	if ppm == 0 {
		return 0
	}
	return float64(ppm) / PPM
}

// msDuration converts ms to a Duration, saturating at the longest one.
func msDuration(ms int64) time.Duration {
	return time.Duration(min(ms, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
}
