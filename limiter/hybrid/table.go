package hybrid

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

// Client is the part of a go-redis client the limiter calls, as redisabs
// and redissup take it. A client that also has Pipeline or ScriptPipelined
// (the rueidis adapter) gets each tick's calls in pipelines.
type Client interface {
	redis.Scripter
	Unlink(ctx context.Context, keys ...string) *redis.IntCmd
}

// Bounds of one tick's work, whatever the keys in memory.
const (
	maxVisits = 16_384 // keys one tick looks at; the rest wait, in order
	maxCalls  = 1_024  // Redis calls one tick makes
	pipeBatch = 512    // calls in one pipeline
	// renewWithin × (B + sync interval) is how recently a key must have
	// been used for a tick to renew its expiring lease.
	renewWithin = 4
	// idleTicks is how many ticks a key without calls or lease stays.
	idleTicks = 20
	// A shard's map is rebuilt when it holds a shrinkBelow-th of its peak
	// of at least shrinkMin (Go maps never shrink).
	shrinkBelow, shrinkMin = 4, 16
	shardCount             = 64
	// seenSlots is how many keys with no entry calledWithin remembers at
	// most: 128 KB a limiter.
	seenSlots = 1 << 14
)

// MaxKeys bounds the keys a limiter holds in memory, 4 × maxVisits so that
// the ticks cover the table every 4 ticks. An Inc of a key that finds no
// room is decided by Redis as redisabs (or redissup) would.
const MaxKeys = 4 * maxVisits

// table is what both strategies embed: the keys in memory, the background
// sync (tick.go), the lease requests (lease.go) and the calls that do not
// depend on the strategy. E is the strategy's entry.
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
	ahead    int64 // D in ms (WithLeaseAhead); 0: none

	count, full atomic.Int64             // keys in the maps; Incs decided with no room
	seen        [seenSlots]atomic.Uint64 // calls of keys with no entry (calledWithin)
	maxKeys     int64
	ticks       int64 // only the running tick touches it

	// Only the running tick touches these (ticks never overlap).
	tracked []E           // the keys each tick visits, in order, but the shards' fresh
	spare   []E           // the previous tick's array, reused
	parked  []parkSlot[E] // the keys off the list (park), oldest first

	stop, done chan struct{}
	closeOnce  sync.Once
	peeks      redisprov.Peeks // IsAllowed calls in flight, shared

	// Redis calls by kind, for tests and benchmarks.
	fetches, renewals, releases, refreshes atomic.Int64
	syncErrs, forwards                     atomic.Int64
}

// kind is what a table needs of its strategy besides its methods.
type kind[E keyEntry] struct {
	redis    redisprov.Strategy
	newEntry func() E
	sync     *redis.Script // the script of the sync's calls
	get      *redis.Script // Get's script, whose reply is usageLen values
	usageLen int
}

// keyEntry is a strategy's entry: a pointer to a struct embedding entry.
type keyEntry interface{ base() *entry }

// strategy is what differs between the absolute and the suppressed leases.
// Methods given e are called with e.mu held, but for fetchLease, called
// with the key's fetch token held.
type strategy[E keyEntry] interface {
	// capacities returns the soft and hard capacities of rate (absolute:
	// C and C), or an error naming op.
	capacities(op string, rate limiter.Rate) (soft, hard int64, err error)
	// local answers an Inc from e's lease or cached refusal (when refusals);
	// ok false: ask Redis.
	local(e E, q request, now int64, refusals bool) (d limiter.Decision, ok bool)
	// peek answers an IsAllowed from e's open lease; ok false: ask Redis.
	peek(e E, now int64) (d limiter.Decision, ok bool)
	// draw is an Inc's one random number in ppm (absolute: 0).
	draw() int64
	// unleased is the Redis call of an Inc that takes no lease (n = 0, n
	// above hard, or no room in memory); peekRedis is IsAllowed's.
	unleased(ctx context.Context, k string, q request) (limiter.Decision, error)
	peekRedis(ctx context.Context, k string) (limiter.Decision, error)
	// fetchLease sends lease request a for Inc q and reads its reply.
	fetchLease(ctx context.Context, e E, q request, a ask) (limiter.Decision, error)
	// alone is Inc q's Redis call of hash h without a lease, as the Redis
	// provider makes it, and how long (ms) its refusal may be remembered
	// (0: not at all).
	alone(ctx context.Context, h string, q request) (r window.Result, life int64, err error)
	// refresh reports whether a tick must call Redis for e although it
	// gives nothing back and renews nothing.
	refresh(e E, now, used int64, closing bool) bool
	// syncArgs is the ARGV of a tick's call; held: the call holds the
	// key's fetch token, without which it leases nothing. synced reads its
	// reply v, sent at send.
	syncArgs(s *syncCall[E], held bool) []any
	synced(s *syncCall[E], held bool, send int64, v any) error
}

// request is an Inc: n units at capacities soft and hard and, once drawn,
// its draw.
type request struct {
	soft, hard, n, draw int64
	drawn               bool
}

