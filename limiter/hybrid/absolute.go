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
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

// Client is the part of a go-redis client the limiter calls: script
// execution (EVALSHA, EVAL, SCRIPT LOAD, SCRIPT EXISTS) and UNLINK, as
// redisabs.Client. *redis.Client, *redis.ClusterClient, *redis.Ring and
// the failover clients of go-redis v9 satisfy it. When the client also has
// Pipeline (all of those do), the background sync sends each tick's calls
// in pipelines, which a cluster client splits per node.
type Client interface {
	redis.Scripter
	Unlink(ctx context.Context, keys ...string) *redis.IntCmd
}

// Every Client is one for the shared provider code.
var _ redisx.Client = Client(nil)

// Tuning of the sync. These bound the work of one tick: a tick visits at
// most maxVisits keys and makes at most maxCalls calls of abs_inc.lua, in
// pipelines of pipeBatch, whatever the number of keys in memory.
const (
	// maxVisits is the most tracked keys one tick looks at; the others
	// wait for the next tick, in order.
	maxVisits = 16_384
	// maxCalls is the most Redis calls (releases and renewals) one tick
	// makes.
	maxCalls = 1_024
	// pipeBatch is the most calls in one pipeline.
	pipeBatch = 512
	// renewWithin × (B + sync interval) is how recently a key must have
	// been used for the tick to renew its expiring lease.
	renewWithin = 4
	// idleTicks is how many ticks without a call and without a lease a
	// key stays in memory (with its lease size).
	idleTicks = 20
)

const shardCount = 64

// Absolute is the absolute limiter with leases: it answers from memory
// against units reserved in Redis, and never lets the instances that share
// a Redis and a prefix (hybrid or redisabs) admit more than the capacity in
// any window. It is safe for concurrent use. Build it with NewAbsolute and
// Close it to give back the units it holds; the zero value is not usable.
type Absolute struct {
	sets     // IncSet, IsAllowedSet, GetSet, ResetSet: set.go
	b        redisx.Base
	g        failover.Guard
	closed   atomic.Bool
	seed     maphash.Seed
	shards   [shardCount]shard
	interval time.Duration
	maxLease int64
	// ahead is the most ms a lease's bucket may start after now
	// (WithLeaseAhead), 0 for none.
	ahead int64

	tmu     sync.Mutex // guards tracked and fresh
	tracked []*entry   // every key in memory, in visiting order
	fresh   []*entry   // keys added since the last tick

	stop, done chan struct{}
	closeOnce  sync.Once
	peeks      relief.Peeks // IsAllowed calls in flight, shared

	// Redis calls by kind, for tests and benchmarks: an Inc's lease
	// request, a tick's renewal, a tick's release.
	fetches, renewals, releases atomic.Int64
	syncErrs                    atomic.Int64 // failed calls of ticks
	forwards                    atomic.Int64 // grants in a bucket after now
}

var (
	_ limiter.Limiter  = (*Absolute)(nil)
	_ limiter.Windowed = (*Absolute)(nil)
)

// Window returns the window the limiter was built with (WithWindow).
func (l *Absolute) Window() time.Duration { return l.b.Cfg.Window }

type shard struct {
	mu sync.RWMutex
	m  map[string]*entry
}

// entry is one key's local state: its lease, its cached refusal and its
// rate. Fields after mu are guarded by it.
type entry struct {
	key, hash string
	// fetch is held (one token) by the one lease request of an Inc in
	// flight for this key, and by Close while it gives the key's lease
	// back. Ticks do not take it: their renewals are installed only if no
	// Inc brought a lease meanwhile (gen).
	fetch chan struct{}
	// fails counts the lease requests of the key that failed (takeFetch).
	fails atomic.Int64

	mu   sync.Mutex
	gone bool  // removed from the map: look the key up again
	c    int64 // the capacity of the lease (and of the cache)

	// The lease: left units, usable while now < until (local ms), held in
	// the bucket that started at start (script clock).
	start, until, left int64
	// room is what Redis reported left at the grant; resetAt (local ms) is
	// when the lease's bucket dies.
	room, resetAt int64

	// A cached refusal (hot-key relief, the Redis providers' mechanism):
	// answered from memory until its RetryAfter, for the longer of the
	// sync interval and B at most.
	ref relief.Refusal

	used    int64   // units admitted since the last tick
	est     float64 // units admitted per tick, smoothed
	want    int64   // the next lease's size
	granted int64   // the units of the current lease
	gen     int64   // leases installed so far
	hits    int64   // decisions the current lease answered from memory
	renews  int     // renewals sent and not yet answered
	lastUse int64   // local ms of the latest local decision or lease
	// pend are unused units of replaced leases, for the next tick to give
	// back: (bucket start, units) pairs.
	pend []int64
	idle int // ticks without a call
	pace
}

