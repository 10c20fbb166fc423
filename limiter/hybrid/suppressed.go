package hybrid

import (
	"context"
	"errors"
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

// Suppressed is the suppressed limiter with leases: it answers from memory
// with the fleet's suppression factor and keeps each key's window in the
// hash redissup uses, so hybrid and redissup instances may share a key. No
// span of W ever holds more than H accepted units across the instances
// that share a Redis and a prefix; the soft target S holds within the
// tolerance docs/algorithms.md gives (Hybrid leases, The suppressed
// hybrid). It is safe for concurrent use. Build it with NewSuppressed and
// Close it to give back the units it holds; the zero value is not usable.
type Suppressed struct {
	sets     // IncSet, IsAllowedSet, GetSet, ResetSet: set.go
	b        redisx.Base
	g        failover.Guard
	closed   atomic.Bool
	seed     maphash.Seed
	shards   [shardCount]supShard
	interval time.Duration
	maxLease int64
	// ahead is the most ms a lease's bucket may start after now
	// (WithLeaseAhead), 0 for none.
	ahead int64

	tmu     sync.Mutex  // guards tracked and fresh
	tracked []*supEntry // every key in memory, in visiting order
	fresh   []*supEntry // keys added since the last tick

	stop, done chan struct{}
	closeOnce  sync.Once
	peeks      relief.Peeks // IsAllowed calls in flight, shared

	// Redis calls by kind, for tests and benchmarks: an Inc's lease
	// request, a tick's renewal, release and refresh (the fleet's figures
	// and this instance's declines, no lease).
	fetches, renewals, releases, refreshes atomic.Int64
	syncErrs                               atomic.Int64
	forwards                               atomic.Int64 // grants in a bucket after now
}

var (
	_ limiter.Limiter  = (*Suppressed)(nil)
	_ limiter.Windowed = (*Suppressed)(nil)
)

// Window returns the window the limiter was built with (WithWindow).
func (l *Suppressed) Window() time.Duration { return l.b.Cfg.Window }

type supShard struct {
	mu sync.RWMutex
	m  map[string]*supEntry
}

// supEntry is one key's local state. Fields after mu are guarded by it.
type supEntry struct {
	key, hash string
	// fetch is held by the one lease request of an Inc in flight for the
	// key, and by Close while it gives the key's lease back.
	fetch chan struct{}
	// fails counts the lease requests of the key that failed (takeFetch).
	fails atomic.Int64

	mu         sync.Mutex
	gone       bool
	soft, hard int64 // the capacities of the lease and of the figures

	// The lease: left accepted units, usable while now < until (local
	// ms), held in the bucket that started at start (script clock).
	start, until, left, granted int64

	// The fleet as the latest reply saw it: accepted and observed units
	// in the window and observed units in the last min(W, 1 s), every unit
	// of this instance's lease counted as accepted and observed (Redis
	// holds them); recent may be 0 when acc is below the soft capacity
	// (sup_inc.lua reads it only where a decision may need the factor);
	// resetAt and firstAt (local ms) are when the newest and the oldest
	// live bucket die.
	acc, obs, recent, resetAt, firstAt int64
	seen                               int64 // local ms of the latest reply's send
	// The factor in ppm cached at fAt (local ms), as WithSuppressionCache
	// caches it in Redis; fAt 0: none.
	fppm, fAt int64
	// decl are the units declined from memory since the last call, which
	// the next call records as offered and declined.
	decl int64

	// A cached refusal beyond H (hot-key relief, the Redis providers'
	// mechanism): answered from memory until its RetryAfter, for one sync
	// interval at most.
	ref relief.Refusal

	used    int64   // units admitted since the last tick
	est     float64 // units admitted per tick, smoothed
	want    int64   // the next lease's size
	gen     int64   // leases installed so far
	hits    int64   // decisions the current lease answered from memory
	renews  int     // renewals sent and not yet answered
	lastUse int64   // local ms of the latest local decision or lease
	pend    []int64 // unused units of replaced leases: (start, units) pairs
	idle    int     // ticks without a call
	pace
}

// NewSuppressed returns a suppressed limiter that leases accepted units
// from Redis through client. It reads the options redissup.New reads
// (WithWindow, WithBucket, WithHardLimitFactor, WithRandom, WithPrefix,
// WithClock, WithTimeout, WithFailurePolicy and the other failure options)
// and WithSyncInterval and WithMaxLease. WithSuppressionCache applies to
// the decisions Redis makes; decisions from memory compute the factor from
// the figures of the latest reply at every call. It starts the background
// sync goroutine, which Close stops; it makes no call to Redis until the
// first Inc. A nil client is ErrInvalidConfig.
func NewSuppressed(client Client, opts ...limiter.Option) (*Suppressed, error) {
	l := &Suppressed{seed: maphash.MakeSeed(), stop: make(chan struct{}), done: make(chan struct{})}
	if err := l.b.Init(limiter.ProviderHybrid, key.Suppressed, client, opts); err != nil {
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
		l.shards[i].m = make(map[string]*supEntry)
	}
	redisprov.Suppressed.InitGuard(&l.g, limiter.ProviderHybrid, client, &l.b, opts)
	l.b.SetGate(l.g.Opened)
	l.sets = sets{&l.b, &l.g}
	go l.loop()
	return l, nil
}

func (l *Suppressed) now() int64 { return l.b.Cfg.NowMs() }

func (l *Suppressed) errorf(op string, err error) error { return l.b.Errorf(op, err) }

// draw is the call's one random draw, in ppm.
func (l *Suppressed) draw() int64 { return window.DrawPPM(l.b.Cfg.Rand()) }

func (l *Suppressed) shardOf(k string) *supShard {
	return &l.shards[maphash.String(l.seed, k)%shardCount]
}

func (l *Suppressed) lookup(k string) *supEntry {
	s := l.shardOf(k)
	s.mu.RLock()
	e := s.m[k]
	s.mu.RUnlock()
	return e
}

// entryFor returns k's entry, creating it (which validates the key).
func (l *Suppressed) entryFor(op, k string) (*supEntry, error) {
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
		// call takes no lease (leaseLocked), and its first lease is
		// forward-dated if it has room (the script decides).
		e = &supEntry{key: k, hash: h, fetch: make(chan struct{}, 1), want: 1, pace: pace{slow: true}}
		s.m[k] = e
		l.tmu.Lock()
		l.fresh = append(l.fresh, e)
		l.tmu.Unlock()
	}
	s.mu.Unlock()
	return e, nil
}

