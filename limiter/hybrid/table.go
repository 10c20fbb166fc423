package hybrid

import (
	"context"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/internal/window"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/limiter"
)

// Client is the part of a go-redis client the limiter calls, as redisabs
// and redissup take it. A client that also has Pipeline or ScriptPipelined
// (the rueidis adapter) gets each tick's calls in pipelines.
type Client interface {
	redis.Scripter
	Unlink(ctx context.Context, keys ...string) *redis.IntCmd
}

// Tuning of the sync, bounding one tick's work whatever the keys in memory.
const (
	maxVisits = 16_384 // tracked keys one tick looks at; the rest wait, in order
	maxCalls  = 1_024  // Redis calls (releases, renewals, refreshes) one tick makes
	pipeBatch = 512    // calls in one pipeline
	// renewWithin × (B + sync interval) is how recently a key must have
	// been used for a tick to renew its expiring lease.
	renewWithin = 4
	// idleTicks is how many ticks (not visits) a key without calls or
	// lease stays in memory.
	idleTicks = 20
	// A shard's map is rebuilt when it holds a shrinkBelow-th of its peak
	// of at least shrinkMin (Go maps never shrink).
	shrinkBelow, shrinkMin = 4, 16
)

// MaxKeys bounds the keys a limiter holds in memory. An Inc of a key that
// finds no room is decided by Redis as redisabs (or redissup) would. 4 ×
// maxVisits: a tick's walk covers the table every 4 ticks
// (docs/algorithms.md, Hybrid leases).
const MaxKeys = 4 * maxVisits

const shardCount = 64

// table is the lease table both strategies embed: the keys in memory, the
// background sync (tick.go), the one lease request per key in flight
// (lease.go), the give-back of unused units, and Close. E is the
// strategy's entry (embeds entry); s makes the local decisions, lease
// requests and sync calls.
type table[E keyEntry] struct {
	b        redisprov.Base
	g        redisprov.Guard
	s        strategy[E]
	kind     kind[E]
	closed   atomic.Bool
	seed     maphash.Seed
	shards   [shardCount]shard[E]
	interval time.Duration
	maxLease int64
	ahead    int64 // the most ms a lease's bucket may start after now; 0: none

	// count is the keys in the maps, at most maxKeys (MaxKeys, lower in
	// tests); full counts the Incs decided without an entry.
	count, full atomic.Int64
	maxKeys     int64
	ticks       int64 // the sync's ticks; only the running tick touches it

	tmu     sync.Mutex // guards tracked and fresh
	tracked []E        // every key in memory, in visiting order
	fresh   []E        // keys added since the last tick
	spare   []E        // the previous tick's array, cleared, reused (ticks never overlap)

	stop, done chan struct{}
	closeOnce  sync.Once
	peeks      redisprov.Peeks // IsAllowed calls in flight, shared

	// Redis calls by kind, for tests and benchmarks.
	fetches, renewals, releases, refreshes atomic.Int64
	syncErrs                               atomic.Int64 // failed calls of ticks
	forwards                               atomic.Int64 // grants in a bucket after now
}

// kind is what a table needs to know of its strategy besides its code.
type kind[E keyEntry] struct {
	redis    redisprov.Strategy // the Redis strategy: keys, guard, validation
	newEntry func() E           // a zero entry
	sync     *redis.Script      // the script of the sync's calls
	get      *redis.Script      // Get's script, whose reply is usageLen values
	usageLen int
}

// keyEntry is a strategy's entry: a pointer to a struct embedding entry.
type keyEntry interface{ base() *entry }

// strategy is what differs between the absolute and the suppressed
// leases, for the table's code.
type strategy[E keyEntry] interface {
	// capacities returns the soft and hard capacities of rate (absolute:
	// C and C), or an error naming op.
	capacities(op string, rate limiter.Rate) (soft, hard int64, err error)
	// local answers an Inc of q.n units (1 ≤ n ≤ hard) from e's lease or,
	// when refusals is true, its cached refusal, with e.mu held; ok false:
	// ask Redis. A key dated W + B or more ahead answers nothing.
	local(e E, q request, now int64, refusals bool) (d limiter.Decision, ok bool)
	// peek answers an IsAllowed from e's open lease, with e.mu held; ok
	// false: Redis must be asked.
	peek(e E, now int64) (d limiter.Decision, ok bool)
	// draw is an Inc's one number from the random source, in ppm, when
	// Redis decides it (absolute: none).
	draw() int64
	// unleased is the Redis call of an Inc that takes no lease (n = 0, n
	// above hard, or no room in memory).
	unleased(ctx context.Context, k string, q request) (limiter.Decision, error)
	// peekRedis is IsAllowed's Redis call.
	peekRedis(ctx context.Context, k string) (limiter.Decision, error)
	// fetchLease sends the lease request a of an Inc q that memory could
	// not answer, with e.fetch held, and reads its reply.
	fetchLease(ctx context.Context, e E, q request, a ask) (limiter.Decision, error)
	// refresh reports, with e.mu held, whether a tick must call Redis
	// for e although it gives nothing back and renews nothing.
	refresh(e E, now, used int64, closing bool) bool
	// syncArgs is the ARGV of a tick's call; held: the call holds the
	// key's fetch token, without which it leases nothing.
	syncArgs(s *syncCall[E], held bool) []any
	// synced reads the reply v of a tick's call sent at send.
	synced(s *syncCall[E], held bool, send int64, v any) error
}

// request is an Inc: n units at capacities soft and hard (both C for
// absolute) and, once drawn, the call's draw (suppressed).
type request struct {
	soft, hard, n, draw int64
	drawn               bool
}

type shard[E keyEntry] struct {
	mu   sync.RWMutex
	m    map[string]E
	peak int // the most keys m held since it was built (shrink)
}

