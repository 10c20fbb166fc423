package hybrid

import (
	"context"

	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

// lease decides an Inc that memory could not answer (1 ≤ n ≤ hard) by
// one lease request, one caller per key at a time.
func (t *table[E]) lease(ctx context.Context, k string, q request) (limiter.Decision, error) {
	for {
		e, ok := t.lookup(k)
		if !ok {
			now := t.now()
			last, again := t.calledWithin(k, now)
			if !again {
				return t.alone(ctx, k, q, now)
			}
			var err error
			if e, ok, err = t.entryFor("inc", k, last); err != nil {
				return limiter.Decision{}, err
			}
			if !ok {
				t.full.Add(1)
				return t.s.unleased(ctx, k, q)
			}
		}
		if d, done, err := t.leaseOnce(ctx, e, q); done {
			return d, err
		}
	}
}

// alone decides q for k, which has no entry: a key called once, or
// further apart than a lease lives, which no lease would serve and no
// memory is kept for. It makes the Redis provider's own call; a refusal
// to remember gives k an entry for it. send is the local time (ms) it is
// sent.
func (t *table[E]) alone(ctx context.Context, k string, q request, send int64) (limiter.Decision, error) {
	h, err := t.b.Check("inc", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	t.fetches.Add(1)
	r, life, err := t.s.alone(ctx, h, q)
	if err != nil {
		return limiter.Decision{}, err
	}
	if !r.Allowed && life > 0 {
		if e, ok, _ := t.entryFor("inc", k, send); ok {
			t.noLease(e.base(), q.soft, q.hard, q.n, send, &r, life)
		}
	}
	return r.Decision(), nil
}

// leaseOnce decides q from e's memory or by a lease request of its own,
// waiting while another caller's request of the key is in flight (the
// key's fetch token), and then answering from what it brought if it can.
// A waiter gives up, unsent, on ctx's end, redisprov.ErrOpened when the
// breaker opens, or redisprov.ErrBehindFailure when a request of the key
// failed while it waited: no caller waits more than about one call behind
// a request that found Redis slow or gone, WithTimeout(0) included. done
// false: e left the map, look the key up again.
func (t *table[E]) leaseOnce(ctx context.Context, e E, q request) (d limiter.Decision, done bool, err error) {
	x := e.base()
	seen := x.fails.Load()
	var now int64
	for {
		now = t.now()
		x.mu.Lock()
		switch {
		case t.g.Open():
			err = redisprov.ErrOpened
		case x.fails.Load() != seen:
			err = redisprov.ErrBehindFailure
		case x.gone:
			x.mu.Unlock()
			return d, false, nil
		}
		if err != nil {
			x.mu.Unlock()
			return d, true, t.errorf("inc", err)
		}
		// Another caller may have brought a lease while this one waited.
		if d, ok := t.s.local(e, q, now, true); ok {
			x.mu.Unlock()
			return d, true, nil
		}
		if !x.fetching {
			break
		}
		w := x.waker()
		x.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return d, true, t.errorf("inc", ctx.Err())
		case <-t.g.Opened():
			return d, true, t.errorf("inc", redisprov.ErrOpened)
		}
	}
	x.fetching = true
	a := t.take(x, q, now)
	x.mu.Unlock()
	a.send = t.now()
	t.fetches.Add(1)
	if a.plain && a.rel == 0 && a.push == 0 {
		// Nothing to give back or to send: the Redis provider's own call.
		var r window.Result
		var life int64
		if r, life, err = t.s.alone(ctx, x.hash, q); err == nil {
			t.noLease(x, q.soft, q.hard, q.n, a.send, &r, life)
			d = r.Decision()
		}
	} else {
		d, err = t.s.fetchLease(ctx, e, q, a)
	}
	// A failure that may mean Redis is gone counts for the waiters. A
	// timeout counts only under WithTimeout(0): otherwise each waiter's
	// own budget bounds it, and this one may have run out waiting.
	if err != nil && redisprov.Unavailable(err) && (t.b.Cfg.Timeout <= 0 || !redisprov.TimedOut(err)) {
		x.fails.Add(1)
	}
	x.mu.Lock()
	switch {
	case x.parked > 0 && !t.holdsNothing(x, a.send):
		// Back on the ticks' list, with what the reply left.
		s := t.shardOf(x.key)
		s.mu.Lock()
		s.fresh = append(s.fresh, e)
		s.mu.Unlock()
		x.parked = -1
	case x.parked > 0:
		x.parked = 2 // a call that left nothing to act on: still parked
	case x.parked < 0:
		x.parked = -1
	}
	x.endFetch()
	x.mu.Unlock()
	return d, true, err
}

// waitFetch takes x's fetch token, waiting for it until ctx is done
// (false, without it).
func (x *entry) waitFetch(ctx context.Context) bool {
	for {
		x.mu.Lock()
		if !x.fetching {
			x.fetching = true
			x.mu.Unlock()
			return true
		}
		w := x.waker()
		x.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return false
		}
	}
}

// waker returns the channel endFetch closes, with x.mu held while
// another holds the token.
func (x *entry) waker() chan struct{} {
	if x.wake == nil {
		x.wake = make(chan struct{})
	}
	return x.wake
}

// endFetch gives x's fetch token back and wakes its waiters, with x.mu
// held.
func (x *entry) endFetch() {
	x.fetching = false
	if x.wake != nil {
		close(x.wake)
		x.wake = nil
	}
}

// backend is a table as its Guard sees it (redisprov.Backend).
type backend[E keyEntry] table[E]

// Validate checks an Inc (or, with peek, an IsAllowed) for the policy.
func (be *backend[E]) Validate(op, k string, rate limiter.Rate, n int64, peek bool) (*redisprov.Call, error) {
	t := (*table[E])(be)
	return redisprov.NewCall(&t.b, op, k, rate, n, peek)
}