// NewAbsolute returns an absolute limiter that leases units from Redis
// through client. It reads the options redisabs.New reads (WithWindow,
// WithBucket, WithPrefix, WithClock, WithTimeout, WithFailurePolicy and the
// other failure options) and WithSyncInterval and WithMaxLease. It starts
// the background sync goroutine, which Close stops; it makes no call to
// Redis until the first Inc. A nil client is ErrInvalidConfig.
func NewAbsolute(client Client, opts ...limiter.Option) (*Absolute, error) {
	l := &Absolute{seed: maphash.MakeSeed(), stop: make(chan struct{}), done: make(chan struct{})}
	if err := l.b.Init(limiter.ProviderHybrid, key.Absolute, client, opts); err != nil {
		return nil, err
	}
	cfg := &l.b.Cfg
	l.interval = cfg.SyncInterval
	if l.interval <= 0 {
		l.interval = DefaultSyncInterval
	}
	l.maxLease = cfg.MaxLease
	if l.maxLease <= 0 {
		l.maxLease = math.MaxInt64
	}
	ahead, err := leaseAhead(cfg)
	if err != nil {
		return nil, l.errorf("new", err)
	}
	l.ahead = ahead
	for i := range l.shards {
		l.shards[i].m = make(map[string]*entry)
	}
	redisprov.Absolute.InitGuard(&l.g, limiter.ProviderHybrid, client, &l.b, opts)
	l.b.SetGate(l.g.Opened)
	l.sets = sets{&l.b, &l.g}
	go l.loop()
	return l, nil
}

func (l *Absolute) now() int64 { return l.b.Cfg.NowMs() }

func (l *Absolute) errorf(op string, err error) error { return l.b.Errorf(op, err) }

func (l *Absolute) shardOf(k string) *shard {
	return &l.shards[maphash.String(l.seed, k)%shardCount]
}

// lookup returns k's entry, or nil.
func (l *Absolute) lookup(k string) *entry {
	s := l.shardOf(k)
	s.mu.RLock()
	e := s.m[k]
	s.mu.RUnlock()
	return e
}

// entryFor returns k's entry, creating it (which validates the key).
func (l *Absolute) entryFor(op, k string) (*entry, error) {
	if e := l.lookup(k); e != nil {
		return e, nil
	}
	h, err := l.b.Check(op, k)
	if err != nil {
		return nil, err
	}
	s := l.shardOf(k)
	s.mu.Lock()
	e := s.m[k]
	if e == nil {
		// A key with no history is taken for a slow one: its first
		// lease is forward-dated if it has room (the script decides).
		e = &entry{key: k, hash: h, fetch: make(chan struct{}, 1), want: 1, pace: pace{slow: true}}
		s.m[k] = e
		l.tmu.Lock()
		l.fresh = append(l.fresh, e)
		l.tmu.Unlock()
	}
	s.mu.Unlock()
	return e, nil
}

