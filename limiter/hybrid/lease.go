package hybrid

import (
	"context"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

// lease decides an Inc that memory could not answer (1 ≤ n ≤ hard): one
// Redis call, made by one caller per key at a time, gives back what is
// left of the key's lease and decides for n, reserving a new lease when
// admitted.
func (t *table[E]) lease(ctx context.Context, k string, q request) (limiter.Decision, error) {
	for {
		e, ok, err := t.entryFor("inc", k)
		if err != nil {
			return limiter.Decision{}, err
		}
		if !ok {
			// No room for k: Redis decides; k holds nothing to give back.
			t.full.Add(1)
			return t.s.unleased(ctx, k, q)
		}
		x := e.base()
		if err := takeFetch(ctx, &t.g, x.fetch, &x.fails); err != nil {
			return limiter.Decision{}, t.errorf("inc", err)
		}
		d, retry, err := t.leaseLocked(ctx, e, q)
		fetched(&t.b.Cfg, err, &x.fails)
		<-x.fetch
		if !retry {
			return d, err
		}
	}
}

// leaseLocked is lease with e.fetch held; retry: e left the map, start
// again.
func (t *table[E]) leaseLocked(ctx context.Context, e E, q request) (limiter.Decision, bool, error) {
	x := e.base()
	now := t.now()
	x.mu.Lock()
	if x.gone {
		x.mu.Unlock()
		return limiter.Decision{}, true, nil
	}
	// Another caller may have brought a lease while this one waited (the
	// call's draw decides from memory).
	if d, ok := t.s.local(e, q, now, true); ok {
		x.mu.Unlock()
		return d, false, nil
	}
	a := t.take(x, q, now)
	x.mu.Unlock()
	a.send = t.now()
	t.fetches.Add(1)
	d, err := t.s.fetchLease(ctx, e, q, a)
	return d, false, err
}

// ask is what a lease request sends besides the Inc: give back rel units
// of the bucket that started at start, record push declines, and ask for
// want units in a bucket up to ahead ms after now; plain: ask for no
// lease (a key without history, or called further apart than a lease
// lives). send is the local time the request is sent.
type ask struct {
	start, rel, push, want, ahead, send int64
	plain                               bool
}

// take ends x's lease for a lease request q, with x.mu held: it sizes the
// next lease from how this one went and returns what to ask.
func (t *table[E]) take(x *entry, q request, now int64) ask {
	a := ask{start: x.start, rel: x.left}
	switch {
	case x.soft != q.soft || x.hard != q.hard:
		x.want, x.est = 1, 0 // a new rate: size afresh
	case x.granted > 0:
		x.ended(x.left > 0 && now >= x.until)
		x.resize(t.maxLease)
	}
	x.granted = 0
	x.left, x.until = 0, 0
	x.ref.Clear()
	a.push, x.decl = x.decl, 0
	a.want = min(max(q.n, t.wantFor(x, q.soft, q.hard)), q.hard, max(q.n, t.maxLease))
	a.ahead = x.aheadArg(t.ahead)
	// plain: the key has no history, or its calls come further apart than
	// a lease would live: decide n alone, as the Redis provider would,
	// rather than lease units a release must give back.
	if x.lastUse == 0 || now-x.lastUse >= t.b.Cfg.BucketMs+a.ahead {
		a.plain, a.want, a.ahead = true, q.n, 0
	}
	return a
}

// noLease takes the reply r of a sparse key's call that took no lease and
// gave nothing back (the Redis provider's call, n units at capacities soft
// and hard, sent at send): the key's use and, for life ms at most, r's
// refusal when it has a RetryAfter (life 0: none; hot-key relief, as
// after a lease request).
func (t *table[E]) noLease(x *entry, soft, hard, n, send int64, r *window.Result, life int64) {
	x.mu.Lock()
	x.soft, x.hard = soft, hard
	x.idle = 0
	x.lastUse = send
	if r.Allowed {
		x.used += n
	}
	if life > 0 && !r.Allowed && !r.Never && r.RetryAfter > 0 && !t.b.Cfg.NoRelief {
		x.ref.Set(soft, hard, n, send, send+life, r)
	}
	x.mu.Unlock()
}

// wantFor is the next lease's size at capacities soft and hard, with x.mu
// held (see pace.wantFor: a slow key's share is of the soft capacity).
func (t *table[E]) wantFor(x *entry, soft, hard int64) int64 {
	return min(x.pace.wantFor(x.want, soft, t.ahead, t.maxLease, &t.b.Cfg), max(hard, 1))
}

// resize sets the next lease's size from how the current one went, with
// x.mu held (nextWant).
func (x *entry) resize(most int64) {
	x.want = nextWant(x.want, x.granted, x.granted-x.left, x.hard, most)
}

// install makes units x's lease, with x.mu held: held in the bucket that
// started at start on the script's clock (now there; send is the local
// time the call was sent). It serves until local send + (start + B − now),
// no later than the bucket stops taking units, so each unit counts at
// least W after its admission. A lease still held is replaced, its unused
// units left in pend for the next tick.
func (t *table[E]) install(x *entry, send, start, now, units int64) {
	if x.left > 0 {
		x.pend = append(x.pend, x.start, x.left)
	}
	x.start = start
	x.fwd = start > now
	if x.fwd {
		t.forwards.Add(1)
	}
	x.until = send + (start + t.b.Cfg.BucketMs - now)
	x.left, x.granted = units, units
	x.ref.Clear()
	x.gen++
	x.hits = 0
}

// renewed installs the units of a tick's renewal s, sent at send, with
// x.mu held, and reports whether the reply is of x's current lease and
// capacities; if not (an Inc installed one meanwhile), the next tick gives
// the units back.
func (t *table[E]) renewed(x *entry, s *syncCall[E], send, start, now, units int64) bool {
	same := !x.gone && x.gen == s.gen && x.soft == s.soft && x.hard == s.hard
	if units > 0 {
		if !same {
			x.pend = append(x.pend, start, units)
			return false
		}
		if x.left > 0 {
			x.resize(t.maxLease)
		}
		t.install(x, send, start, now, units)
	}
	return same
}
