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
	"github.com/sluice-go/sluice/internal/window"
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
	if err := t.b.Init(limiter.ProviderHybrid, k.redis.Key(), client, opts); err != nil {
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
	k.redis.InitGuard(&t.g, limiter.ProviderHybrid, client, &t.b, opts)
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
			// No room for k: Redis decides, as for a call that takes no
			// lease. k holds nothing in memory (a key leaves it only
			// when it holds nothing), so nothing is left to give back.
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
// lease (a sparse strategy's key called further apart than a lease
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
	// plain: the key's calls come further apart than the lease would
	// live (or, for newPlain, it has no history), so that it would be
	// given back unused at the cost of a release call: the call decides n
	// alone, as the Redis provider would, and the next call that follows
	// within a lease's life asks for a lease (forward-dated, for a slow
	// key). Many keys called once in a while (or once each, newPlain)
	// cost one call per decision and no release.
	if t.kind.sparse && (x.lastUse == 0 && t.kind.newPlain || x.lastUse != 0 && now-x.lastUse >= t.b.Cfg.BucketMs+a.ahead) {
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

// install makes units x's lease, with x.mu held: they are held in the
// bucket that started at start on the script's clock, whose time was now;
// send is the local time at which the call was sent. The lease may be used
// until its bucket stops taking units, start + B on the script's clock
// (start may be after now: a forward-dated lease): every unit admitted
// before then counts from the grant until start + W + B, at least W after
// its admission. The script ran at or after send, so send + (start + B −
// now) is no later than that instant on the local clock.
//
// A lease still held (a renewal answered while an Inc's request was in
// flight) is replaced: its unused units go to pend, for the next tick to
// give back.
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
// capacities. When an Inc installed a lease meanwhile, or the capacities
// changed, the units are given back by the next tick instead (x cannot
// leave the map with a renewal in flight, but its units must never be
// lost); otherwise the old lease's unused units are.
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

// own returns what of k's Redis figures is this instance's: the unused
// units of its lease that Redis still counts (until the lease's bucket
// dies, W after the lease stopped serving, unless released before), and
// the declines not yet sent.
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

// usage is the Redis call of a Get: the get script's reply for k,
// usageLen values (used, declined for the suppressed strategy, capacity),
// with this instance's unused lease left out and its declines not yet
// sent put in.
func (t *table[E]) usage(ctx context.Context, k string) (limiter.Usage, error) {
	script, width := t.kind.get, t.kind.usageLen
	h, err := t.b.Check("get", k)
	if err != nil {
		return limiter.Usage{}, err
	}
	v, err := t.b.Run(ctx, script, []string{h}, redisx.NowArg(&t.b.Cfg), t.b.W, t.b.B)
	if err != nil {
		return limiter.Usage{}, t.errorf("get", err)
	}
	x, err := redisx.Int64s(v, width)
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

// shared is IsAllowed's Redis call fn: identical concurrent ones share a
// round trip (hot-key relief) unless relief is off.
func (t *table[E]) shared(ctx context.Context, k string, fn func(ctx context.Context) (limiter.Decision, error)) (limiter.Decision, error) {
	if t.b.Cfg.NoRelief {
		return fn(ctx)
	}
	return t.peeks.Do(ctx, k, fn)
}

// inc is the rest of Inc for both strategies, once the strategy's Inc
// found no answer in memory (Absolute.Inc and Suppressed.Inc try the
// key's lease and cached refusal first, calling the strategy's code
// directly): the argument checks, then the failure policy's decision.
func (t *table[E]) inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	if t.closed.Load() {
		return limiter.Decision{}, t.errorf("inc", limiter.ErrClosed)
	}
	if err := config.CheckCost(n); err != nil {
		return limiter.Decision{}, t.errorf("inc", err)
	}
	if _, _, err := t.s.capacities("inc", rate); err != nil {
		return limiter.Decision{}, err
	}
	return t.g.Decide(ctx, (*backend[E])(t), "inc", k, rate, n, false)
}

// allowed is IsAllowed for both strategies: from memory while this
// instance's lease of the key is open and the strategy's peek answers,
// else under the failure policy.
func (t *table[E]) allowed(ctx context.Context, k string) (limiter.Decision, error) {
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

// get is Get for both strategies: Redis failures are errors, as for the
// Redis providers.
func (t *table[E]) get(ctx context.Context, k string) (limiter.Usage, error) {
	if t.closed.Load() {
		return limiter.Usage{}, t.errorf("get", limiter.ErrClosed)
	}
	return t.g.Get(ctx, (*backend[E])(t), &t.b, k)
}

// reset is Reset for both strategies: it drops this instance's lease,
// cached refusal and declines not yet sent (the figures serve only a
// lease, and the next lease comes with its own), UNLINKs the key's hash
// and drops what the local fallback holds for it.
func (t *table[E]) reset(ctx context.Context, k string) error {
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

// backend is a table as its Guard sees it (failover.Backend).
type backend[E keyEntry] table[E]

// Validate checks an Inc (or, with peek, an IsAllowed) for the policy.
func (be *backend[E]) Validate(op, k string, rate limiter.Rate, n int64, peek bool) (*failover.Call, error) {
	t := (*table[E])(be)
	return t.kind.redis.Call(&t.b, op, k, rate, n, peek)
}

// Decide is the Redis call of an Inc or, with peek, an IsAllowed
// (identical concurrent ones share a round trip: hot-key relief). An Inc
// draws its one number here (the suppressed strategy).
func (be *backend[E]) Decide(ctx context.Context, k string, rate limiter.Rate, n int64, peek bool) (limiter.Decision, error) {
	t := (*table[E])(be)
	if peek {
		return t.shared(ctx, k, func(ctx context.Context) (limiter.Decision, error) { return t.s.peekRedis(ctx, k) })
	}
	soft, hard, err := t.s.capacities("inc", rate)
	if err != nil {
		return limiter.Decision{}, err
	}
	q := request{soft: soft, hard: hard, n: n, draw: t.s.draw(), drawn: true}
	if n == 0 || n > hard {
		// A peek or a request that can never fit: no lease is involved.
		return t.s.unleased(ctx, k, q)
	}
	return t.lease(ctx, k, q)
}

// Usage is the Redis call of a Get.
func (be *backend[E]) Usage(ctx context.Context, k string) (limiter.Usage, error) {
	return (*table[E])(be).usage(ctx, k)
}

// fromFuture reports whether a lease or cached refusal whose key's newest
// bucket dies at reset (local ms) came from a key that Redis now treats as
// dead: its newest bucket starts span (W + B) or more after now, because
// the local clock stepped back (docs/algorithms.md, Clocks that jump).
// Memory then answers nothing, as Redis would not.
func fromFuture(now, reset, span int64) bool { return window.FromFuture(now, reset-span, span) }

func msDur(ms int64) time.Duration {
	if ms <= 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// close is Close for both strategies.
func (t *table[E]) close(ctx context.Context) error {
	var err error
	t.closeOnce.Do(func() {
		t.closed.Store(true)
		t.b.Close()
		close(t.stop)
		select {
		case <-t.done:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		// Calls whose callers left (a client without context
		// timeouts) may still install leases: wait for them, so that
		// the closing tick gives those back too.
		if err = t.g.WaitCalls(ctx); err != nil {
			return
		}
		if !t.g.Open() {
			t.tick(ctx, true)
		}
		err = t.g.Close(ctx)
		if werr := t.b.Wait(ctx); err == nil {
			err = werr
		}
	})
	return err
}

// loop runs the sync every interval until Close.
func (t *table[E]) loop() {
	defer close(t.done)
	tk := time.NewTicker(t.interval)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tk.C:
			if !t.g.Open() {
				ctx, cancel := context.WithTimeout(context.Background(), syncTimeout(&t.b.Cfg))
				t.tick(ctx, false)
				cancel()
			} else {
				t.tick(nil, false) // memory only: no Redis call while it is down
			}
		}
	}
}

// syncCall is one key's call of a tick: give back rel unused units held
// in the bucket that started at start, record push declines (suppressed),
// and, for a renewal, reserve a new lease of up to want units for the
// lease of generation gen. releaseOnly: it gives back the units of a
// replaced lease, and its reply's figures are not the current lease's.
type syncCall[E keyEntry] struct {
	e                  E
	soft, hard         int64
	start, rel, push   int64
	want, gen          int64
	ahead              int64 // a renewal's D argument
	renew, releaseOnly bool
}

// tick visits the keys in memory, at most maxVisits of them, and makes at
// most maxCalls Redis calls, in pipelines of pipeBatch: it updates each
// key's rate and lease size, forgets the idle ones, gives back unused
// units, and renews the leases of keys in use that would expire before
// the next tick, so that their callers keep answering from memory; a
// suppressed key's tick also sends the declines made from memory and
// refreshes the figures of open leases (Suppressed.refresh), so that every
// instance decides with the fleet's rate of at most one interval ago. The
// old lease keeps serving until the new one is installed; what is left of
// it is given back by the next tick. A tick never makes a caller wait.
// closing gives back every lease and renews none, first waiting (until ctx
// is done) for each key's Redis call in flight; ctx nil makes no Redis
// call.
func (t *table[E]) tick(ctx context.Context, closing bool) {
	t.tmu.Lock()
	t.tracked = append(t.tracked, t.fresh...)
	t.fresh = nil
	all := t.tracked
	t.tmu.Unlock()

	visit := all
	if !closing && len(visit) > maxVisits {
		visit = visit[:maxVisits]
	}
	now := t.now()
	t.ticks++
	keep := t.spare[:0]
	var calls []syncCall[E]
	for _, e := range visit {
		if ctx != nil && !closing && len(calls) >= maxCalls {
			keep = append(keep, e)
			continue
		}
		fetch := e.base().fetch
		held := false
		if closing {
			select {
			case fetch <- struct{}{}:
				held = true
			case <-ctx.Done():
			}
		}
		var stay bool
		calls, stay = t.visit(calls, e, now, closing, ctx != nil)
		if held {
			<-fetch
		}
		if stay {
			keep = append(keep, e)
		}
	}
	t.tmu.Lock()
	rest := all[len(visit):]
	// keys added meanwhile are in t.fresh; the unvisited go first
	if len(rest) == 0 {
		t.tracked = keep
	} else {
		t.tracked = append(append(make([]E, 0, len(rest)+len(keep)), rest...), keep...)
	}
	t.tmu.Unlock()
	clear(all) // no key forgotten stays reachable from it
	t.spare = all[:0]
	if forgot := len(visit) - len(keep); forgot > 0 && !closing {
		t.shrink()
		if cap(all) >= shrinkMin && len(all)-forgot <= cap(all)/shrinkBelow {
			t.spare = nil // the next tick's list is allocated to its size
		}
	}

	for len(calls) > 0 && ctx.Err() == nil {
		n := min(len(calls), pipeBatch)
		t.sendBatch(ctx, calls[:n])
		calls = calls[n:]
	}
}

// visit looks at one key for a tick and appends its calls, if any. It
// reports whether the key stays in memory.
func (t *table[E]) visit(calls []syncCall[E], e E, now int64, closing, redisOK bool) ([]syncCall[E], bool) {
	x := e.base()
	x.mu.Lock()
	defer x.mu.Unlock()
	used := x.used
	x.used = 0
	x.est = (x.est + float64(used)) / 2
	// About two sync intervals' worth at the key's rate, or what the
	// last leases showed (resize), whichever is more.
	x.want = min(max(int64(math.Ceil(2*x.est)), x.want, 1), max(x.hard, 1), t.maxLease)
	// idle counts ticks: the ticks since the latest visit, or 1 when the
	// key was called since (a call sets it to 0), so that a key visited
	// every few ticks (more keys than maxVisits) is not kept longer.
	switch {
	case used > 0:
	case x.idle == 0:
		x.idle = 1
	default:
		x.idle += t.ticks - x.visited
	}
	x.visited = t.ticks
	if !redisOK {
		return calls, !closing
	}
	for i := 0; i+1 < len(x.pend); i += 2 {
		calls = append(calls, syncCall[E]{e: e, soft: x.soft, hard: x.hard, start: x.pend[i], rel: x.pend[i+1], releaseOnly: true})
	}
	x.pend = x.pend[:0]
	call := syncCall[E]{e: e, soft: x.soft, hard: x.hard, gen: x.gen}
	full := x.hard-x.acc < x.hard/4 // the key was nearly full at the latest reply
	expired := now >= x.until
	recent := now-x.lastUse < renewWithin*(t.b.Cfg.BucketMs+t.interval.Milliseconds())
	// quiet: a sparse strategy's unused units of an expired lease wait
	// to be given back by a tick until B + D after the key's latest use.
	// A call within that time sends them with its lease request (after a
	// quiet B + D it would take no lease, take), so the tick's
	// release is needed only for a key that stays quiet longer; meanwhile
	// they are counted, which only admits less.
	quiet := !t.kind.sparse || now-x.lastUse >= t.b.Cfg.BucketMs+x.aheadArg(t.ahead)
	switch {
	case closing:
		if x.left > 0 {
			call.start, call.rel = x.start, x.left
			x.left, x.until, x.granted = 0, 0, 0
		}
	case x.until > 0 && x.hits > 0 && recent && (x.left == 0 || !x.slow && now+t.interval.Milliseconds() >= x.until) && !(full && used == 0):
		// Holding a lease (not refused at its last request) that answered
		// from memory, in use lately, and used up, or expiring before the
		// next tick on a key that uses its leases up: renew. (A key called
		// less often than its leases live gains nothing from renewals, and
		// is left to its Incs: a slow key's lease with units left expires,
		// and the next Inc gives them back in its lease request.) A
		// lease still valid keeps serving until the reply installs the
		// new one (if no Inc brought one meanwhile); an expired one is
		// given back in the same call.
		if expired {
			if x.left > 0 {
				call.start, call.rel = x.start, x.left
				x.resize(t.maxLease)
			}
			x.left, x.until, x.granted = 0, 0, 0
			x.ended(call.rel > 0)
		}
		call.want, call.renew = t.wantFor(x, x.soft, x.hard), true
		call.ahead = x.aheadArg(t.ahead)
		x.renews++
	case x.left > 0 && used == 0 && (full || expired && quiet):
		// Idle since the last tick, and the lease has expired (and the key
		// stayed quiet) or the key was nearly full at the grant (others
		// may be waiting for those units): give the rest back (the script
		// skips a bucket that has died). A lease of an idle key with room
		// to spare is kept until it expires.
		call.start, call.rel = x.start, x.left
		x.resize(t.maxLease)
		if expired {
			x.ended(true)
		}
		x.left, x.until, x.granted = 0, 0, 0
	}
	if call.rel > 0 || call.renew || t.s.refresh(e, now, used, closing) {
		call.push = x.decl
		x.decl = 0
		calls = append(calls, call)
	}
	if closing {
		return calls, false
	}
	// A key whose fetch token is held has a lease request in flight (an
	// Inc's, which would install its lease in an entry that left).
	if x.idle >= idleTicks && x.left == 0 && len(x.pend) == 0 && x.renews == 0 && x.decl == 0 && !x.ref.Live(now) && len(x.fetch) == 0 {
		t.forget(x)
		return calls, false
	}
	return calls, true
}

// sendBatch sends one pipeline of a tick's calls of the sync's script,
// and once more the ones Redis did not find the script for, after loading
// it. A call that writes (a lease, or declines to report) holds the key's
// fetch token (holdFetches); without it, it neither leases nor reports,
// and its declines go back to the key, for the Inc that holds the token
// (or the next tick) to send.
func (t *table[E]) sendBatch(ctx context.Context, batch []syncCall[E]) {
	held := holdFetches(len(batch), func(i int) (chan struct{}, bool) {
		return batch[i].e.base().fetch, batch[i].renew || batch[i].push > 0
	})
	for i := range batch {
		if s := &batch[i]; !held[i] && s.push > 0 {
			x := s.e.base()
			x.mu.Lock()
			x.decl = addDeclined(x.decl, s.push)
			x.mu.Unlock()
		}
	}
	defer releaseFetches(held, func(i int) chan struct{} { return batch[i].e.base().fetch })
	pipeCalls(ctx, t.b.Client, t.kind.sync, t.now, len(batch), func(i int) (string, []any) {
		s := &batch[i]
		switch {
		case s.renew && held[i]:
			t.renewals.Add(1)
		case s.rel > 0:
			t.releases.Add(1)
		default:
			t.refreshes.Add(1)
		}
		return s.e.base().hash, t.s.syncArgs(s, held[i])
	}, func(i int, send int64, cmd *redis.Cmd) {
		s := &batch[i]
		err := cmd.Err()
		if err == nil {
			err = t.s.synced(s, held[i], send, cmd.Val())
		}
		if err != nil {
			// Unreleased units stay counted until their bucket dies, a
			// renewal that failed leaves the key to its next Inc, and the
			// declines sent may be lost, which only lowers the factor
			// others see. The breaker is left to the callers' own calls:
			// a tick's failure (a pooled connection that died with a
			// restarted server, say) must not send them to the policy.
			t.syncErrs.Add(1)
		}
		if s.renew {
			x := s.e.base()
			x.mu.Lock()
			x.renews--
			x.mu.Unlock()
		}
	})
}

// addDeclined adds n units declined from memory to d, the units a key's
// next call will record as declined: at most window.MaxDeclined in all,
// what Redis records of them (sup_inc.lua caps a push as a refusal), so
// that huge refused costs never overflow the count.
func addDeclined(d, n int64) int64 { return min(d+n, window.MaxDeclined) }
