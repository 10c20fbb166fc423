// Hot-key relief: a key that Redis refuses is answered
// from memory until Redis's own answer says it could change, so that a key
// hammered past its limit costs Redis almost nothing (docs/algorithms.md,
// Hot-key relief).
//
// A Refusal is one remembered refusal; the hybrid provider keeps one in
// each key's entry. A Memory is a bounded map of them, per key, for the
// Redis providers (redisabs, redissup), with the units declined from
// memory that the suppressed strategy reports with the key's next Redis
// call. Peeks lets identical concurrent IsAllowed calls on one key share
// one round trip.
//
// The rule, for both strategies: a refusal of n units at capacity C (soft
// S and hard H for the suppressed strategy) that Redis answered at or
// after local time send, with RetryAfter r, proves that no call of n or
// more units at the same capacities can be admitted before send + r, as
// long as no units are given back (a hybrid lease's release) and the key is
// not reset: units only leave the window by expiring, and RetryAfter is
// the exact time until enough of them have. So such calls are refused from
// memory until then, with RetryAfter and ResetAfter counting down from
// Redis's answer and its Remaining. A call with other capacities (another
// rate) goes to Redis.

package redisprov

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/sluice-go/sluice/internal/window"
)

// Refusal is one remembered refusal. Its zero value remembers nothing. It
// is not safe for concurrent use: its owner guards it.
type Refusal struct {
	c, h, n      int64 // the capacities the call sent and its cost; n 0: none
	sent         int64 // local ms the refused call was sent: an earlier now (a clock stepped back) answers nothing
	until        int64 // local ms: answered from memory while now < until
	retry, reset int64 // local ms that RetryAfter and ResetAfter count down to
	remaining    int64
	ppm          int64 // the factor, window.PPM for an absolute refusal: draws below it are refused
	outcome      int   // window.OutcomeRejected or window.OutcomeSuppressed
}

// Rememberable reports whether r, Redis's answer to a call of n units, is
// a refusal that memory can repeat exactly until its RetryAfter: a refusal
// of one unit, not never, with a RetryAfter. One unit, because then every
// number of the answer holds until the RetryAfter: no unit of room appears
// before it, so Remaining stays 0. A refusal of n > 1 units says nothing
// of when an older bucket's death raises Remaining, nor of the RetryAfter
// of a larger cost: such calls go to Redis (docs/algorithms.md, Hot-key
// relief).
func Rememberable(n int64, r *window.Result) bool {
	return n == 1 && !r.Allowed && !r.Never && r.RetryAfter > 0 && r.Outcome != window.OutcomeAllowed
}

// MaxStale is the longest, in ms, a remembered refusal answers after the
// Redis reply it repeats, whatever the window: the staleness bound of
// every refusal memory (relief's and the hybrid's). Units that come back
// unseen (another instance's or an operator's Reset, a hybrid's given-back
// lease, a cleaner) are seen by the first call after it, so a key reset
// elsewhere is admitted again within MaxStale on every instance. The cost:
// a key refused from memory asks Redis at least once per MaxStale per
// instance, one call a second, whatever the number of callers (one caller
// asks, the others wait for its answer; docs/algorithms.md, Staleness).
const MaxStale = 1000

// Set remembers r, Redis's answer to a call of n units at capacities c and
// h (h = c for the absolute strategy) sent at local ms send. It is
// answered from memory until send + RetryAfter or send + MaxStale,
// whichever comes first, and no later than limit when limit > 0 (the
// hybrid caps it, see docs/algorithms.md). r must be Rememberable.
func (f *Refusal) Set(c, h, n, send, limit int64, r *window.Result) {
	*f = Refusal{c: c, h: h, n: n, sent: send, retry: send + r.RetryAfter, reset: send + r.ResetAfter,
		remaining: r.Remaining, ppm: r.FactorPPM, outcome: r.Outcome}
	f.until = min(f.retry, send+MaxStale)
	if limit > 0 && limit < f.until {
		f.until = limit
	}
	if r.Outcome == window.OutcomeRejected {
		f.ppm = window.PPM
	}
}