// entry is one key's local state, as both strategies keep it: its lease,
// its cached refusal, its rate and how it is used. Fields after mu are
// guarded by it.
type entry struct {
	key, hash string
	// fetch is a token held by the key's one lease request in flight, and
	// by Close while it gives the lease back; ticks take it without waiting
	// (holdFetches), and their renewals install only if gen did not move.
	fetch chan struct{}
	// fails counts the lease requests of the key that failed (takeFetch).
	fails atomic.Int64

	mu         sync.Mutex
	gone       bool  // removed from the map: look the key up again
	soft, hard int64 // the capacities of the lease and the cache (absolute: C and C)

	// The lease: left units, usable while now < until (local ms), held in
	// the bucket that started at start (script clock); granted units.
	start, until, left, granted int64
	// acc is the units the key held in Redis at the latest reply, every
	// unit of this instance's lease counted; resetAt (local ms) is when
	// the key's newest bucket dies.
	acc, resetAt int64
	// decl are the units declined from memory since the last call, which
	// the next call records as offered and declined (suppressed only).
	decl int64

	ref redisprov.Refusal // the cached refusal (hot-key relief's rule)

	used    int64   // units admitted since the last tick
	est     float64 // units admitted per tick, smoothed
	want    int64   // the next lease's size
	gen     int64   // leases installed so far
	hits    int64   // decisions the current lease answered from memory
	renews  int     // renewals sent and not yet answered
	lastUse int64   // local ms of the latest local decision or lease
	// pend are unused units of replaced leases, for the next tick to give
	// back: (bucket start, units) pairs.
	pend    []int64
	idle    int64 // ticks without a call, as of the latest visit
	visited int64 // the tick of the latest visit (table.ticks)
	pace
}

func (e *entry) base() *entry { return e }

// init sets t up for s, of kind k, over client, and starts the
// sync.
func (t *table[E]) init(s strategy[E], k kind[E], client Client, opts []limiter.Option) error {
	t.s, t.kind = s, k
	t.seed, t.stop, t.done = maphash.MakeSeed(), make(chan struct{}), make(chan struct{})
	if err := t.b.Init(window.ProviderHybrid, k.redis.Key(), client, opts); err != nil {
		return err
	}
	cfg := &t.b.Cfg
	t.interval = cfg.SyncInterval
	if t.interval <= 0 {
		t.interval = DefaultSyncInterval
	}
	t.maxLease = cfg.MaxLease
	if t.maxLease <= 0 {
		t.maxLease = math.MaxInt64
	}
	ahead, err := leaseAhead(cfg)
	if err != nil {
		return t.errorf("new", err)
	}
	t.ahead = ahead
	t.maxKeys = MaxKeys
	for i := range t.shards {
		t.shards[i].m = make(map[string]E)
	}
	k.redis.InitGuard(&t.g, window.ProviderHybrid, client, &t.b, opts)
	t.b.SetGate(t.g.Opened)
	go t.loop()
	return nil
}

func (t *table[E]) now() int64 { return t.b.Cfg.NowMs() }

func (t *table[E]) errorf(op string, err error) error { return t.b.Errorf(op, err) }

// span is W + B in ms: a lease or refusal of a key dated that far ahead
// answers nothing (fromFuture).
func (t *table[E]) span() int64 { return t.b.Cfg.WindowMs + t.b.Cfg.BucketMs }

func (t *table[E]) shardOf(k string) *shard[E] {
	return &t.shards[maphash.String(t.seed, k)%shardCount]
}

// lookup returns k's entry, if it has one.
func (t *table[E]) lookup(k string) (E, bool) {
	s := t.shardOf(k)
	s.mu.RLock()
	e, ok := s.m[k]
	s.mu.RUnlock()
	return e, ok
}

// entryFor returns k's entry, creating it (which validates the key); ok
// false: the table holds MaxKeys keys, and k has none.
func (t *table[E]) entryFor(op, k string) (e E, ok bool, err error) {
	if e, ok := t.lookup(k); ok {
		return e, true, nil
	}
	h, err := t.b.Check(op, k)
	if err != nil {
		return e, false, err
	}
	s := t.shardOf(k)
	s.mu.Lock()
	e, ok = s.m[k]
	if !ok {
		if t.count.Add(1) > t.maxKeys {
			t.count.Add(-1)
			s.mu.Unlock()
			return e, false, nil
		}
		// A key with no history is taken for a slow one (pace).
		e = t.kind.newEntry()
		x := e.base()
		x.key, x.hash, x.fetch, x.want, x.pace = k, h, make(chan struct{}, 1), 1, pace{slow: true}
		s.m[k] = e
		s.peak = max(s.peak, len(s.m))
		t.tmu.Lock()
		t.fresh = append(t.fresh, e)
		t.tmu.Unlock()
	}
	s.mu.Unlock()
	return e, true, nil
}

// forget removes x from the map, with x.mu held.
func (t *table[E]) forget(x *entry) {
	x.gone = true
	s := t.shardOf(x.key)
	s.mu.Lock()
	if cur, ok := s.m[x.key]; ok && cur.base() == x {
		delete(s.m, x.key)
		t.count.Add(-1)
	}
	s.mu.Unlock()
}

// shrink rebuilds the maps of the shards that hold a shrinkBelow-th of
// their peak or less, so that the memory of keys gone is given back.
func (t *table[E]) shrink() {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		if s.peak >= shrinkMin && len(s.m) <= s.peak/shrinkBelow {
			m := make(map[string]E, len(s.m))
			for k, e := range s.m {
				m[k] = e
			}
			s.m, s.peak = m, len(m)
		}
		s.mu.Unlock()
	}
}