// local answers an Inc of n units at capacity c from e's lease or, when
// refusals is true, its cached refusal, with e.mu held; span is W + B in
// ms (a lease or refusal of a key dated W + B or more ahead answers
// nothing); ok false: Redis must be asked. (While the breaker is open the
// policy answers what the lease cannot: a cached refusal never answers
// differently from it.)
func (e *entry) local(c, n, now, span int64, refusals bool) (d limiter.Decision, ok bool) {
	if e.c != c || e.gone {
		return d, false
	}
	if now < e.until && e.left >= n && !fromFuture(now, e.resetAt, span) {
		e.left -= n
		e.used += n
		e.hits++
		e.idle = 0
		e.lastUse = now
		return limiter.Decision{Outcome: limiter.Allowed, Allowed: true, Limit: c,
			Remaining: e.room + e.left, ResetAfter: msDur(e.resetAt - now)}, true
	}
	if r, ok := e.ref.Answer(c, c, n, now, 0); ok && refusals && !fromFuture(now, e.ref.ResetAt(), span) {
		e.idle = 0
		return r.Decision(), true
	}
	return d, false
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

// Inc admits n units of key at rate if they fit in the window, all or
// nothing. While the key holds a lease with n units left, the answer comes
// from memory; otherwise one Redis call releases what is left of the old
// lease, decides for n and, when admitted, reserves a new lease beside
// them. A refusal asks Redis once and is then answered from memory for the
// same n until the RetryAfter Redis gave has passed. n = 0 decides for one
// unit and records nothing; n above the capacity is refused with Never set.
// The Decision's Remaining and ResetAfter come from the latest Redis reply
// (see the package documentation). When Redis is unavailable, leases keep
// serving until they run out or expire; then the failure policy answers
// (limiter.WithFailurePolicy), with Degraded set.
func (l *Absolute) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	if l.closed.Load() {
		return limiter.Decision{}, l.errorf("inc", limiter.ErrClosed)
	}
	if err := config.CheckCost(n); err != nil {
		return limiter.Decision{}, l.errorf("inc", err)
	}
	c, err := limiter.Capacity(rate, l.b.Cfg.Window)
	if err != nil {
		return limiter.Decision{}, l.errorf("inc", err)
	}
	if n >= 1 && n <= c {
		if e := l.lookup(k); e != nil {
			now := l.now()
			e.mu.Lock()
			d, ok := e.local(c, n, now, l.b.Cfg.WindowMs+l.b.Cfg.BucketMs, !l.g.Open())
			e.mu.Unlock()
			if ok {
				l.g.Observe(ctx, "inc", k, n, d)
				return d, nil
			}
		}
	}
	return l.g.Decide(ctx, (*backend)(l), "inc", k, rate, n, false)
}

// IsAllowed reports whether one more unit of key would be admitted now:
// from memory while this instance holds a lease with a unit left, else
// from Redis at the capacity stored by the key's latest Inc (a key with no
// live state is allowed, with Limit 0). It writes nothing.
func (l *Absolute) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	if l.closed.Load() {
		return limiter.Decision{}, l.errorf("is allowed", limiter.ErrClosed)
	}
	if e := l.lookup(k); e != nil {
		now := l.now()
		e.mu.Lock()
		if !e.gone && now < e.until && e.left >= 1 && !fromFuture(now, e.resetAt, l.b.Cfg.WindowMs+l.b.Cfg.BucketMs) {
			d := limiter.Decision{Outcome: limiter.Allowed, Allowed: true, Limit: e.c,
				Remaining: e.room + e.left, ResetAfter: msDur(e.resetAt - now)}
			e.mu.Unlock()
			l.g.Observe(ctx, "is allowed", k, 0, d)
			return d, nil
		}
		e.mu.Unlock()
	}
	return l.g.Decide(ctx, (*backend)(l), "is allowed", k, limiter.Rate{}, 0, true)
}

// Get returns key's usage in Redis: the units admitted by every instance,
// plus the unused units of other instances' leases (this instance's own
// unused lease is left out), and the stored capacity. Redis failures are
// errors, as for redisabs.
func (l *Absolute) Get(ctx context.Context, k string) (limiter.Usage, error) {
	if l.closed.Load() {
		return limiter.Usage{}, l.errorf("get", limiter.ErrClosed)
	}
	return l.g.Get(ctx, (*backend)(l), &l.b, k)
}