// Update keeps the refusal exact after r, Redis's answer to another call
// of the key at capacities c and h sent at local ms send, that is not
// Rememberable: at other capacities it forgets the refusal (the call
// stored its own capacities in the key). An admission at the same ones
// that left room (Remaining > 0) forgets it too: either room appeared
// after the refusal, or the answer is an older call's that arrived late
// (concurrent replies come back in any order); memory cannot tell which,
// and only a refusal with no room left can be repeated. An admission that
// left no room (the suppressed strategy above S) moves ResetAfter to the
// later of the two.
func (f *Refusal) Update(c, h, send int64, r *window.Result) {
	switch {
	case c != f.c || h != f.h:
		f.Clear()
	case r.Allowed && r.Remaining > 0:
		f.Clear()
	case r.Allowed:
		f.reset = max(f.reset, send+r.ResetAfter)
	}
}

// ResetAt is the local ms the remembered ResetAfter counts down to: when
// the key's newest bucket dies.
func (f *Refusal) ResetAt() int64 { return f.reset }

// Clear forgets the refusal.
func (f *Refusal) Clear() { f.n, f.until = 0, 0 }

// Live reports whether the refusal still answers at now.
func (f *Refusal) Live(now int64) bool { return f.n > 0 && now < f.until }

// Answer is the remembered refusal's answer to a call of n units at
// capacities c and h at local ms now, with the call's draw in ppm (0 for
// the absolute strategy): ok false when Redis must be asked, also when now
// is before the refused call was sent (the clock stepped back: the key's
// buckets may be dated in the future, which Redis judges). A suppressed
// refusal with a factor below 1 answers only for draws below it, the ones
// Redis would refuse with that factor; the others go to Redis.
func (f *Refusal) Answer(c, h, n, now, draw int64) (r window.Result, ok bool) {
	if f.n == 0 || n != f.n || c != f.c || h != f.h || now >= f.until || now < f.sent || draw >= f.ppm {
		return r, false
	}
	r = window.Result{Outcome: f.outcome, Limit: c, Remaining: f.remaining,
		RetryAfter: f.retry - now, ResetAfter: max(f.reset-now, 0)}
	if f.outcome == window.OutcomeSuppressed {
		r.FactorPPM = f.ppm
	}
	return r, true
}

// Memory is the remembered refusals of a Redis provider, one per key, at
// most MaxKeys of them. Every method is safe for concurrent use. Use it by
// pointer after Init; the zero value is not usable.
//
// A key's entry lives until its refusal's RetryAfter; with declines still
// to report (suppressed), until they would have left the window (W + B
// after the latest), since by then Redis would not count them either.
// Entries past that are dropped by the writes that meet them: each insert
// looks at a few entries of its shard (sweepEach, at random) and drops the
// dead ones, then, if the shard is still full, one arbitrary entry (relief
// for that key is lost, never correctness).
type Memory struct {
	seed   maphash.Seed
	span   int64 // W + B in ms: how long an unreported decline matters
	bucket int64 // B in ms
	cache  int64 // the suppression cache period in ms
	shards [shardCount]memShard
}

// MaxKeys bounds the keys a Memory holds.
const MaxKeys = 1 << 16

const (
	shardCount = 64
	shardMax   = MaxKeys / shardCount
	// sweepEach is how many entries each Remember looks at for dead ones.
	sweepEach = 2
)

type memShard struct {
	mu sync.RWMutex
	m  map[string]*entry
	// epoch counts Forgets in the shard: a refusal whose call began
	// before a Forget of its key is not remembered (Begin, Remember).
	epoch atomic.Uint64
	_     [24]byte // keep shards on their own cache lines
}

// entry is one key's refusal and its unreported declines. The refusal is
// written under the shard's write lock and read under its read lock; decl
// and lastDecl change under the read lock too, so they are atomic.
type entry struct {
	f        Refusal
	decl     atomic.Int64 // units declined from memory, not yet reported
	lastDecl atomic.Int64 // local ms of the latest of them
	// ask is the one call of the key in flight to Redis that memory
	// could not answer (its refusal expired, or a suppressed call would
	// open a bucket), nil for none; guarded by the shard's write lock.
	ask *flight
}

// flight is one Redis call that the key's other callers wait for.
type flight struct{ done chan struct{} }

// Init sets m up for a window of w ms, buckets of b ms and a suppression
// cache period of cache ms (suppressed strategy; see Remember).
func (m *Memory) Init(w, b, cache int64) {
	m.seed = maphash.MakeSeed()
	m.span, m.bucket, m.cache = w+b, b, cache
	for i := range m.shards {
		m.shards[i].m = make(map[string]*entry)
	}
}

func (m *Memory) shard(k string) *memShard {
	return &m.shards[maphash.String(m.seed, k)%shardCount]
}

