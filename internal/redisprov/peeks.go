package redisprov

import (
	"context"
	"errors"
	"sync"

	"github.com/sluice-go/sluice/limiter"
)

// Peeks lets identical concurrent peeks (IsAllowed) of one key share a
// round trip, exactly: a peek never takes the answer of a round trip sent
// before it began. With none in flight a peek sends its own; else it joins
// the next, which its first member sends once the one in flight lands. A
// member waits for at most two round trips, never beyond its context. The
// zero value is ready; it is safe for concurrent use.
type Peeks struct {
	mu sync.Mutex
	m  map[string]*peekSlot
}

type peekSlot struct{ cur, next *peekFlight }

// peekFlight is one round trip shared by its members. d and err are
// written before done closes; the rest is guarded by Peeks.mu.
type peekFlight struct {
	after   <-chan struct{} // closed when the flight before has landed: this one may go
	done    chan struct{}   // closed when this one has landed
	members int             // peeks waiting to send or share it
	claimed bool            // one member sends it
	d       limiter.Decision
	err     error
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
		f := &peekFlight{done: make(chan struct{}), claimed: true}
		s.cur = f
		p.mu.Unlock()
		return p.fly(ctx, k, s, f, fn)
	}
	if s.next == nil {
		s.next = &peekFlight{after: s.cur.done, done: make(chan struct{})}
	}
	f := s.next
	f.members++
	p.mu.Unlock()

	select {
	case <-f.after:
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

// fly sends f and lands it.
func (p *Peeks) fly(ctx context.Context, k string, s *peekSlot, f *peekFlight, fn func(context.Context) (limiter.Decision, error)) (limiter.Decision, error) {
	f.d, f.err = fn(ctx)
	p.mu.Lock()
	close(f.done)
	p.advance(k, s)
	p.mu.Unlock()
	return f.d, f.err
}

// advance, with p.mu held after the current flight landed or was
// abandoned, makes the next one current, or drops the slot.
func (p *Peeks) advance(k string, s *peekSlot) {
	if s.cur, s.next = s.next, nil; s.cur == nil {
		delete(p.m, k)
	}
}

// leave takes a member whose context ended out of f; a flight left with
// no member and not sent is dropped.
func (p *Peeks) leave(k string, s *peekSlot, f *peekFlight) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f.members--; f.members > 0 || f.claimed {
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