type shard[E keyEntry] struct {
	mu    sync.RWMutex
	m     map[string]E
	peak  int // the most keys m held since it was built (shrink)
	fresh []E // keys added since the last tick, which takes them
}

// entry is one key's local state. Fields after mu are guarded by it.
type entry struct {
	key, hash string
	fails     atomic.Int64 // the key's failed lease requests (leaseOnce)

	mu sync.Mutex
	// fetching is the key's fetch token, held by its one lease request in
	// flight (and by Close's give-back); ticks take it without waiting
	// (sendBatch). wake, when not nil, is closed as the token comes back,
	// for the callers waiting for it.
	fetching   bool
	wake       chan struct{}
	gone       bool  // removed from the map: look the key up again
	parked     int8  // off the ticks' list since the tick visited (park): 1, or 2 called since; back on it, not visited since: -1 called, -2 not
	soft, hard int64 // the capacities of the lease and the refusal

	// The lease: left units, usable while now < until (local ms), in the
	// bucket that started at start (script clock); granted units. until
	// is no later than the bucket stops taking units, so each unit counts
	// in Redis at least W after its admission (install).
	start, until, left, granted int64
	// acc is the key's units in Redis at the latest reply, this lease's
	// included; resetAt (local ms) is when its newest bucket dies. Both
	// are as old as the latest reply: a decision from memory reports them.
	acc, resetAt int64
	// decl are the units declined from memory since the last call
	// (suppressed), sent by the next one.
	decl int64
	// ref is the cached refusal, answered until Redis' RetryAfter and at
	// most refusalLife (absolute) or one sync interval (suppressed).
	ref redisprov.Refusal

	used    int64   // units admitted since the last tick
	est     float64 // units admitted per tick, smoothed
	want    int64   // the next lease's size
	gen     int64   // leases installed so far
	hits    int64   // decisions the current lease answered
	renews  int     // renewals sent and not yet answered
	lastUse int64   // local ms of the latest local decision or lease
	pend    []int64 // (bucket start, units) of replaced leases, for the next tick to give back
	idle    int64   // ticks without a call, as of the latest visit
	visited int64   // the tick of the latest visit
	pace
}

func (e *entry) base() *entry { return e }

// init sets t up for s, of kind k, and starts the sync.
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
	switch a := cfg.LeaseAhead; { // 0: unset, negative: off
	case a == 0:
		t.ahead = min(cfg.WindowMs/20, DefaultLeaseAheadMax.Milliseconds())
	case a > cfg.Window/4:
		return t.errorf("new", fmt.Errorf("%w: lease ahead %v above W/4 (%v)", limiter.ErrInvalidConfig, a, cfg.Window/4))
	case a > 0:
		t.ahead = a.Milliseconds()
	}
	t.maxKeys = MaxKeys
	for i := range t.shards {
		t.shards[i].m = make(map[string]E)
	}
	t.g.Init(&t.b, opts, redisprov.Probe(&t.b.Cfg))
	t.b.SetGate(t.g.Opened)
	go t.loop()
	return nil
}

func (t *table[E]) now() int64 { return t.b.Cfg.NowMs() }

func (t *table[E]) errorf(op string, err error) error { return t.b.Errorf(op, err) }

// span is W + B in ms: memory dated that far ahead answers nothing
// (fromFuture).
func (t *table[E]) span() int64 { return t.b.Cfg.WindowMs + t.b.Cfg.BucketMs }

func (t *table[E]) shardOf(k string) *shard[E] {
	return &t.shards[maphash.String(t.seed, k)%shardCount]
}

func (t *table[E]) lookup(k string) (E, bool) {
	s := t.shardOf(k)
	s.mu.RLock()
	e, ok := s.m[k]
	s.mu.RUnlock()
	return e, ok
}

// calledWithin reports whether k, with no entry, was called less than a
// lease's life (B + D, the most a new key's lease serves) before now
// (local ms), and when; it records this call. The records are kept in pairs of
// slots by hash, a new key's taking the older of its pair's: keys sharing a
// pair may forget each other, which only delays an entry.
func (t *table[E]) calledWithin(k string, now int64) (last int64, ok bool) {
	h := maphash.String(t.seed, k)
	tag, pair := h>>32, t.seen[h%seenSlots&^1:][:2]
	rec := tag<<32 | uint64(uint32(now))
	ago := func(v uint64) int64 { return int64(uint32(now) - uint32(v)) } // wraps as the clock's low 32 bits do
	for i := range pair {
		if v := pair[i].Load(); v>>32 == tag {
			pair[i].Store(rec)
			if a := ago(v); a < t.b.Cfg.BucketMs+t.ahead {
				return now - a, true
			}
			return 0, false
		}
	}
	if ago(pair[0].Load()) >= ago(pair[1].Load()) {
		pair[0].Store(rec)
	} else {
		pair[1].Store(rec)
	}
	return 0, false
}