// Reset forgets key: it drops this instance's lease and cached refusal,
// UNLINKs the key's hash and drops what the local fallback holds for it.
// Other instances' leases of the key stay theirs until they expire.
func (l *Absolute) Reset(ctx context.Context, k string) error {
	if l.closed.Load() {
		return l.errorf("reset", limiter.ErrClosed)
	}
	if e := l.lookup(k); e != nil {
		e.mu.Lock()
		e.left, e.until = 0, 0
		e.ref.Clear()
		e.mu.Unlock()
	}
	return l.g.Reset(ctx, &l.b, k)
}

// Close stops the sync, gives back the unused units of every lease and
// marks the limiter closed: later calls return ErrClosed. The units used
// stay counted where they are, so after Close a Get on Redis reports the
// units this instance admitted. It waits for the sync and the failure
// policy's probe until ctx is done (then it returns ctx's error; leases not
// given back expire with their buckets). It does not close the client.
// Closing twice is harmless.
func (l *Absolute) Close(ctx context.Context) error {
	var err error
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		l.b.Close()
		close(l.stop)
		select {
		case <-l.done:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		// Calls whose callers left (a client without context
		// timeouts) may still install leases: wait for them, so that
		// the closing tick gives those back too.
		if err = l.g.WaitCalls(ctx); err != nil {
			return
		}
		if !l.g.Open() {
			l.tick(ctx, true)
		}
		err = l.g.Close(ctx)
		if werr := l.b.Wait(ctx); err == nil {
			err = werr
		}
	})
	return err
}

// backend is the Absolute as its Guard sees it (failover.Backend).
type backend Absolute

// Validate checks an Inc (or, with peek, an IsAllowed) for the policy.
func (be *backend) Validate(op, k string, rate limiter.Rate, n int64, peek bool) (*failover.Call, error) {
	return redisprov.Absolute.Call(&(*Absolute)(be).b, op, k, rate, n, peek)
}

// Decide is the Redis call of an Inc or, with peek, an IsAllowed.
func (be *backend) Decide(ctx context.Context, k string, rate limiter.Rate, n int64, peek bool) (limiter.Decision, error) {
	l := (*Absolute)(be)
	if peek {
		return l.peek(ctx, k)
	}
	c, err := limiter.Capacity(rate, l.b.Cfg.Window)
	if err != nil {
		return limiter.Decision{}, l.errorf("inc", err)
	}
	if n == 0 || n > c {
		// A peek or a request that can never fit: no lease is involved.
		return l.plain(ctx, "inc", k, c, min(n, c+1))
	}
	return l.lease(ctx, k, rate, c, n)
}

// peek is IsAllowed's Redis call; identical concurrent ones share a round
// trip (hot-key relief).
func (l *Absolute) peek(ctx context.Context, k string) (limiter.Decision, error) {
	if l.b.Cfg.NoRelief {
		return l.plain(ctx, "is allowed", k, 0, 0)
	}
	return l.peeks.Do(ctx, k, func(ctx context.Context) (limiter.Decision, error) {
		return l.plain(ctx, "is allowed", k, 0, 0)
	})
}

// Usage is the Redis call of a Get.
func (be *backend) Usage(ctx context.Context, k string) (limiter.Usage, error) {
	l := (*Absolute)(be)
	h, err := l.b.Check("get", k)
	if err != nil {
		return limiter.Usage{}, err
	}
	v, err := scripts.AbsGet.Run(ctx, l.b.Client, []string{h}, redisx.NowArg(&l.b.Cfg), l.b.W, l.b.B).Result()
	if err != nil {
		return limiter.Usage{}, l.errorf("get", err)
	}
	x, err := redisx.Int64s(v, 2)
	if err != nil {
		return limiter.Usage{}, l.errorf("get", err)
	}
	used := x[0]
	if e := l.lookup(k); e != nil {
		now := l.now()
		e.mu.Lock()
		// The unused units count in Redis until the lease's bucket dies,
		// W after the lease stopped serving, unless released before.
		if e.left > 0 && now < e.until+l.b.Cfg.WindowMs {
			used = max(0, used-e.left)
		}
		e.mu.Unlock()
	}
	return limiter.Usage{Used: used, Limit: x[1]}, nil
}