// factor is the suppression factor in ppm from the latest figures, with
// this instance's unused lease taken out and its declines since put in.
func (e *supEntry) factor(w int64) int64 {
	obs := max(0, e.obs-e.left+e.decl)
	recent := max(0, e.recent-e.left+e.decl)
	return window.FactorPPM(obs, recent, w, e.soft)
}

// cachedFactor is the factor a decision from memory applies: the one
// cached while it is younger than the suppression cache period (from a
// reply, or computed here), else a fresh one, cached when caching is on.
func (e *supEntry) cachedFactor(now int64, cfg *config.Config) int64 {
	if cfg.CacheMs > 0 && e.fAt > 0 && now-e.fAt < cfg.CacheMs {
		return e.fppm
	}
	f := e.factor(cfg.WindowMs)
	if cfg.CacheMs > 0 {
		e.fppm, e.fAt = f, max(now, 1)
	}
	return f
}

// peekFactor is cachedFactor for IsAllowed, which reads a fresh cached
// factor but never stores one.
func (e *supEntry) peekFactor(now int64, cfg *config.Config) int64 {
	if cfg.CacheMs > 0 && e.fAt > 0 && now-e.fAt < cfg.CacheMs {
		return e.fppm
	}
	return e.factor(cfg.WindowMs)
}

func ppmFactor(ppm int64) float64 {
	if ppm == 0 {
		return 0
	}
	return float64(ppm) / window.PPM
}

// local answers an Inc of n units at capacities soft and hard from e's
// lease or, when refusals is true, its cached refusal (false while the
// breaker is open: the policy answers what the lease cannot), with e.mu
// held, drawing once (draw) when it answers; ok false: Redis must be asked
// (and nothing was drawn).
func (e *supEntry) local(soft, hard, n, now int64, cfg *config.Config, draw func() int64, refusals bool) (d limiter.Decision, ok bool) {
	if e.gone || e.soft != soft || e.hard != hard {
		return d, false
	}
	span := cfg.WindowMs + cfg.BucketMs
	if now < e.until && e.left >= n && !fromFuture(now, e.resetAt, span) {
		// The fleet's accepted units without this instance's unused
		// lease: acc + n <= acc + left <= H.
		acc := e.acc - e.left
		d = limiter.Decision{Limit: soft, ResetAfter: msDur(e.resetAt - now)}
		r := draw()
		if acc+n <= soft {
			d.Outcome, d.Allowed = limiter.Allowed, true
		} else {
			f := e.cachedFactor(now, cfg)
			d.Outcome, d.SuppressionFactor, d.Allowed = limiter.Suppressed, ppmFactor(f), r >= f
		}
		if d.Allowed {
			e.left -= n
			e.used += n
			e.hits++
			acc += n
		} else {
			e.decl += n
			// When the window first frees units: the oldest bucket's death.
			d.RetryAfter = msDur(e.firstAt - now)
		}
		d.Remaining = max(0, soft-acc)
		e.idle = 0
		e.lastUse = now
		return d, true
	}
	if r, ok := e.ref.Answer(soft, hard, n, now, 0); ok && refusals && !fromFuture(now, e.ref.ResetAt(), span) {
		draw()
		e.decl += n
		e.idle = 0
		return r.Decision(), true
	}
	return d, false
}

