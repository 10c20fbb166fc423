package window

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/sluice-go/sluice/limiter"
)

// setEntry is one key's states in the limits of sets, by limit name,
// behind one lock so a set is decided and recorded together. keepMs[i] is
// how long the sweep keeps states[i] after its newest bucket; params[i]
// its window and bucket (another while live is ErrWindowConflict). Like
// entry, it is marked dead under its lock before it leaves the map.
type setEntry struct {
	mu     sync.Mutex
	names  []string
	states []*State
	keepMs []int64
	params []Params
	dead   bool
}

// recorded checks a call's window and bucket p against the j-th limit's:
// the same; or fresh, a state dead under its own window, which create
// restarts under p; or ErrWindowConflict while it is live.
func (e *setEntry) recorded(j int, p Params, now int64, create bool) (fresh bool, err error) {
	q := e.params[j]
	if q == p {
		return false, nil
	}
	if st, ok := e.states[j].Newest(); ok && now-st < q.Span() {
		return false, fmt.Errorf("%w: limit %q: stored window %d ms, bucket %d ms; the call's window %d ms, bucket %d ms",
			limiter.ErrWindowConflict, e.names[j], q.W, q.B, p.W, p.B)
	}
	if create {
		e.states[j].Reset()
		e.params[j] = p
	}
	return true, nil
}

// find returns the index of the limit called name, or -1.
func (e *setEntry) find(name string) int {
	for i, n := range e.names {
		if n == name {
			return i
		}
	}
	return -1
}