// plain is one abs_inc.lua call without a lease, as redisabs makes it.
func (l *Absolute) plain(ctx context.Context, op, k string, c, n int64) (limiter.Decision, error) {
	h, err := l.b.Check(op, k)
	if err != nil {
		return limiter.Decision{}, err
	}
	v, err := l.b.Run(ctx, scripts.AbsInc, []string{h},
		redisx.NowArg(&l.b.Cfg), l.b.W, l.b.B, c, n, l.b.TTL)
	if err != nil {
		return limiter.Decision{}, l.errorf(op, err)
	}
	r, err := redisx.Decision(v, c, window.OutcomeAllowed, window.OutcomeRejected)
	if err != nil {
		return limiter.Decision{}, l.errorf(op, err)
	}
	return r.Decision(), nil
}

// lease decides an Inc of n units (1 ≤ n ≤ c) that memory could not
// answer: one Redis call, made by one caller per key at a time, releases
// what is left of the key's lease and decides for n, reserving a new lease
// when admitted.
func (l *Absolute) lease(ctx context.Context, k string, rate limiter.Rate, c, n int64) (limiter.Decision, error) {
	for {
		e, err := l.entryFor("inc", k)
		if err != nil {
			return limiter.Decision{}, err
		}
		if err := takeFetch(ctx, &l.g, e.fetch, &e.fails); err != nil {
			return limiter.Decision{}, l.errorf("inc", err)
		}
		d, retry, err := l.leaseLocked(ctx, e, rate, c, n)
		fetched(&l.b.Cfg, err, &e.fails)
		<-e.fetch
		if !retry {
			return d, err
		}
	}
}

// leaseLocked is lease with e.fetch held; retry: e left the map, start
// again.
func (l *Absolute) leaseLocked(ctx context.Context, e *entry, rate limiter.Rate, c, n int64) (limiter.Decision, bool, error) {
	now := l.now()
	e.mu.Lock()
	if e.gone {
		e.mu.Unlock()
		return limiter.Decision{}, true, nil
	}
	// Another caller may have brought a lease while this one waited.
	if d, ok := e.local(c, n, now, l.b.Cfg.WindowMs+l.b.Cfg.BucketMs, true); ok {
		e.mu.Unlock()
		return d, false, nil
	}
	relStart, rel := e.start, e.left
	switch {
	case e.c != c:
		e.want, e.est = 1, 0 // a new rate: size afresh
	case e.granted > 0:
		e.ended(e.left > 0 && now >= e.until)
		e.resize(e.granted-e.left, c, l.maxLease)
	}
	e.granted = 0
	e.left, e.until = 0, 0
	e.ref.Clear()
	want := min(max(n, e.wantFor(l, c)), c, max(n, l.maxLease))
	ahead := e.aheadArg(l.ahead)
	e.mu.Unlock()

	send := l.now()
	l.fetches.Add(1)
	v, err := l.b.Run(ctx, scripts.AbsInc, []string{e.hash},
		redisx.NowArg(&l.b.Cfg), l.b.W, l.b.B, c, n, l.b.TTL, want, relStart, rel, ahead)
	if err != nil {
		// The release may not have happened: those units stay counted
		// until their bucket dies, which only admits less.
		return limiter.Decision{}, false, l.errorf("inc", err)
	}
	if g, ok := leaseReply(v); ok {
		e.mu.Lock()
		e.install(l, c, send, g)
		e.left -= n
		e.used += n
		e.idle = 0
		e.lastUse = send
		d := limiter.Decision{Outcome: limiter.Allowed, Allowed: true, Limit: c,
			Remaining: e.room + e.left, ResetAfter: msDur(g.reset)}
		e.mu.Unlock()
		return d, false, nil
	}
	r, err := redisx.Decision(v, c, window.OutcomeAllowed, window.OutcomeRejected)
	if err != nil {
		return limiter.Decision{}, false, l.errorf("inc", err)
	}
	if !r.Allowed && !r.Never && r.RetryAfter > 0 && !l.b.Cfg.NoRelief {
		e.mu.Lock()
		e.c = c
		// Answered from memory for one sync interval or one bucket,
		// whichever is longer, at most: units that other instances give
		// back (unused leases, which Redis' exact RetryAfter cannot
		// foresee) are seen within that. (A saturated key called often
		// would otherwise cost a Redis call per tick for every key.)
		e.ref.Set(c, c, n, send, send+max(l.interval.Milliseconds(), l.b.Cfg.BucketMs), &r)
		e.idle = 0
		e.mu.Unlock()
	}
	return r.Decision(), false, nil
}