// capacities returns the soft and hard capacities of rate.
func (l *Suppressed) capacities(op string, rate limiter.Rate) (soft, hard int64, err error) {
	soft, err = limiter.Capacity(rate, l.b.Cfg.Window)
	if err != nil {
		return 0, 0, l.errorf(op, err)
	}
	hard, err = limiter.HardCapacity(rate, l.b.Cfg.Window, l.b.Cfg.HardLimitFactor)
	if err != nil {
		return 0, 0, l.errorf(op, err)
	}
	return soft, hard, nil
}

// Inc offers n units of key at rate. Below the soft capacity S they are
// Allowed; between S and the hard capacity H they are admitted with
// probability 1 − f, f the fleet's suppression factor; beyond H they are
// refused. While the key holds a lease with n units left the decision is
// made in memory, with the factor computed from the fleet's figures of the
// latest reply (refreshed by every lease request and every sync) plus this
// instance's declines since; otherwise one Redis call gives back what is
// left of the old lease, decides for n as redissup would and, when it
// admits, reserves a new lease beside them. Every call with valid
// arguments draws exactly one number from the random source. A refusal
// beyond H is answered from memory for the same n until the RetryAfter
// Redis gave or the next sync. n = 0 is a peek for one unit that records
// nothing; n above H is refused with Never set. When Redis is unavailable,
// leases keep serving until they run out or expire; then the failure
// policy answers (limiter.WithFailurePolicy), with Degraded set.
func (l *Suppressed) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	if l.closed.Load() {
		return limiter.Decision{}, l.errorf("inc", limiter.ErrClosed)
	}
	if err := config.CheckCost(n); err != nil {
		return limiter.Decision{}, l.errorf("inc", err)
	}
	soft, hard, err := l.capacities("inc", rate)
	if err != nil {
		return limiter.Decision{}, err
	}
	if n >= 1 && n <= hard {
		if e := l.lookup(k); e != nil {
			now := l.now()
			e.mu.Lock()
			d, ok := e.local(soft, hard, n, now, &l.b.Cfg, l.draw, !l.g.Open())
			e.mu.Unlock()
			if ok {
				l.g.Observe(ctx, "inc", k, n, d)
				return d, nil
			}
		}
	}
	return l.g.Decide(ctx, (*supBackend)(l), "inc", k, rate, n, false)
}

// IsAllowed reports whether one more unit of key would be admitted without
// suppression now, and above S the factor an Inc would apply: from memory,
// with the figures of the latest reply, while this instance's lease is
// open, else from Redis at the capacities stored by the key's latest Inc, as
// redissup answers. It writes nothing and draws nothing.
func (l *Suppressed) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	if l.closed.Load() {
		return limiter.Decision{}, l.errorf("is allowed", limiter.ErrClosed)
	}
	if e := l.lookup(k); e != nil {
		now := l.now()
		e.mu.Lock()
		if !e.gone && now < e.until && !fromFuture(now, e.resetAt, l.b.Cfg.WindowMs+l.b.Cfg.BucketMs) {
			// The figures of the latest reply are those of a lease still
			// open: answer from them, as sup_allowed.lua would.
			acc := e.acc - e.left
			d := limiter.Decision{Outcome: limiter.Allowed, Allowed: true, Limit: e.soft,
				Remaining: max(0, e.soft-acc), ResetAfter: msDur(e.resetAt - now)}
			if acc+1 > e.soft {
				d.Outcome, d.Allowed, d.SuppressionFactor = limiter.Suppressed, false, 1
				if acc+1 <= e.hard {
					d.SuppressionFactor = ppmFactor(e.peekFactor(now, &l.b.Cfg))
				}
				d.RetryAfter = msDur(e.firstAt - now)
			}
			e.mu.Unlock()
			l.g.Observe(ctx, "is allowed", k, 0, d)
			return d, nil
		}
		e.mu.Unlock()
	}
	return l.g.Decide(ctx, (*supBackend)(l), "is allowed", k, limiter.Rate{}, 0, true)
}