// Decide is the Redis call of an Inc or, with peek, an IsAllowed, whose
// identical concurrent calls share a round trip unless relief is off.
func (be *backend[E]) Decide(ctx context.Context, k string, rate limiter.Rate, n int64, peek bool) (limiter.Decision, error) {
	t := (*table[E])(be)
	if peek {
		fn := func(ctx context.Context) (limiter.Decision, error) { return t.s.peekRedis(ctx, k) }
		if t.b.Cfg.NoRelief {
			return fn(ctx)
		}
		return t.peeks.Do(ctx, k, fn)
	}
	soft, hard, err := t.s.capacities("inc", rate)
	if err != nil {
		return limiter.Decision{}, err
	}
	q := request{soft: soft, hard: hard, n: n, draw: t.s.draw(), drawn: true}
	if n == 0 || n > hard {
		return t.s.unleased(ctx, k, q)
	}
	return t.lease(ctx, k, q)
}

// Usage is the Redis call of a Get: usageLen values (used, declined when
// suppressed, capacity), corrected by own.
func (be *backend[E]) Usage(ctx context.Context, k string) (limiter.Usage, error) {
	t := (*table[E])(be)
	h, err := t.b.Check("get", k)
	if err != nil {
		return limiter.Usage{}, err
	}
	v, err := t.b.Run(ctx, t.kind.get, []string{h}, redisprov.NowArg(&t.b.Cfg), t.b.W, t.b.B)
	if err != nil {
		return limiter.Usage{}, t.errorf("get", err)
	}
	width := t.kind.usageLen
	x, err := redisprov.Int64s(v, width)
	if err != nil {
		return limiter.Usage{}, t.errorf("get", err)
	}
	u := limiter.Usage{Used: x[0], Limit: x[width-1]}
	if width > 2 {
		u.Declined = x[1]
	}
	left, decl := t.own(k)
	u.Used = max(0, u.Used-left)
	u.Declined += decl
	return u, nil
}

// own returns what of k's Redis figures is this instance's: the unused
// units of its lease Redis still counts, and the declines not yet sent.
func (t *table[E]) own(k string) (left, decl int64) {
	e, ok := t.lookup(k)
	if !ok {
		return 0, 0
	}
	x := e.base()
	now := t.now()
	x.mu.Lock()
	if x.left > 0 && now < x.until+t.b.Cfg.WindowMs {
		left = x.left
	}
	decl = x.decl
	x.mu.Unlock()
	return left, decl
}

// ask is what a lease request sends besides the Inc: give back rel units
// of the bucket that started at start, record push declines, and ask for
// want units in a bucket up to ahead ms after now (plain: no lease); send
// is the local time it is sent.
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
	a.ahead = x.aheadArg(t.ahead)
	// A key with no history, or called further apart than a lease lives,
	// decides n alone rather than lease units a release must give back.
	if x.lastUse == 0 || now-x.lastUse >= t.b.Cfg.BucketMs+a.ahead {
		a.plain, a.want, a.ahead = true, q.n, 0
	} else {
		a.want = min(max(q.n, t.wantFor(x, q.soft, q.hard)), q.hard, max(q.n, t.maxLease))
	}
	return a
}

// noLease takes the reply r of a call for n units that took no lease and
// gave nothing back, sent at send: the key's use and, for life ms at most
// (0: not at all), r's refusal.
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

// wantFor is the next lease's size, with x.mu held: want, and for a slow
// key at least its share of soft over a forward-dated lease's life D + B,
// so that it need not double up from one unit; never above soft, hard nor
// maxLease.
func (t *table[E]) wantFor(x *entry, soft, hard int64) int64 {
	want := x.want
	if x.slow && t.ahead > 0 {
		cfg := &t.b.Cfg
		share := (soft*(t.ahead+cfg.BucketMs) + cfg.WindowMs - 1) / cfg.WindowMs
		want = min(max(want, share), soft, t.maxLease)
	}
	return min(want, max(hard, 1))
}

// resize sets the next lease's size from how the current one went, with
// x.mu held: a lease used up doubles it (a closed loop of callers would
// take the rate estimate many ticks to catch up with), one given back with
// units unused brings it down to twice what was used, at least 1; never
// above hard nor most.
func (x *entry) resize(most int64) {
	if used := x.granted - x.left; used < x.granted {
		x.want = max(min(x.want, 2*used), 1)
	} else {
		x.want = min(2*max(x.want, x.granted), x.hard, most)
	}
}

// install makes units x's lease, with x.mu held: held in the bucket that
// started at start on the script's clock (now there; send is the local
// time the call was sent). It serves until local send + (start + B − now),
// no later than the bucket stops taking units. A lease still held is
// replaced, its unused units left in pend for the next tick.
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

// renewed installs the units of a tick's renewal s, with x.mu held, and
// reports whether the reply is of x's current lease; if not (an Inc
// installed one meanwhile), the next tick gives the units back.
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

// pace is how often a key is called, guarded by the entry's mu. slow: no
// history, or a lease expired with units unused and no plain lease was
// used up since; a slow key's leases are forward-dated (WithLeaseAhead).
// fwd: the current lease is forward-dated.
type pace struct{ slow, fwd bool }

// ended updates slow as the current lease ends, unused or not.
func (p *pace) ended(unused bool) {
	switch {
	case unused:
		p.slow = true
	case !p.fwd:
		p.slow = false
	}
}

// aheadArg is a lease request's D argument: ahead for a slow key, else 0.
func (p *pace) aheadArg(ahead int64) int64 {
	if p.slow {
		return ahead
	}
	return 0
}
