package redisprov

import (
	"context"
	"errors"
	"sync"

	"github.com/sluice-go/sluice/limiter"
)

// Peeks lets identical concurrent peeks (IsAllowed) on one key share one
// round trip, exactly: a peek never takes the answer of a round trip sent
// before it began. With none in flight a peek sends its own; else it joins
// the next, sent by its first member once the current one lands. A member
// waits for at most two round trips, never beyond its context. Safe for
// concurrent use; the zero value is ready.
type Peeks struct {
	mu sync.Mutex
	m  map[string]*peekSlot
}

type peekSlot struct{ cur, next *peekFlight }

// peekFlight is one round trip shared by its members. Fields but d and err
// are guarded by Peeks.mu; d and err are written before done closes.
type peekFlight struct {
	start   chan struct{} // closed when the peekFlight may be sent
	done    chan struct{} // closed when it has landed
	members int           // peeks waiting to send or share it
	claimed bool          // one member sends it
	d       limiter.Decision
	err     error
}

func newPeekFlight() *peekFlight {
	return &peekFlight{start: make(chan struct{}), done: make(chan struct{})}
}

// Do answers a peek of k with fn, shared as the type describes; fn must be
// the same peek for every caller of one key.
func (p *Peeks) Do(ctx context.Context, k string, fn func(context.Context) (limiter.Decision, error)) (limiter.Decision, error) {
	p.mu.Lock()
	if p.m == nil {
		p.m = make(map[string]*peekSlot)
	}
	s := p.m[k]
	if s == nil {
		s = &peekSlot{}
		p.m[k] = s
	}
	if s.cur == nil {
		f := newPeekFlight()
		f.claimed = true
		s.cur = f
		p.mu.Unlock()
		return p.fly(ctx, k, s, f, fn)
	}
	if s.next == nil {
		s.next = newPeekFlight()
	}
	f := s.next
	f.members++
	p.mu.Unlock()

	select {
	case <-f.start:
	case <-f.done:
	case <-ctx.Done():
		p.leave(k, s, f)
		return limiter.Decision{}, ctx.Err()
	}
	p.mu.Lock()
	if !f.claimed {
		f.claimed = true
		p.mu.Unlock()
		return p.fly(ctx, k, s, f, fn)
	}
	p.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return limiter.Decision{}, ctx.Err()
	}
	if f.err != nil && ctx.Err() == nil && (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) {
		return fn(ctx) // the sender's context ended, not this caller's
	}
	return f.d, f.err
}

// fly sends f, lands it, and starts the next peekFlight if it has members.
func (p *Peeks) fly(ctx context.Context, k string, s *peekSlot, f *peekFlight, fn func(context.Context) (limiter.Decision, error)) (limiter.Decision, error) {
	d, err := fn(ctx)
	f.d, f.err = d, err
	p.mu.Lock()
	close(f.done)
	p.advance(k, s)
	p.mu.Unlock()
	return d, err
}

// advance makes the next peekFlight current, or drops the slot, with p.mu
// held, after the current one landed or was abandoned.
func (p *Peeks) advance(k string, s *peekSlot) {
	s.cur, s.next = s.next, nil
	if s.cur == nil {
		delete(p.m, k)
		return
	}
	close(s.cur.start)
}

// leave takes a member whose context ended out of f; a peekFlight left with
// no member and not sent is dropped.
func (p *Peeks) leave(k string, s *peekSlot, f *peekFlight) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f.members--
	if f.members > 0 || f.claimed {
		return
	}
	switch f {
	case s.next:
		s.next = nil
	case s.cur:
		close(f.done)
		p.advance(k, s)
	}
}
