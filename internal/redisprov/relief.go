// Hot-key relief (docs/algorithms.md, Hot-key relief): a refusal of n
// units at capacities c (and h) sent at local time send with RetryAfter r
// proves that no call of n or more units at those capacities is admitted
// before send + r unless units are given back or the key is reset, since
// units leave the window only by expiring. A key Redis refuses is answered
// from memory until then; calls at other capacities go to Redis.

package redisprov

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/sluice-go/sluice/internal/window"
)

// Refusal is one remembered refusal: the hybrid keeps one per entry, a
// Memory one per key. Its zero value remembers nothing. It is not safe for
// concurrent use: its owner guards it.
type Refusal struct {
	c, h, n      int64 // the capacities the call sent and its cost; n 0: none
	sent         int64 // local ms the call was sent: an earlier now (a clock stepped back) answers nothing
	until        int64 // local ms: answered from memory while now < until
	retry, reset int64 // local ms that RetryAfter and ResetAfter count down to
	remaining    int64
	ppm          int64 // the factor, window.PPM for an absolute refusal: draws below it are refused
	outcome      int
}

// MaxStale is the longest, in ms, a remembered refusal answers after the
// reply it repeats: the staleness bound of every refusal memory (relief's
// and the hybrid's). A key reset elsewhere is admitted again within
// MaxStale on every instance (docs/algorithms.md, Staleness).
const MaxStale = 1000

// Set remembers r, Redis's refusal of a call of n units at capacities c
// and h (h = c when absolute) sent at local ms send, until the earliest of
// send + RetryAfter, send + MaxStale and limit (when > 0).
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

// ResetAt is the local ms the remembered ResetAfter counts down to: when
// the key's newest bucket dies.
func (f *Refusal) ResetAt() int64 { return f.reset }

// Clear forgets the refusal.
func (f *Refusal) Clear() { f.n, f.until = 0, 0 }

// Live reports whether the refusal still answers at now.
func (f *Refusal) Live(now int64) bool { return f.n > 0 && now < f.until }

// Answer is the remembered refusal's answer to a call of n units at
// capacities c and h at local ms now with draw in ppm (0 when absolute);
// ok false means ask Redis: no match, expired, the clock stepped back
// before the refused call, or a draw at or above a suppressed factor.
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

// Memory is a Redis provider's remembered refusals, at most MaxKeys, with
// the suppressed strategy's declines made from memory and not yet
// reported. Its methods are safe for concurrent use; use it by pointer
// after Init. An entry lives until its refusal no longer answers
// (MaxStale at most) and its declines have left the window; inserts drop
// dead entries, and a full shard loses an arbitrary one (relief lost,
// never correctness).
type Memory struct {
	seed   maphash.Seed
	span   int64 // W + B in ms: how long an unreported decline counts
	bucket int64 // B in ms
	cache  int64 // the suppression cache period in ms
	shards [shardCount]memShard
}

// MaxKeys bounds the keys a Memory holds.
const MaxKeys = 1 << 16

const (
	shardCount = 64
	shardMax   = MaxKeys / shardCount
	sweepEach  = 2 // entries each insert looks at for dead ones
)

type memShard struct {
	mu sync.RWMutex
	m  map[string]*entry
	// epoch counts Forgets in the shard: a refusal whose call began
	// before a Forget of its key is not remembered.
	epoch atomic.Uint64
	_     [24]byte // keep shards on their own cache lines
}

// entry is one key's refusal, written under the shard's write lock, and
// its unreported declines, atomic because they change under the read lock.
type entry struct {
	f        Refusal
	decl     atomic.Int64  // units declined from memory, not yet reported
	lastDecl atomic.Int64  // local ms of the latest of them
	ask      chan struct{} // closed when the key's call memory could not answer lands; under the write lock
}

// Init sets m up for a window of w ms, buckets of b ms and a suppression
// cache period of cache ms.
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

// Answer is k's remembered refusal's answer (Refusal.Answer). A suppressed
// answer counts its n units as declines for Take to report, and only while
// the call would join the key's newest bucket: a call that would open one
// goes to Redis, so that buckets open where they would without relief.
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
	if r, ok = e.f.Answer(c, h, n, now, draw); !ok || now-(e.f.reset-m.span) >= m.bucket {
		return window.Result{}, false
	}
	e.decl.Add(n)
	e.lastDecl.Store(now)
	return r, true
}