// Get returns key's accepted (Used) and declined units in Redis and its
// stored soft capacity: every instance's, with other instances' unused
// leases counted as accepted and their latest declines not yet sent left
// out; this instance's unused lease is left out and its declines are in.
// Redis failures are errors, as for redissup.
func (l *Suppressed) Get(ctx context.Context, k string) (limiter.Usage, error) {
	if l.closed.Load() {
		return limiter.Usage{}, l.errorf("get", limiter.ErrClosed)
	}
	return l.g.Get(ctx, (*supBackend)(l), &l.b, k)
}

// Reset forgets key: it drops this instance's lease, cached refusal and
// declines not yet sent, UNLINKs the key's hash and drops what the local
// fallback holds for it. Other instances' leases of the key stay theirs
// until they expire.
func (l *Suppressed) Reset(ctx context.Context, k string) error {
	if l.closed.Load() {
		return l.errorf("reset", limiter.ErrClosed)
	}
	if e := l.lookup(k); e != nil {
		e.mu.Lock()
		e.left, e.until, e.decl = 0, 0, 0
		e.ref.Clear()
		e.acc, e.obs, e.recent = 0, 0, 0
		e.mu.Unlock()
	}
	return l.g.Reset(ctx, &l.b, k)
}

// Close stops the sync, gives back the unused units of every lease, sends
// the declines not yet sent, and marks the limiter closed: later calls
// return ErrClosed. After Close a Get on Redis reports the units this
// instance accepted and declined. It waits for the sync and the failure
// policy's probe until ctx is done (then it returns ctx's error; leases not
// given back expire with their buckets). It does not close the client.
// Closing twice is harmless.
func (l *Suppressed) Close(ctx context.Context) error {
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

// supBackend is the Suppressed as its Guard sees it (failover.Backend).
type supBackend Suppressed

// Validate checks an Inc (or, with peek, an IsAllowed) for the policy.
func (be *supBackend) Validate(op, k string, rate limiter.Rate, n int64, peek bool) (*failover.Call, error) {
	return redisprov.Suppressed.Call(&(*Suppressed)(be).b, op, k, rate, n, peek)
}

// Decide is the Redis call of an Inc or, with peek, an IsAllowed. An Inc
// draws its one number here.
func (be *supBackend) Decide(ctx context.Context, k string, rate limiter.Rate, n int64, peek bool) (limiter.Decision, error) {
	l := (*Suppressed)(be)
	if peek {
		if l.b.Cfg.NoRelief {
			return l.isAllowed(ctx, k)
		}
		return l.peeks.Do(ctx, k, func(ctx context.Context) (limiter.Decision, error) { return l.isAllowed(ctx, k) })
	}
	soft, hard, err := l.capacities("inc", rate)
	if err != nil {
		return limiter.Decision{}, err
	}
	draw := l.draw()
	if n == 0 || n > hard {
		// A peek or a request that can never fit: no lease is involved.
		return l.plain(ctx, k, soft, hard, n, draw)
	}
	return l.lease(ctx, k, soft, hard, n, draw)
}

// Usage is the Redis call of a Get.
func (be *supBackend) Usage(ctx context.Context, k string) (limiter.Usage, error) {
	l := (*Suppressed)(be)
	h, err := l.b.Check("get", k)
	if err != nil {
		return limiter.Usage{}, err
	}
	v, err := l.b.Run(ctx, scripts.SupGet, []string{h}, redisx.NowArg(&l.b.Cfg), l.b.W, l.b.B)
	if err != nil {
		return limiter.Usage{}, l.errorf("get", err)
	}
	x, err := redisx.Int64s(v, 3)
	if err != nil {
		return limiter.Usage{}, l.errorf("get", err)
	}
	u := limiter.Usage{Used: x[0], Declined: x[1], Limit: x[2]}
	if e := l.lookup(k); e != nil {
		now := l.now()
		e.mu.Lock()
		if e.left > 0 && now < e.until+l.b.Cfg.WindowMs {
			u.Used = max(0, u.Used-e.left)
		}
		u.Declined += e.decl
		e.mu.Unlock()
	}
	return u, nil
}

// isAllowed is IsAllowed's call to Redis, as redissup makes it.
func (l *Suppressed) isAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	h, err := l.b.Check("is allowed", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	v, err := l.b.Run(ctx, scripts.SupAllowed, []string{h}, redisx.NowArg(&l.b.Cfg), l.b.W, l.b.Cache, l.b.B)
	if err != nil {
		return limiter.Decision{}, l.errorf("is allowed", err)
	}
	r, err := redisx.Decision(v, 0, window.OutcomeAllowed, window.OutcomeSuppressed)
	if err != nil {
		return limiter.Decision{}, l.errorf("is allowed", err)
	}
	d := r.Decision()
	if e := l.lookup(k); e != nil && d.Allowed {
		// This instance's unused lease is free for it, as in Get.
		now := l.now()
		e.mu.Lock()
		if e.left > 0 && now < e.until+l.b.Cfg.WindowMs {
			d.Remaining = min(d.Remaining+e.left, d.Limit)
		}
		e.mu.Unlock()
	}
	return d, nil
}

// plain is one sup_inc.lua call without a lease, deciding as redissup
// does; its reply brings the key's figures back as a lease request's does.
func (l *Suppressed) plain(ctx context.Context, k string, soft, hard, n, draw int64) (limiter.Decision, error) {
	h, err := l.b.Check("inc", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	send := l.now()
	v, err := l.b.Run(ctx, scripts.SupInc, []string{h}, redisx.NowArg(&l.b.Cfg), l.b.W, l.b.B,
		soft, hard, window.RecordedCost(n, hard), l.b.Cache, draw, l.b.TTL, 0, 0, 0, 0)
	if err != nil {
		return limiter.Decision{}, l.errorf("inc", err)
	}
	rep, err := parseSupReply(v, soft)
	if err != nil {
		return limiter.Decision{}, l.errorf("inc", err)
	}
	if e := l.lookup(k); e != nil {
		e.mu.Lock()
		if e.soft == soft && e.hard == hard {
			e.observe(send, &rep)
		}
		e.mu.Unlock()
	}
	return rep.r.Decision(), nil
}

// supReply is the reply of a hybrid call of sup_inc.lua: the decision,
// the accepted units the call recorded (g: its lease, and n when
// admitted), the start
// of the bucket written, the script's clock, and the fleet's figures after
// the call.
type supReply struct {
	r                          window.Result
	g, start, now              int64
	acc, obs, recent, firstDie int64
	factorAt                   int64 // script clock; 0: no factor
}

var errSupReply = errors.New("malformed hybrid reply of sup_inc.lua")

func parseSupReply(v any, soft int64) (supReply, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 16 {
		return supReply{}, errSupReply
	}
	r, err := redisx.Decision(arr[:8], soft, window.OutcomeAllowed, window.OutcomeSuppressed)
	if err != nil {
		return supReply{}, err
	}
	var x [8]int64
	for i := range x {
		n, ok := arr[8+i].(int64)
		if !ok {
			return supReply{}, errSupReply
		}
		x[i] = n
	}
	return supReply{r: r, g: x[0], start: x[1], now: x[2], acc: x[3], obs: x[4], recent: x[5], firstDie: x[6], factorAt: x[7]}, nil
}

// observe takes the fleet's figures from rep, sent at send, with e.mu held.
func (e *supEntry) observe(send int64, rep *supReply) {
	e.acc, e.obs, e.recent = rep.acc, rep.obs, rep.recent
	e.seen = send
	e.resetAt = send + rep.r.ResetAfter
	e.firstAt = send + rep.firstDie
	if rep.factorAt > 0 {
		e.fppm, e.fAt = rep.r.FactorPPM, max(send+rep.factorAt-rep.now, 1)
	}
}

// wantFor is the next lease's size at capacities soft and hard, with e.mu
// held (see pace.wantFor: a slow key's share is of the soft capacity).
func (e *supEntry) wantFor(l *Suppressed, soft, hard int64) int64 {
	return min(e.pace.wantFor(e.want, soft, l.ahead, l.maxLease, &l.b.Cfg), max(hard, 1))
}

// install makes rep's units e's lease, with e.mu held; send is the local
// time at which the call was sent. As for the absolute leases, the lease
// serves while its bucket takes units (start + B on the script's clock,
// turned into a local deadline no later than that). A lease still held is
// replaced: its unused units go to pend, for the next tick to give back.
func (e *supEntry) install(l *Suppressed, send int64, rep *supReply) {
	if e.left > 0 {
		e.pend = append(e.pend, e.start, e.left)
	}
	e.start = rep.start
	e.fwd = rep.start > rep.now
	if e.fwd {
		l.forwards.Add(1)
	}
	e.until = send + (rep.start + l.b.Cfg.BucketMs - rep.now)
	e.left, e.granted = rep.g, rep.g
	e.ref.Clear()
	e.gen++
	e.hits = 0
}

// lease decides an Inc of n units (1 ≤ n ≤ H) that memory could not
// answer, with the call's draw: one Redis call, made by one caller per key
// at a time, gives back what is left of the key's lease, records the
// declines made from memory, and decides for n, reserving a new lease when
// admitted.
func (l *Suppressed) lease(ctx context.Context, k string, soft, hard, n, draw int64) (limiter.Decision, error) {
	for {
		e, err := l.entryFor("inc", k)
		if err != nil {
			return limiter.Decision{}, err
		}
		if err := takeFetch(ctx, &l.g, e.fetch, &e.fails); err != nil {
			return limiter.Decision{}, l.errorf("inc", err)
		}
		d, retry, err := l.leaseLocked(ctx, e, soft, hard, n, draw)
		fetched(&l.b.Cfg, err, &e.fails)
		<-e.fetch
		if !retry {
			return d, err
		}
	}
}

func (l *Suppressed) leaseLocked(ctx context.Context, e *supEntry, soft, hard, n, draw int64) (limiter.Decision, bool, error) {
	now := l.now()
	e.mu.Lock()
	if e.gone {
		e.mu.Unlock()
		return limiter.Decision{}, true, nil
	}
	// Another caller may have brought a lease while this one waited: the
	// call's draw decides from memory.
	if d, ok := e.local(soft, hard, n, now, &l.b.Cfg, func() int64 { return draw }, true); ok {
		e.mu.Unlock()
		return d, false, nil
	}
	relStart, rel := e.start, e.left
	switch {
	case e.soft != soft || e.hard != hard:
		e.want, e.est = 1, 0 // a new rate: size afresh
	case e.granted > 0:
		e.ended(e.left > 0 && now >= e.until)
		e.want = nextWant(e.want, e.granted, e.granted-e.left, hard, l.maxLease)
	}
	e.granted = 0
	e.left, e.until = 0, 0
	e.ref.Clear()
	push := e.decl
	e.decl = 0
	want := min(max(n, e.wantFor(l, soft, hard)), hard, max(n, l.maxLease))
	ahead := e.aheadArg(l.ahead)
	// plain: the key has no history, or its calls come further apart
	// than the lease would live, so that it would be given back unused at
	// the cost of a release call: the call decides n alone, as redissup
	// would, and the next call that follows within a lease's life asks
	// for a lease (forward-dated, for a key without history). Many keys
	// called once each, or once in a while, cost one call per decision
	// and no release.
	plain := e.lastUse == 0 || now-e.lastUse >= l.b.Cfg.BucketMs+ahead
	if plain {
		want, ahead = n, 0
	}
	e.mu.Unlock()

	send := l.now()
	l.fetches.Add(1)
	if plain && rel == 0 && push == 0 {
		// Nothing to give back or to send: redissup's own call, whose
		// reply is one integer where a lease request's has 16.
		return l.single(ctx, e, soft, hard, n, draw, send)
	}
	v, err := l.b.Run(ctx, scripts.SupInc, []string{e.hash},
		redisx.NowArg(&l.b.Cfg), l.b.W, l.b.B, soft, hard, n, l.b.Cache, draw, l.b.TTL, want, relStart, rel, push, ahead)
	if err != nil {
		// The release may not have happened: those units stay counted
		// until their bucket dies, which only admits less. The declines
		// sent may be lost, which only lowers the factor others see.
		return limiter.Decision{}, false, l.errorf("inc", err)
	}
	rep, err := parseSupReply(v, soft)
	if err != nil {
		return limiter.Decision{}, false, l.errorf("inc", err)
	}
	d := rep.r.Decision()
	e.mu.Lock()
	e.soft, e.hard = soft, hard
	e.observe(send, &rep)
	e.idle = 0
	e.lastUse = send
	if rep.g > 0 {
		// A lease, with the call's n in it when admitted.
		e.install(l, send, &rep)
		if d.Allowed {
			e.left -= n
			e.used += n
		}
		if plain {
			e.granted = 0 // no lease: nothing to size the next one by
		}
		// Remaining without the lease: the units this instance may still
		// admit count as free.
		d.Remaining = max(0, soft-(rep.acc-e.left))
	}
	if !d.Allowed && !rep.r.Never && rep.r.FactorPPM == window.PPM && rep.r.RetryAfter > 0 && !l.b.Cfg.NoRelief {
		// Beyond H: answered from memory for one sync interval at most,
		// as the absolute hybrid's refusals.
		e.ref.Set(soft, hard, n, send, send+l.interval.Milliseconds(), &rep.r)
	}
	e.mu.Unlock()
	return d, false, nil
}

// single is leaseLocked's call for a sparse key with nothing to give back
// or to send: sup_inc.lua without the hybrid's arguments, as redissup
// calls it. It brings no figures back; a key without a lease decides
// nothing from them.
func (l *Suppressed) single(ctx context.Context, e *supEntry, soft, hard, n, draw, send int64) (limiter.Decision, bool, error) {
	v, err := l.b.Run(ctx, scripts.SupInc, []string{e.hash},
		redisx.NowArg(&l.b.Cfg), l.b.W, l.b.B, soft, hard, n, l.b.Cache, draw, l.b.TTL)
	if err != nil {
		return limiter.Decision{}, false, l.errorf("inc", err)
	}
	r, err := redisx.Decision(v, soft, window.OutcomeAllowed, window.OutcomeSuppressed)
	if err != nil {
		return limiter.Decision{}, false, l.errorf("inc", err)
	}
	e.mu.Lock()
	e.soft, e.hard = soft, hard
	e.idle = 0
	e.lastUse = send
	if r.Allowed {
		e.used += n
	}
	if !r.Allowed && !r.Never && r.FactorPPM == window.PPM && r.RetryAfter > 0 && !l.b.Cfg.NoRelief {
		// Beyond H: answered from memory, as after a lease request.
		e.ref.Set(soft, hard, n, send, send+l.interval.Milliseconds(), &r)
	}
	e.mu.Unlock()
	return r.Decision(), false, nil
}

// loop runs the sync every interval until Close.
func (l *Suppressed) loop() {
	defer close(l.done)
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			if !l.g.Open() {
				ctx, cancel := context.WithTimeout(context.Background(), syncTimeout(&l.b.Cfg))
				l.tick(ctx, false)
				cancel()
			} else {
				l.tick(nil, false) // memory only: no Redis call while it is down
			}
		}
	}
}