// Answer is k's remembered refusal's answer (see Refusal.Answer). A
// suppressed refusal records its n units as declined, in Redis: memory
// answers only while the call would join the key's newest bucket (less
// than B after it opened, as the remembered ResetAfter tells), and counts
// them for Take to report with the key's next Redis call. A call that
// would open a bucket goes to Redis, so the key's buckets open where they
// would without relief and hold the same accepted units; the declined
// units memory answered land in the next bucket instead of the one they
// would have joined.
func (m *Memory) Answer(k string, c, h, n, now, draw int64) (window.Result, bool) {
	s := m.shard(k)
	s.mu.RLock()
	e := s.m[k]
	if e == nil {
		s.mu.RUnlock()
		return window.Result{}, false
	}
	r, ok := e.f.Answer(c, h, n, now, draw)
	s.mu.RUnlock()
	if !ok || r.Outcome != window.OutcomeSuppressed {
		return r, ok
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e = s.m[k]; e == nil {
		return window.Result{}, false
	}
	if r, ok = e.f.Answer(c, h, n, now, draw); !ok {
		return r, false
	}
	if now-(e.f.reset-m.span) >= m.bucket {
		// The call would open a bucket: Redis records it, so that the
		// key's buckets stay those of a limiter without relief.
		return window.Result{}, false
	}
	e.decl.Add(n)
	e.lastDecl.Store(now)
	return r, true
}

// Decide answers a call of n units of k at capacities c and h, with its
// draw in ppm (0 for the absolute strategy): from memory when it can
// (remembered true), else by ask, Redis's decision of the call, which
// reports decl units declined from memory with it (Take) and whose answer
// is remembered. now is the local clock in ms.
//
// When memory holds a refusal for the call that no longer answers (its
// RetryAfter has passed, or a suppressed call would open a bucket), one
// caller of the key asks Redis and the others wait for its answer, then
// try memory once more and otherwise ask Redis themselves: a key hammered
// by many callers costs one Redis call when its refusal expires, not one
// per caller. A waiter waits for that one call at most, and never beyond
// ctx (then it returns ctx's error).
func (m *Memory) Decide(ctx context.Context, k string, c, h, n, draw int64, now func() int64,
	ask func(ctx context.Context, decl int64) (window.Result, error)) (r window.Result, remembered bool, err error) {
	t := now()
	if r, ok := m.Answer(k, c, h, n, t, draw); ok {
		return r, true, nil
	}
	wait, lead := m.join(k, c, h, n)
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return window.Result{}, false, ctx.Err()
		}
		t = now()
		if r, ok := m.Answer(k, c, h, n, t, draw); ok {
			return r, true, nil
		}
	}
	tok := m.Begin(k)
	decl := m.Take(k, t)
	r, err = ask(ctx, decl)
	if err != nil {
		m.Restore(k, decl, t)
	} else {
		m.Remember(k, tok, c, h, n, t, &r)
	}
	m.land(k, lead)
	return r, false, err
}

// join finds what a call memory could not answer does: wait for the key's
// call in flight (wait), be that call (lead), or, when memory holds no
// refusal for the call, neither.
func (m *Memory) join(k string, c, h, n int64) (wait <-chan struct{}, lead *flight) {
	s := m.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[k]
	if e == nil || e.f.n != n || e.f.c != c || e.f.h != h {
		return nil, nil
	}
	if e.ask != nil {
		return e.ask.done, nil
	}
	e.ask = &flight{done: make(chan struct{})}
	return nil, e.ask
}

// land ends the flight lead, if any: its waiters look at memory again.
func (m *Memory) land(k string, lead *flight) {
	if lead == nil {
		return
	}
	s := m.shard(k)
	s.mu.Lock()
	if e := s.m[k]; e != nil && e.ask == lead {
		e.ask = nil
	}
	s.mu.Unlock()
	close(lead.done)
}

// Begin is called before a Redis call whose refusal may be remembered; its
// token goes to Remember.
func (m *Memory) Begin(k string) uint64 { return m.shard(k).epoch.Load() }