// entryFor returns k's entry, creating it (which validates the key) with
// its latest call at last (local ms); ok false: the table is full and k
// has none.
func (t *table[E]) entryFor(op, k string, last int64) (e E, ok bool, err error) {
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
		e = t.kind.newEntry()
		x := e.base()
		x.key, x.hash, x.want, x.pace, x.lastUse = k, h, 1, pace{slow: true}, last
		s.m[k] = e
		s.peak = max(s.peak, len(s.m))
		s.fresh = append(s.fresh, e)
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

// shrink rebuilds the maps that hold a shrinkBelow-th of their peak or
// less, giving back the memory of keys gone.
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

// inc is the rest of Inc once memory had no answer.
func (t *table[E]) inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	if t.closed.Load() {
		return limiter.Decision{}, t.errorf("inc", limiter.ErrClosed)
	}
	if err := window.CheckCost(n); err != nil {
		return limiter.Decision{}, t.errorf("inc", err)
	}
	if _, _, err := t.s.capacities("inc", rate); err != nil {
		return limiter.Decision{}, err
	}
	return t.g.Decide(ctx, (*backend[E])(t), "inc", k, rate, n, false)
}

// Window returns the window the limiter was built with (WithWindow).
func (t *table[E]) Window() time.Duration { return t.b.Cfg.Window }

// IsAllowed reports whether one more unit of key would be admitted now
// (suppressed: without suppression, with the factor an Inc would apply
// above S). It answers from memory while this instance's lease of the key
// is open, else from Redis at the capacities the key's latest Inc stored
// (a key with no live state is allowed, with Limit 0), under the failure
// policy. It writes nothing and draws nothing. After Close it returns
// ErrClosed.
func (t *table[E]) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	if t.closed.Load() {
		return limiter.Decision{}, t.errorf("is allowed", limiter.ErrClosed)
	}
	if e, ok := t.lookup(k); ok {
		now := t.now()
		x := e.base()
		x.mu.Lock()
		if !x.gone && now < x.until && !fromFuture(now, x.resetAt, t.span()) {
			if d, ok := t.s.peek(e, now); ok {
				x.mu.Unlock()
				t.g.Observe(ctx, "is allowed", k, 0, d)
				return d, nil
			}
		}
		x.mu.Unlock()
	}
	return t.g.Decide(ctx, (*backend[E])(t), "is allowed", k, limiter.Rate{}, 0, true)
}

// Get returns key's usage in Redis and its stored (soft) capacity: every
// instance's admitted units (suppressed: accepted as Used, and declined),
// other instances' unused leases counted as used and their unsent declines
// left out; this instance's unused lease left out and its unsent declines
// put in. Redis failures are errors, as for redisabs; after Close it
// returns ErrClosed.
func (t *table[E]) Get(ctx context.Context, k string) (limiter.Usage, error) {
	if t.closed.Load() {
		return limiter.Usage{}, t.errorf("get", limiter.ErrClosed)
	}
	return t.g.Get(ctx, (*backend[E])(t), &t.b, k)
}

// Reset forgets key: it drops this instance's lease, cached refusal and
// unsent declines, UNLINKs the key's hash and drops what the local
// fallback holds for it. Other instances' leases of the key stay theirs
// until they expire. Redis failures are errors; after Close it returns
// ErrClosed.
func (t *table[E]) Reset(ctx context.Context, k string) error {
	if t.closed.Load() {
		return t.errorf("reset", limiter.ErrClosed)
	}
	if e, ok := t.lookup(k); ok {
		x := e.base()
		x.mu.Lock()
		x.left, x.until, x.decl, x.acc = 0, 0, 0, 0
		x.ref.Clear()
		x.mu.Unlock()
	}
	return t.g.Reset(ctx, &t.b, k)
}

// Ping checks that Redis answers, as redisabs.Limiter.Ping does: one
// script call bounded by WithTimeout on top of ctx; a failure is an error
// naming the address. Call it at start-up.
func (t *table[E]) Ping(ctx context.Context) error { return t.g.Ping(ctx) }

// IncSet decides n units of key in every limit of set exactly as
// redisabs.Limiter.IncSet (or redissup's) does, asking Redis on every
// call: sets are not leased, and their hashes are apart from the key's
// single limit and its lease. n = 0 decides for one unit and records
// nothing. Errors and the failure policy are Inc's.
func (t *table[E]) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return t.g.DecideSet(ctx, redisprov.SetsOf(&t.b), "inc set", k, set, n)
}

// GetSet returns key's usage in each limit of set, in the set's order, as
// Get does for one limit. Redis failures are errors.
func (t *table[E]) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return t.g.GetSet(ctx, redisprov.SetsOf(&t.b), k, set)
}

// ResetSet forgets key's state in every limit of set, in Redis and in the
// local fallback; the key's single limit and its lease stay. Redis
// failures are errors.
func (t *table[E]) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return t.g.ResetSet(ctx, redisprov.SetsOf(&t.b), k, set)
}

// fromFuture reports whether memory whose key's newest bucket dies at
// reset (local ms) is of a key Redis now treats as dead
// (window.FromFuture): it then answers nothing.
func fromFuture(now, reset, span int64) bool { return window.FromFuture(now, reset-span, span) }

func msDur(ms int64) time.Duration {
	if ms <= 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}
