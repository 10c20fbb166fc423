package window

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/sluice-go/sluice/limiter"
)

// setEntry is one key's states in the limits of sets, behind one lock so
// that a set is decided and recorded together. Like entry, it is marked
// dead under its lock before it leaves the map.
type setEntry struct {
	mu     sync.Mutex
	limits []*limitState
	dead   bool
}

// limitState is one limit's state, found by the limit's name, and the
// window and bucket it records. The sweep keeps it p.Span() after its
// newest bucket opened (plus store.slackMs).
type limitState struct {
	name string
	p    Params
	st   State
}

// find returns the limit called name, or nil.
func (e *setEntry) find(name string) *limitState {
	if e != nil {
		for _, l := range e.limits {
			if l.name == name {
				return l
			}
		}
	}
	return nil
}

// check compares a call's window and bucket p with the limit's: the same;
// or fresh, a state dead under its own window, which create restarts under
// p; or ErrWindowConflict while it is live.
func (l *limitState) check(p Params, now int64, create bool) (fresh bool, err error) {
	q := l.p
	if q == p {
		return false, nil
	}
	if st, ok := l.st.Newest(); ok && now-st < q.Span() {
		return false, fmt.Errorf("%w: limit %q: stored window %d ms, bucket %d ms; the call's window %d ms, bucket %d ms",
			limiter.ErrWindowConflict, l.name, q.W, q.B, p.W, p.B)
	}
	if create {
		l.st.Reset()
		l.p = p
	}
	return true, nil
}

// setArgs validates a set call and reads the clock.
func (s *store) setArgs(op, k string, set *limiter.Set, n int64) (now int64, err error) {
	if _, err := s.check(op, k); err != nil {
		return 0, err
	}
	if err := CheckSet(set); err != nil {
		return 0, errorf(op, err)
	}
	if err := CheckCost(n); err != nil {
		return 0, errorf("inc", err)
	}
	return s.now(), nil
}

// lockSet finds k's set entry and locks it, creating it when create is
// true; nil, holding nothing, when there is none and create is false.
func (s *store) lockSet(k string, create bool) *setEntry {
	for {
		v, ok := s.sets.Load(k)
		if !ok {
			if !create {
				return nil
			}
			v, _ = s.sets.LoadOrStore(k, &setEntry{})
		}
		e := v.(*setEntry)
		e.mu.Lock()
		if !e.dead {
			return e
		}
		e.mu.Unlock()
		s.sets.CompareAndDelete(k, e)
	}
}

// setStates returns the states of set's limits in e (nil for a peek at an
// unknown key), creating the missing ones when create is true; a peek reads
// a missing state as an empty one from buf.
func setStates(e *setEntry, ls []Limit, set *limiter.Set, now int64, create bool, out *[MaxSet]*State, buf *[MaxSet]State) ([]*State, error) {
	states := out[:len(ls)]
	// Check every limit first: a conflict leaves the key as it was.
	for i := range ls {
		if l := e.find(set.At(i).Name); l != nil {
			if _, err := l.check(ls[i].P, now, false); err != nil {
				return nil, err
			}
		}
	}
	for i := range ls {
		l := e.find(set.At(i).Name)
		switch {
		case l == nil && !create:
			states[i] = &buf[i]
			continue
		case l == nil:
			l = &limitState{name: set.At(i).Name, p: ls[i].P}
			e.limits = append(e.limits, l)
		}
		states[i] = &l.st
		if fresh, _ := l.check(ls[i].P, now, create); fresh && !create {
			states[i] = &buf[i] // a peek reads another window's dead state as absent
		}
	}
	return states, nil
}

// incSet decides an IncSet under k's set lock.
func (s *store) incSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	now, err := s.setArgs("inc set", k, set, n)
	if err != nil {
		return limiter.SetDecision{}, err
	}
	var lb [MaxSet]Limit
	ls, err := SetLimits(set, s.hardF, &lb) // hardF is 1 for absolute
	if err != nil {
		return limiter.SetDecision{}, errorf("inc set", err)
	}
	var (
		ptrs [MaxSet]*State
		buf  [MaxSet]State
		rb   [MaxSet]Result
	)
	rs := rb[:len(ls)]
	e := s.lockSet(k, n > 0)
	states, err := setStates(e, ls, set, now, n > 0, &ptrs, &buf)
	switch {
	case s.sup:
		draw := DrawPPM(s.cfg.Rand()) // drawn by a refused call too, as the Redis provider draws
		if err == nil {
			IncSuppressedSet(states, ls, now, n, s.cfg.CacheMs, draw, rs)
		}
	case err == nil:
		IncAbsoluteSet(states, ls, now, n, rs)
	}
	if e != nil {
		e.mu.Unlock()
	}
	if err != nil {
		return limiter.SetDecision{}, errorf("inc set", err)
	}
	d := SetDecision(set, rs)
	if s.obs != nil {
		s.observe(ctx, OpIncSet, k, n, d.Decision, d.Limits)
	}
	return d, nil
}

// getSet reads k's usage in each limit of set.
func (s *store) getSet(k string, set *limiter.Set) ([]limiter.Usage, error) {
	now, err := s.setArgs("get set", k, set, 0)
	if err != nil {
		return nil, err
	}
	var (
		lb   [MaxSet]Limit
		ptrs [MaxSet]*State
		buf  [MaxSet]State
	)
	ls, _ := SetLimits(set, 1, &lb)
	us := make([]limiter.Usage, len(ls))
	e := s.lockSet(k, false)
	if e == nil {
		return us, nil
	}
	defer e.mu.Unlock()
	states, err := setStates(e, ls, set, now, false, &ptrs, &buf)
	if err != nil {
		return nil, errorf("get set", err)
	}
	for i, st := range states {
		used, declined, c := st.Usage(ls[i].P, now)
		us[i] = limiter.Usage{Used: used, Declined: declined, Limit: c}
	}
	return us, nil
}

// resetSet forgets k's state in every limit of set.
func (s *store) resetSet(k string, set *limiter.Set) error {
	if _, err := s.setArgs("reset set", k, set, 0); err != nil {
		return err
	}
	if e := s.lockSet(k, false); e != nil {
		s.prune(k, e, func(l *limitState) bool {
			for i := 0; i < set.Len(); i++ {
				if set.At(i).Name == l.name {
					return true
				}
			}
			return false
		})
	}
	return nil
}

// prune drops the limits of the locked e that drop reports, and e itself
// when none is left, and unlocks it.
func (s *store) prune(k any, e *setEntry, drop func(*limitState) bool) bool {
	e.limits = slices.DeleteFunc(e.limits, drop)
	e.dead = len(e.limits) == 0
	gone := e.dead
	e.mu.Unlock()
	if gone {
		s.sets.CompareAndDelete(k, e)
	}
	return gone
}

// sweepSets drops the limits' states past their keep time, and keys left
// with none, as sweep does.
func (s *store) sweepSets() int {
	dropped, seen := 0, 0
	s.sets.Range(func(k, v any) bool {
		e := v.(*setEntry)
		e.mu.Lock()
		if e.dead {
			e.mu.Unlock()
		} else if s.prune(k, e, func(l *limitState) bool {
			st, ok := l.st.Newest()
			return gone(s.now(), st, ok, l.p.Span()+s.slackMs)
		}) {
			dropped++
		}
		if seen++; seen%sweepChunk == 0 {
			runtime.Gosched()
		}
		return true
	})
	return dropped
}