// supSync is one key's call of a tick: give back rel unused units held in
// the bucket that started at start, record push declines, and, when want
// > 0, reserve a new lease of up to want units for the lease of generation
// gen; every call brings the key's figures back.
type supSync struct {
	e                  *supEntry
	soft, hard         int64
	start, rel, push   int64
	want, gen          int64
	ahead              int64 // a renewal's ARGV[14]
	renew, releaseOnly bool
}

// tick is the absolute hybrid's tick (see Absolute.tick) for suppressed
// keys; besides releases and renewals, it sends the declines made from
// memory and refreshes the figures of open leases a tick old (see visit),
// so that every instance decides with the fleet's rate of at most one
// interval ago.
func (l *Suppressed) tick(ctx context.Context, closing bool) {
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
	keep := make([]*supEntry, 0, len(all))
	var calls []supSync
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
	l.tracked = append(append(make([]*supEntry, 0, len(rest)+len(keep)), rest...), keep...)
	l.tmu.Unlock()

	for len(calls) > 0 && ctx.Err() == nil {
		n := min(len(calls), pipeBatch)
		l.sendBatch(ctx, calls[:n])
		calls = calls[n:]
	}
}

// visit looks at one key for a tick and appends its calls, if any. It
// reports whether the key stays in memory.
func (l *Suppressed) visit(calls []supSync, e *supEntry, now int64, closing, redisOK bool) ([]supSync, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	used := e.used
	e.used = 0
	e.est = (e.est + float64(used)) / 2
	e.want = min(max(int64(math.Ceil(2*e.est)), e.want, 1), max(e.hard, 1), l.maxLease)
	if used == 0 {
		e.idle++
	}
	if !redisOK {
		return calls, !closing
	}
	for i := 0; i+1 < len(e.pend); i += 2 {
		calls = append(calls, supSync{e: e, soft: e.soft, hard: e.hard, start: e.pend[i], rel: e.pend[i+1], releaseOnly: true})
	}
	e.pend = e.pend[:0]
	call := supSync{e: e, soft: e.soft, hard: e.hard, gen: e.gen}
	full := e.hard-e.acc < e.hard/4 // the key was nearly full at the latest reply
	expired := now >= e.until
	// quiet: how long after its latest use an expired lease's unused
	// units wait to be given back by a tick. A call within that time
	// sends them with its lease request (leaseLocked: after a quiet
	// B + D it would take no lease), so the tick's release is needed only
	// for a key that stays quiet longer; meanwhile they are counted, which
	// only admits less.
	quiet := l.b.Cfg.BucketMs + e.aheadArg(l.ahead)
	recent := now-e.lastUse < renewWithin*(l.b.Cfg.BucketMs+l.interval.Milliseconds())
	switch {
	case closing:
		if e.left > 0 {
			call.start, call.rel = e.start, e.left
			e.left, e.until, e.granted = 0, 0, 0
		}
	case e.until > 0 && e.hits > 0 && recent && (e.left == 0 || !e.slow && now+l.interval.Milliseconds() >= e.until) && !(full && used == 0):
		// As the absolute hybrid's renewals (see Absolute.visit): a slow
		// key's lease is left to expire, and its next Inc gives back
		// what is left in its lease request.
		if expired {
			if e.left > 0 {
				call.start, call.rel = e.start, e.left
				e.want = nextWant(e.want, e.granted, e.granted-e.left, e.hard, l.maxLease)
			}
			e.left, e.until, e.granted = 0, 0, 0
			e.ended(call.rel > 0)
		}
		call.want, call.renew = e.wantFor(l, e.soft, e.hard), true
		call.ahead = e.aheadArg(l.ahead)
		e.renews++
	case e.left > 0 && used == 0 && (full || expired && now-e.lastUse >= quiet):
		call.start, call.rel = e.start, e.left
		e.want = nextWant(e.want, e.granted, e.granted-e.left, e.hard, l.maxLease)
		if expired {
			e.ended(true)
		}
		e.left, e.until, e.granted = 0, 0, 0
	}
	// Besides releases and renewals: the declines, once the lease is over
	// or the key idle (a lease request would carry them), and the figures
	// of a lease still open that the latest reply left a tick old, on a
	// key past half its soft capacity then (the figures serve only while a
	// lease is open, a lease request brings its own, and far below S they
	// decide nothing a tick's lag could change).
	open := now < e.until
	stale := now-e.seen >= l.interval.Milliseconds()
	near := 2*(e.acc-e.left) >= e.soft
	if call.rel > 0 || call.renew || e.decl > 0 && (closing || !open || used == 0 || stale) || open && stale && near && used > 0 {
		call.push = e.decl
		e.decl = 0
		calls = append(calls, call)
	}
	if closing {
		return calls, false
	}
	if e.idle >= idleTicks && e.left == 0 && len(e.pend) == 0 && e.renews == 0 && e.decl == 0 && !e.ref.Live(now) {
		e.gone = true
		s := l.shardOf(e.key)
		s.mu.Lock()
		if s.m[e.key] == e {
			delete(s.m, e.key)
		}
		s.mu.Unlock()
		return calls, false
	}
	return calls, true
}