// grant is a lease reply: {g, start, now, remaining, reset}.
type grant struct{ units, start, now, room, reset int64 }

func leaseReply(v any) (grant, bool) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 5 {
		return grant{}, false
	}
	var x [5]int64
	for i, a := range arr {
		n, ok := a.(int64)
		if !ok {
			return grant{}, false
		}
		x[i] = n
	}
	if x[0] < 1 {
		return grant{}, false
	}
	return grant{x[0], x[1], x[2], x[3], x[4]}, true
}

// wantFor is the next lease's size at capacity c, with e.mu held (see
// pace.wantFor).
func (e *entry) wantFor(l *Absolute, c int64) int64 {
	return e.pace.wantFor(e.want, c, l.ahead, l.maxLease, &l.b.Cfg)
}

// install makes g e's lease, with e.mu held; send is the local time at
// which the call was sent. The lease may be used until its bucket stops
// taking units, start + B on the script's clock (start may be after now: a
// forward-dated lease): every unit admitted before then counts from the
// grant until start + W + B, at least W after its admission. The script
// ran at or after send, so send + (start + B − now) is no later than that
// instant on the local clock.
//
// A lease still held (a renewal answered while an Inc's request was in
// flight) is replaced: its unused units go to pend, for the next tick to
// give back.
func (e *entry) install(l *Absolute, c, send int64, g grant) {
	if e.left > 0 {
		e.pend = append(e.pend, e.start, e.left)
	}
	e.c = c
	e.start = g.start
	e.fwd = g.start > g.now
	if e.fwd {
		l.forwards.Add(1)
	}
	e.until = send + (g.start + l.b.Cfg.BucketMs - g.now)
	e.left = g.units
	e.granted = g.units
	e.room = g.room
	e.resetAt = send + g.reset
	e.ref.Clear()
	e.gen++
	e.hits = 0
}

// loop runs the sync every interval until Close.
func (l *Absolute) loop() {
	defer close(l.done)
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			if !l.g.Open() {
				ctx, cancel := context.WithTimeout(context.Background(), l.syncTimeout())
				l.tick(ctx, false)
				cancel()
			} else {
				l.tick(nil, false) // memory only: no Redis call while it is down
			}
		}
	}
}

func (l *Absolute) syncTimeout() time.Duration { return syncTimeout(&l.b.Cfg) }

// syncCall is one key's call of a tick: give back rel unused units held
// in the bucket that started at start, and, when want > 0, reserve a new
// lease of up to want units (at least one) for the lease of generation
// gen.
type syncCall struct {
	e          *entry
	c          int64
	start, rel int64
	want, gen  int64
	ahead      int64 // a renewal's ARGV[10]
}