// Remember records r, Redis's answer to a call of k of n units at
// capacities c and h, begun with token (Begin) and sent at local ms send.
// A Rememberable refusal is remembered, as Refusal.Set does, in place of
// the key's earlier one. Any other answer keeps the key's refusal exact for
// what follows: at other capacities it forgets it (every Inc stores its
// capacities in the key, which a refusal from memory would not); at the
// same ones, an admission is handled by Refusal.Update (forgotten when it
// left room). Nothing is remembered
// when k was forgotten since the call began (a Forget of another key of
// the shard skips it too: relief lost for one call, never correctness).
// Declines not yet reported stay.
func (m *Memory) Remember(k string, token uint64, c, h, n, send int64, r *window.Result) {
	s := m.shard(k)
	keep := Rememberable(n, r)
	if !keep {
		s.mu.RLock()
		e := s.m[k]
		held := e != nil && e.f.n > 0
		s.mu.RUnlock()
		if !held {
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch.Load() != token {
		return
	}
	e := s.m[k]
	switch {
	case keep:
		if e == nil {
			m.sweep(s, send)
			e = &entry{}
			s.m[k] = e
		}
		e.f.Set(c, h, n, send, m.limit(h > c, send, r), r)
	case e == nil:
	default:
		e.f.Update(c, h, send, r)
	}
}

// limit is how long a suppressed refusal may answer when it is not the
// certain one (factor 1 with H = S): a factor below 1, or a refusal above
// H > S, which a drop of the accepted units into (S, H] turns into a draw
// against a factor. Redis computes the factor again once its cache period
// has passed; memory trusts it for one period after the call was sent, so
// it uses a factor at most two periods old where Redis uses one at most
// one period old (docs/algorithms.md, Hot-key relief). 0: no limit.
func (m *Memory) limit(hardAbove bool, send int64, r *window.Result) int64 {
	if r.Outcome != window.OutcomeSuppressed || !hardAbove && r.FactorPPM >= window.PPM {
		return 0
	}
	return max(send+m.cache, 1) // no cache: until send, no answer from memory
}

// sweep drops dead entries of s before an insert, with s.mu held: it
// looks at a few entries (map order is random) and drops the dead ones,
// and if s is still full, drops one more, live or not. So each insert
// costs O(1), and a shard never holds more than shardMax entries.
func (m *Memory) sweep(s *memShard, now int64) {
	seen := 0
	for k, e := range s.m {
		if m.dead(e, now) {
			delete(s.m, k)
		}
		if seen++; seen >= sweepEach {
			break
		}
	}
	if len(s.m) >= shardMax {
		for k := range s.m {
			delete(s.m, k)
			break
		}
	}
}

// dead reports whether e can go: its refusal no longer answers and no
// declines it holds still count in the window.
func (m *Memory) dead(e *entry, now int64) bool {
	return !e.f.Live(now) && (e.decl.Load() == 0 || now-e.lastDecl.Load() >= m.span)
}

// Take returns and clears k's declines not yet reported, for the key's
// next Redis call at local ms now. Give them back with Restore if the call
// fails. They all joined the bucket that was the key's newest at the
// latest Redis answer (Answer), so once that bucket has died (its
// ResetAfter has passed) they are dropped: Redis would no longer count
// them either.
func (m *Memory) Take(k string, now int64) int64 {
	s := m.shard(k)
	s.mu.RLock()
	var d int64
	if e := s.m[k]; e != nil && e.decl.Load() != 0 {
		d = e.decl.Swap(0)
		if now >= e.f.reset {
			d = 0
		}
	}
	s.mu.RUnlock()
	return d
}

// Pending is k's declines not yet reported, for Get to count them while
// the bucket they joined lives (see Take).
func (m *Memory) Pending(k string, now int64) int64 {
	s := m.shard(k)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e := s.m[k]; e != nil && now < e.f.reset {
		return e.decl.Load()
	}
	return 0
}

// Restore gives back declines Take returned, when the call that was to
// report them failed (it may have reported them: counting them twice only
// raises the factor, which admits less).
func (m *Memory) Restore(k string, d, now int64) {
	if d == 0 {
		return
	}
	s := m.shard(k)
	s.mu.Lock()
	e := s.m[k]
	if e == nil {
		m.sweep(s, now)
		e = &entry{}
		s.m[k] = e
	}
	e.decl.Add(d)
	e.lastDecl.Store(now)
	s.mu.Unlock()
}

// Forget drops k's refusal and declines (Reset): calls of k begun before
// are not remembered either.
func (m *Memory) Forget(k string) {
	s := m.shard(k)
	s.mu.Lock()
	s.epoch.Add(1)
	delete(s.m, k)
	s.mu.Unlock()
}

// Len is the number of keys held, dead ones not yet dropped included.
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}