// sendBatch sends one pipeline of a tick's calls of sup_inc.lua: each
// decides nothing (n = 0; a renewal peeks with the draw that admits
// whenever the factor is below 1, and reserves its lease if admitted).
func (l *Suppressed) sendBatch(ctx context.Context, batch []supSync) {
	cfg := &l.b.Cfg
	// A call that writes (a lease, or declines to report) holds the key's
	// fetch token, as the absolute hybrid's renewals do; without it, it
	// neither leases nor reports, and its declines go back to the key, for
	// the Inc that holds the token (or the next tick) to send.
	lease := holdFetches(len(batch), func(i int) (chan struct{}, bool) {
		return batch[i].e.fetch, batch[i].want > 0 || batch[i].push > 0
	})
	for i := range batch {
		if s := &batch[i]; !lease[i] && s.push > 0 {
			s.e.mu.Lock()
			s.e.decl += s.push
			s.e.mu.Unlock()
		}
	}
	defer releaseFetches(lease, func(i int) chan struct{} { return batch[i].e.fetch })
	pipeCalls(ctx, l.b.Client, scripts.SupInc, l.now, len(batch), func(i int) (string, []any) {
		s := &batch[i]
		want, push := int64(0), int64(0)
		if lease[i] {
			want, push = s.want, s.push
		}
		switch {
		case s.renew:
			l.renewals.Add(1)
		case s.rel > 0:
			l.releases.Add(1)
		default:
			l.refreshes.Add(1)
		}
		return s.e.hash, []any{redisx.NowArg(cfg), l.b.W, l.b.B, s.soft, s.hard, 0, l.b.Cache,
			int64(window.PPM - 1), l.b.TTL, want, s.start, s.rel, push, s.ahead}
	}, func(i int, send int64, cmd *redis.Cmd) {
		s := &batch[i]
		var rep supReply
		var err error
		if err = cmd.Err(); err == nil {
			rep, err = parseSupReply(cmd.Val(), s.soft)
		}
		s.e.mu.Lock()
		defer s.e.mu.Unlock()
		if s.renew {
			s.e.renews--
		}
		if err != nil {
			// As for the absolute hybrid: unreleased units stay counted
			// until their bucket dies; the declines sent may be lost.
			l.syncErrs.Add(1)
			return
		}
		e := s.e
		same := !e.gone && e.gen == s.gen && e.soft == s.soft && e.hard == s.hard
		if rep.g > 0 {
			if !same {
				e.pend = append(e.pend, rep.start, rep.g)
				return
			}
			if e.left > 0 {
				e.want = nextWant(e.want, e.granted, e.granted-e.left, e.hard, l.maxLease)
			}
			e.install(l, send, &rep)
		}
		if same && !s.releaseOnly {
			e.observe(send, &rep)
		}
	})
}

// Ping checks that Redis answers this limiter, as redisabs.Limiter.Ping
// does: one script call that writes a unit to a key of the limiter's own,
// bounded by WithTimeout on top of ctx; a failure is an error naming the
// address. Call it at start-up.
func (l *Suppressed) Ping(ctx context.Context) error { return l.g.Ping(ctx) }