// tick visits the keys in memory, at most maxVisits of them, and makes at
// most maxCalls Redis calls, in pipelines of pipeBatch: it updates each
// key's rate and lease size, forgets the idle ones, gives back unused
// units, and renews the leases of keys in use that would expire before
// the next tick, so that their callers keep answering from memory. The
// old lease keeps serving until the new one is installed; what is left of
// it is given back by the next tick. A tick never makes a caller wait.
// closing gives back every lease and renews none, first waiting (until ctx
// is done) for each key's Redis call in flight; ctx nil makes no Redis
// call.
func (l *Absolute) tick(ctx context.Context, closing bool) {
	l.tmu.Lock()
	l.tracked = append(l.tracked, l.fresh...)
	l.fresh = nil
	all := l.tracked
	l.tmu.Unlock()

	visit := all
	if !closing && len(visit) > maxVisits {
		visit = visit[:maxVisits]
	}
	now := l.now()
	keep := make([]*entry, 0, len(all))
	var calls []syncCall
	for _, e := range visit {
		if ctx != nil && !closing && len(calls) >= maxCalls {
			keep = append(keep, e)
			continue
		}
		held := false
		if closing {
			select {
			case e.fetch <- struct{}{}:
				held = true
			case <-ctx.Done():
			}
		}
		var stay bool
		calls, stay = l.visit(calls, e, now, closing, ctx != nil)
		if held {
			<-e.fetch
		}
		if stay {
			keep = append(keep, e)
		}
	}
	l.tmu.Lock()
	rest := all[len(visit):]
	// keys added meanwhile are in l.fresh; the unvisited go first
	l.tracked = append(append(make([]*entry, 0, len(rest)+len(keep)), rest...), keep...)
	l.tmu.Unlock()

	for len(calls) > 0 && ctx.Err() == nil {
		n := min(len(calls), pipeBatch)
		l.sendBatch(ctx, calls[:n])
		calls = calls[n:]
	}
}

// visit looks at one key for a tick and appends its calls, if any. It
// reports whether the key stays in memory.
func (l *Absolute) visit(calls []syncCall, e *entry, now int64, closing, redisOK bool) ([]syncCall, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	used := e.used
	e.used = 0
	e.est = (e.est + float64(used)) / 2
	// About two sync intervals' worth at the key's rate, or what the
	// last leases showed (resize), whichever is more.
	e.want = min(max(int64(math.Ceil(2*e.est)), e.want, 1), max(e.c, 1), l.maxLease)
	if used == 0 {
		e.idle++
	}
	if !redisOK {
		return calls, !closing
	}
	for i := 0; i+1 < len(e.pend); i += 2 {
		calls = append(calls, syncCall{e: e, c: e.c, start: e.pend[i], rel: e.pend[i+1]})
	}
	e.pend = e.pend[:0]
	full := e.room < e.c/4 // the key was nearly full at the grant
	expired := now >= e.until
	recent := now-e.lastUse < renewWithin*(l.b.Cfg.BucketMs+l.interval.Milliseconds())
	switch {
	case closing:
		if e.left > 0 {
			calls = append(calls, syncCall{e: e, c: e.c, start: e.start, rel: e.left})
			e.left, e.until, e.granted = 0, 0, 0
		}
	case e.until > 0 && e.hits > 0 && recent && (e.left == 0 || !e.slow && now+l.interval.Milliseconds() >= e.until) && !(full && used == 0):
		// Holding a lease (not refused at its last request) that answered
		// from memory, in use lately, and used up, or expiring before the
		// next tick on a key that uses its leases up: renew. (A key called
		// less often than its leases live gains nothing from renewals, and
		// is left to its Incs: a slow key's lease with units left expires,
		// and the next Inc gives them back in its lease request.) A
		// lease still valid keeps serving until the reply installs the
		// new one (if no Inc brought one meanwhile); an expired one is
		// given back in the same call.
		call := syncCall{e: e, c: e.c, want: e.wantFor(l, e.c)}
		if expired {
			if e.left > 0 {
				call.start, call.rel = e.start, e.left
				e.resize(e.granted-e.left, e.c, l.maxLease)
			}
			e.left, e.until, e.granted = 0, 0, 0
			e.ended(call.rel > 0)
			call.want = e.wantFor(l, e.c)
		}
		call.gen = e.gen
		call.ahead = e.aheadArg(l.ahead)
		e.renews++
		calls = append(calls, call)
	case e.left > 0 && used == 0 && (expired || full):
		// Idle since the last tick, and the lease has expired or the key
		// was nearly full at the grant (others may be waiting for those
		// units): give the rest back (the script skips a bucket that has
		// died). A lease of an idle key with room to spare is kept until
		// it expires.
		calls = append(calls, syncCall{e: e, c: e.c, start: e.start, rel: e.left})
		e.resize(e.granted-e.left, e.c, l.maxLease)
		if expired {
			e.ended(true)
		}
		e.left, e.until, e.granted = 0, 0, 0
	}
	if closing {
		return calls, false
	}
	if e.idle >= idleTicks && e.left == 0 && len(e.pend) == 0 && e.renews == 0 && !e.ref.Live(now) {
		l.forget(e)
		return calls, false
	}
	return calls, true
}