// setArgs validates a set call and reads the clock.
func (s *store) setArgs(op, k string, set *limiter.Set, n int64) (now int64, err error) {
	if _, err := s.check(op, k); err != nil {
		return 0, err
	}
	if err := CheckSet(set); err != nil {
		return 0, fmt.Errorf("local: %s: %w", op, err)
	}
	if err := checkCost(n); err != nil {
		return 0, err
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

// setStates returns the states of set's limits in e (e may be nil for a
// peek), creating the missing ones when create is true; a missing state of
// a peek is an empty one from buf.
func (s *store) setStates(e *setEntry, ls []Limit, set *limiter.Set, now int64, create bool, out *[MaxSet]*State, buf *[MaxSet]State) ([]*State, error) {
	states := out[:len(ls)]
	// Check every limit first: a conflict leaves the key as it was.
	for i := range ls {
		if e == nil {
			break
		}
		if j := e.find(set.At(i).Name); j >= 0 {
			if _, err := e.recorded(j, ls[i].P, now, false); err != nil {
				return nil, err
			}
		}
	}
	for i := range ls {
		name := set.At(i).Name
		j := -1
		if e != nil {
			j = e.find(name)
		}
		switch {
		case j >= 0:
			states[i] = e.states[j]
			if fresh, _ := e.recorded(j, ls[i].P, now, create); fresh && !create {
				states[i] = &buf[i] // a peek reads another window's dead state as absent
			}
			if create {
				e.keepMs[j] = ls[i].P.Span() + s.slackMs()
			}
		case create:
			st := &State{}
			e.names = append(e.names, name)
			e.states = append(e.states, st)
			e.keepMs = append(e.keepMs, ls[i].P.Span()+s.slackMs())
			e.params = append(e.params, ls[i].P)
			states[i] = st
		default:
			states[i] = &buf[i]
		}
	}
	return states, nil
}

// slackMs is the minute of sweep slack under WithClock (see keepMs).
func (s *store) slackMs() int64 {
	if s.cfg.ClockSet {
		return clockSlackMs
	}
	return 0
}

// incSet runs one set decision under k's set lock.
func (s *store) incSet(ctx context.Context, op, k string, set *limiter.Set, n int64, factor float64, decide func([]*State, []Limit, int64, []Result)) (limiter.SetDecision, error) {
	now, err := s.setArgs(op, k, set, n)
	if err != nil {
		return limiter.SetDecision{}, err
	}
	var lb [MaxSet]Limit
	ls, err := SetLimits(set, factor, &lb)
	if err != nil {
		return limiter.SetDecision{}, fmt.Errorf("local: %s: %w", op, err)
	}
	var (
		ptrs [MaxSet]*State
		buf  [MaxSet]State
		rb   [MaxSet]Result
	)
	rs := rb[:len(ls)]
	e := s.lockSet(k, n > 0)
	// On a conflict decide gets nil states: it only draws what a call draws.
	states, err := s.setStates(e, ls, set, now, n > 0, &ptrs, &buf)
	decide(states, ls, now, rs)
	if e != nil {
		e.mu.Unlock()
	}
	if err != nil {
		return limiter.SetDecision{}, fmt.Errorf("local: %s: %w", op, err)
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
	us := make([]limiter.Usage, set.Len())
	e := s.lockSet(k, false)
	if e == nil {
		return us, nil
	}
	defer e.mu.Unlock()
	for i := range us {
		l := set.At(i)
		if j := e.find(l.Name); j >= 0 {
			p := Params{W: l.Window.Milliseconds(), B: l.Bucket.Milliseconds()}
			if fresh, err := e.recorded(j, p, now, false); err != nil {
				return nil, fmt.Errorf("local: get set: %w", err)
			} else if fresh {
				continue
			}
			used, declined, c := e.states[j].Usage(p, now)
			us[i] = limiter.Usage{Used: used, Declined: declined, Limit: c}
		}
	}
	return us, nil
}

// resetSet forgets k's state in every limit of set.
func (s *store) resetSet(k string, set *limiter.Set) error {
	if _, err := s.setArgs("reset set", k, set, 0); err != nil {
		return err
	}
	e := s.lockSet(k, false)
	if e == nil {
		return nil
	}
	for i := 0; i < set.Len(); i++ {
		if j := e.find(set.At(i).Name); j >= 0 {
			e.drop(j)
		}
	}
	gone := len(e.names) == 0
	e.dead = gone
	e.mu.Unlock()
	if gone {
		s.sets.CompareAndDelete(k, e)
	}
	return nil
}

// drop removes the j-th limit's state.
func (e *setEntry) drop(j int) {
	last := len(e.names) - 1
	e.names[j], e.states[j], e.keepMs[j], e.params[j] = e.names[last], e.states[last], e.keepMs[last], e.params[last]
	e.names, e.states, e.keepMs, e.params = e.names[:last], e.states[:last], e.keepMs[:last], e.params[:last]
}

// sweepSets drops the limits' states past their keep time, and keys left
// with none, under sweep's rules.
func (s *store) sweepSets() int {
	dropped, seen := 0, 0
	s.sets.Range(func(k, v any) bool {
		e := v.(*setEntry)
		e.mu.Lock()
		gone := false
		if !e.dead {
			now := s.now()
			for j := len(e.names) - 1; j >= 0; j-- {
				if st, ok := e.states[j].Newest(); !ok || now-st >= e.keepMs[j] || FromFuture(now, st, e.keepMs[j]) {
					e.drop(j)
				}
			}
			gone = len(e.names) == 0
			e.dead = gone
		}
		e.mu.Unlock()
		if gone {
			s.sets.CompareAndDelete(k, e)
			dropped++
		}
		if seen++; seen%sweepChunk == 0 {
			runtime.Gosched()
		}
		return true
	})
	return dropped
}

var _ limiter.SetLimiter = (*LocalAbsolute)(nil)

// IncSet admits n units of key if every limit of set has room for them,
// and then records them in every limit; a refusal records nothing. n = 0
// decides for one unit and records nothing.
func (a *LocalAbsolute) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return a.incSet(ctx, "inc set", k, set, n)
}

func (a *LocalAbsolute) incSet(ctx context.Context, op, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return a.s.incSet(ctx, op, k, set, n, 1, func(states []*State, ls []Limit, now int64, rs []Result) {
		if states == nil {
			return
		}
		IncAbsoluteSet(states, ls, now, n, rs)
	})
}

// GetSet returns key's usage in each limit of set, in the set's order.
func (a *LocalAbsolute) GetSet(_ context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return a.s.getSet(k, set)
}

// ResetSet forgets key's state in every limit of set.
func (a *LocalAbsolute) ResetSet(_ context.Context, k string, set *limiter.Set) error {
	return a.s.resetSet(k, set)
}

var _ limiter.SetLimiter = (*LocalSuppressed)(nil)

// IncSet offers n units of key to every limit of set (IncSuppressedSet).
// Every call with valid arguments draws exactly one number.
func (l *LocalSuppressed) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return l.incSet(ctx, "inc set", k, set, n)
}

func (l *LocalSuppressed) incSet(ctx context.Context, op, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	s := l.s
	return s.incSet(ctx, op, k, set, n, s.cfg.HardLimitFactor, func(states []*State, ls []Limit, now int64, rs []Result) {
		draw := DrawPPM(s.draw()) // drawn by a refused call too, as the Redis provider draws
		if states != nil {
			IncSuppressedSet(states, ls, now, n, s.cfg.CacheMs, draw, rs)
		}
	})
}

// GetSet returns key's accepted and declined units in each limit of set.
func (l *LocalSuppressed) GetSet(_ context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return l.s.getSet(k, set)
}

// ResetSet forgets key's state in every limit of set.
func (l *LocalSuppressed) ResetSet(_ context.Context, k string, set *limiter.Set) error {
	return l.s.resetSet(k, set)
}
