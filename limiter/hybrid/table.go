package hybrid

import (
	"context"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/config"
	"github.com/sluice-go/sluice/internal/failover"
	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/internal/redisx"
	"github.com/sluice-go/sluice/internal/relief"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/rediscore"
)

// Client is the part of a go-redis client the limiter calls, the one
// redisabs and redissup take. When the client also has Pipeline
// (*redis.Client, *redis.ClusterClient, *redis.Ring and the failover
// clients of go-redis v9 all do) or ScriptPipelined (the rueidis adapter of
// module sluicerueidis), the background sync sends each tick's calls in
// pipelines, which a cluster client splits per node.
type Client = rediscore.Client

// Tuning of the sync. These bound the work of one tick: a tick visits at
// most maxVisits keys and makes at most maxCalls calls of its script, in
// pipelines of pipeBatch, whatever the number of keys in memory.
const (
	// maxVisits is the most tracked keys one tick looks at; the others
	// wait for the next tick, in order.
	maxVisits = 16_384
	// maxCalls is the most Redis calls (releases, renewals and
	// refreshes) one tick makes.
	maxCalls = 1_024
	// pipeBatch is the most calls in one pipeline.
	pipeBatch = 512
	// renewWithin × (B + sync interval) is how recently a key must have
	// been used for the tick to renew its expiring lease.
	renewWithin = 4
	// idleTicks is how many ticks without a call and without a lease a
	// key stays in memory (with its lease size). They are ticks, not
	// visits: with more keys than a tick visits, a key is visited once
	// every few ticks, and each visit counts the ticks since the last.
	idleTicks = 20
	// shrinkBelow: a shard's map is rebuilt when it holds a shrinkBelow-th
	// of the most it held since it was built, and that peak was at least
	// shrinkMin (Go maps never shrink by themselves).
	shrinkBelow, shrinkMin = 4, 16
)

// MaxKeys bounds the keys a limiter holds in memory, those with a lease,
// a cached refusal or a history. An Inc of a key that finds MaxKeys others
// in memory takes no entry: Redis decides it, as redisabs (or redissup)
// would, with no lease and no cached refusal, until idle keys leave memory.
// It is 4 × maxVisits, so that a tick's walk covers the table every 4
// ticks, and as many keys as hot-key relief remembers (relief.MaxKeys).
// No option sets it: a key it turns away costs what the Redis provider
// costs, while a larger table would slow the walk, and with it renewals
// and reclamation, in proportion (docs/algorithms.md, Hybrid leases).
const MaxKeys = 4 * maxVisits

const shardCount = 64

// table is the lease table both strategies share: the keys in memory
// (shards of a map), the background sync that visits them (tick, visit,
// sendBatch), the one lease request per key in flight (lease), the
// give-back of unused units, and Close. E is the strategy's entry, a
// pointer to a struct that embeds entry; s is the strategy, which makes
// the local decisions, the lease requests and the sync's script calls.
// Absolute and Suppressed embed a table.
type table[E keyEntry] struct {
	b        redisx.Base
	g        failover.Guard
	s        strategy[E]
	kind     kind[E]
	closed   atomic.Bool
	seed     maphash.Seed
	shards   [shardCount]shard[E]
	interval time.Duration
	maxLease int64
	// ahead is the most ms a lease's bucket may start after now
	// (WithLeaseAhead), 0 for none.
	ahead int64

	// count is the keys in the shards' maps, at most maxKeys (entryFor:
	// MaxKeys, lower in tests); full counts the Incs decided without an
	// entry because of it.
	count, full atomic.Int64
	maxKeys     int64
	// ticks counts the sync's ticks, for the idle count of the keys
	// (visit); only the tick running reads or writes it.
	ticks int64

	tmu     sync.Mutex // guards tracked and fresh
	tracked []E        // every key in memory, in visiting order
	fresh   []E        // keys added since the last tick
	// spare is the array of the tracked keys before the latest tick,
	// cleared, for the next tick's list (ticks never run at once: the
	// loop's, then Close's): a tick over 10,000 keys allocates none.
	spare []E

	stop, done chan struct{}
	closeOnce  sync.Once
	peeks      relief.Peeks // IsAllowed calls in flight, shared

	// Redis calls by kind, for tests and benchmarks: an Inc's lease
	// request, a tick's renewal, release and refresh (a suppressed key's
	// figures and declines, no lease).
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
	// sparse: a key called further apart than its lease would live takes
	// no lease (take); newPlain: nor does a key without history (else its
	// first lease is forward-dated).
	sparse, newPlain bool
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
	// when refusals is true, its cached refusal (false while the breaker
	// is open: the policy answers what the lease cannot), with e.mu held;
	// ok false: Redis must be asked. A lease or refusal of a key dated
	// W + B or more ahead answers nothing (fromFuture).
	local(e E, q request, now int64, refusals bool) (d limiter.Decision, ok bool)
	// peek answers an IsAllowed from e's open lease, with e.mu held; ok
	// false: Redis must be asked.
	peek(e E, now int64) (d limiter.Decision, ok bool)
	// draw is an Inc's one number from the random source, in ppm, when
	// Redis decides it (absolute: none).
	draw() int64
	// unleased is the Redis call of an Inc that takes no lease: n = 0
	// (a peek for one unit), n above the hard capacity, or a key that
	// found no room in memory (MaxKeys).
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
	// fetch is held (one token) by the one lease request of an Inc in
	// flight for this key, and by Close while it gives the key's lease
	// back. Ticks take it without waiting for a call that leases or sends
	// declines (holdFetches); their renewals are installed only if no Inc
	// brought a lease meanwhile (gen).
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

	// A cached refusal (hot-key relief, the Redis providers' mechanism):
	// answered from memory until its RetryAfter, for the longer of the
	// sync interval and B at most.
	ref relief.Refusal

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
	if err := t.b.Init(config.ProviderHybrid, k.redis.Key(), client, opts); err != nil {
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
	k.redis.InitGuard(&t.g, config.ProviderHybrid, client, &t.b, opts)
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
		// A key with no history is taken for a slow one: its first lease
		// is forward-dated if it has room (the script decides); a
		// suppressed key's first call takes no lease (take).
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