// renewed installs a renewal's grant g, sent at send, for the lease of
// generation gen. When an Inc installed a lease meanwhile, or the capacity
// changed, the grant is given back by the next tick instead; otherwise the
// old lease's unused units are.
func (e *entry) renewed(l *Absolute, c, gen, send int64, g grant) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone || e.gen != gen || e.c != c {
		// (e cannot leave the map with a renewal in flight, but its
		// units must never be lost: pend keeps them for the next tick)
		e.pend = append(e.pend, g.start, g.units)
		return
	}
	if e.left > 0 {
		e.resize(e.granted-e.left, c, l.maxLease)
	}
	e.install(l, c, send, g) // pends the old lease's unused units
}

// resize sets the next lease's size from how the last one went, with e.mu
// held: a lease used up doubles it (the key is busier than its size; the
// tick's rate estimate alone would take many ticks to catch up with a
// closed loop of callers), one given back with units unused brings it down
// to twice what was used, at least 1.
func (e *entry) resize(used, c, most int64) {
	e.want = nextWant(e.want, e.granted, used, c, most)
}

// forget removes e from the map, with e.mu held.
func (l *Absolute) forget(e *entry) {
	e.gone = true
	s := l.shardOf(e.key)
	s.mu.Lock()
	if s.m[e.key] == e {
		delete(s.m, e.key)
	}
	s.mu.Unlock()
}

// sendBatch sends one pipeline of a tick's calls of abs_inc.lua (a
// release decides nothing: n = 0; a renewal asks for one unit and a lease
// of want), and once more the ones Redis did not find the script for,
// after loading it.
func (l *Absolute) sendBatch(ctx context.Context, batch []syncCall) {
	cfg := &l.b.Cfg
	renew := holdFetches(len(batch), func(i int) (chan struct{}, bool) { return batch[i].e.fetch, batch[i].want > 0 })
	defer releaseFetches(renew, func(i int) chan struct{} { return batch[i].e.fetch })
	pipeCalls(ctx, l.b.Client, scripts.AbsInc, l.now, len(batch), func(i int) (string, []any) {
		s := &batch[i]
		n, want := int64(0), int64(0)
		if renew[i] {
			n, want = 1, s.want
			l.renewals.Add(1)
		} else {
			l.releases.Add(1)
		}
		return s.e.hash, []any{redisx.NowArg(cfg), l.b.W, l.b.B, s.c, n, l.b.TTL, want, s.start, s.rel, s.ahead}
	}, func(i int, send int64, cmd *redis.Cmd) {
		s := &batch[i]
		switch err := cmd.Err(); {
		case err != nil:
			// Unreleased units stay counted until their bucket dies,
			// and a renewal that failed leaves the key to its next Inc.
			// The breaker is left to the callers' own calls: a tick's
			// failure (a pooled connection that died with a restarted
			// server, say) must not send them to the policy.
			l.syncErrs.Add(1)
		case renew[i]:
			if g, ok := leaseReply(cmd.Val()); ok {
				s.e.renewed(l, s.c, s.gen, send, g)
			}
		}
		if s.want > 0 {
			s.e.mu.Lock()
			s.e.renews--
			s.e.mu.Unlock()
		}
	})
}

// Ping checks that Redis answers this limiter, as redisabs.Limiter.Ping
// does: one script call that writes a unit to a key of the limiter's own,
// bounded by WithTimeout on top of ctx; a failure is an error naming the
// address. Call it at start-up.
func (l *Absolute) Ping(ctx context.Context) error { return l.g.Ping(ctx) }