// Decide runs a call of n units of k at capacities c and h with draw in
// ppm that Answer did not answer: ask calls Redis, reporting decl
// declines (Take), and its answer is remembered; now is the local clock
// in ms. When k's refusal has expired, one caller asks Redis and the
// others wait for it (never beyond ctx), then ask memory again
// (remembered true) before Redis.
func (m *Memory) Decide(ctx context.Context, k string, c, h, n, draw int64, now func() int64,
	ask func(ctx context.Context, decl int64) (window.Result, error)) (r window.Result, remembered bool, err error) {
	t := now()
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
	if lead != nil {
		s := m.shard(k)
		s.mu.Lock()
		if e := s.m[k]; e != nil && e.ask == lead {
			e.ask = nil
		}
		s.mu.Unlock()
		close(lead)
	}
	return r, false, err
}

// join finds what a call memory could not answer does: wait for the key's
// call in flight (wait), be that call (lead), or, when memory holds no
// refusal for the call, neither.
func (m *Memory) join(k string, c, h, n int64) (wait <-chan struct{}, lead chan struct{}) {
	s := m.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[k]
	if e == nil || e.f.n != n || e.f.c != c || e.f.h != h {
		return nil, nil
	}
	if e.ask != nil {
		return e.ask, nil
	}
	e.ask = make(chan struct{})
	return nil, e.ask
}

// Begin is called before a Redis call whose refusal may be remembered; its
// token goes to Remember.
func (m *Memory) Begin(k string) uint64 { return m.shard(k).epoch.Load() }

// Remember records r, Redis's answer to a call of k of n units at
// capacities c and h, begun with token (Begin) and sent at local ms send,
// unless a Forget in the shard came since Begin. A refusal of one unit
// (only then does every number of it hold until RetryAfter), not never,
// with a RetryAfter replaces k's refusal. Any other answer keeps it exact:
// other capacities (stored in the key by the call) or an admission that
// left room (new room, or the late reply of an older call) forget it; an
// admission with no room left moves its ResetAfter to the later one.
func (m *Memory) Remember(k string, token uint64, c, h, n, send int64, r *window.Result) {
	s := m.shard(k)
	keep := n == 1 && !r.Allowed && !r.Never && r.RetryAfter > 0 && r.Outcome != window.OutcomeAllowed
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
	if keep {
		limit := int64(0)
		if r.Outcome == window.OutcomeSuppressed && (h > c || r.FactorPPM < window.PPM) {
			// Not certain: Redis recomputes the factor after one cache
			// period. With no cache, no answer from memory.
			limit = max(send+m.cache, 1)
		}
		m.entry(s, k, send).f.Set(c, h, n, send, limit, r)
		return
	}
	e := s.m[k]
	switch {
	case e == nil:
	case c != e.f.c || h != e.f.h || r.Allowed && r.Remaining > 0:
		e.f.Clear()
	case r.Allowed:
		e.f.reset = max(e.f.reset, send+r.ResetAfter)
	}
}

// entry returns k's entry in s, with s.mu held. An insert first drops the
// dead among sweepEach entries (whose refusal no longer answers and whose
// declines have left the window) and, if s is still full, one more: O(1)
// per insert, at most shardMax entries a shard.
func (m *Memory) entry(s *memShard, k string, now int64) *entry {
	if e := s.m[k]; e != nil {
		return e
	}
	seen := 0
	for old, e := range s.m {
		if !e.f.Live(now) && (e.decl.Load() == 0 || now-e.lastDecl.Load() >= m.span) {
			delete(s.m, old)
		}
		if seen++; seen >= sweepEach {
			break
		}
	}
	if len(s.m) >= shardMax {
		for old := range s.m {
			delete(s.m, old)
			break
		}
	}
	e := &entry{}
	s.m[k] = e
	return e
}

// Take returns and clears k's unreported declines for its next Redis call
// at local ms now (Restore gives them back if it fails); once the bucket
// they joined has died (ResetAt) they are dropped, as in Redis.
func (m *Memory) Take(k string, now int64) int64 {
	s := m.shard(k)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e := s.m[k]; e != nil && e.decl.Load() != 0 {
		if d := e.decl.Swap(0); now < e.f.reset {
			return d
		}
	}
	return 0
}

// Pending is k's declines not yet reported, for Get to count while the
// bucket they joined lives.
func (m *Memory) Pending(k string, now int64) int64 {
	s := m.shard(k)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e := s.m[k]; e != nil && now < e.f.reset {
		return e.decl.Load()
	}
	return 0
}

// Restore gives back declines Take returned when the call failed (if it
// did report them, counting twice only admits less).
func (m *Memory) Restore(k string, d, now int64) {
	if d == 0 {
		return
	}
	s := m.shard(k)
	s.mu.Lock()
	e := m.entry(s, k, now)
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
