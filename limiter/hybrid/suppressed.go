package hybrid

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/internal/window"
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
	table[*supEntry]
}

var (
	_ limiter.Limiter                     = (*Suppressed)(nil)
	_ interface{ Window() time.Duration } = (*Suppressed)(nil)
)

// Window returns the window the limiter was built with (WithWindow).
func (l *Suppressed) Window() time.Duration { return l.b.Cfg.Window }

// supEntry is one key's local state: the entry both strategies keep,
// and the fleet's figures. Fields after entry are guarded by its mu.
type supEntry struct {
	entry
	// The fleet as the latest reply saw it (besides entry.acc, the
	// accepted units): observed units in the window and in the last
	// min(W, 1 s), every unit of this instance's lease counted as
	// observed (Redis holds them); recent may be 0 when acc is below the
	// soft capacity (sup_inc.lua reads it only where a decision may need
	// the factor); firstAt (local ms) is when the oldest live bucket
	// dies.
	obs, recent, firstAt int64
	seen                 int64 // local ms of the latest reply's send
	// The factor in ppm cached at fAt (local ms), as WithSuppressionCache
	// caches it in Redis; fAt 0: none.
	fppm, fAt int64
}

// NewSuppressed returns a suppressed limiter that leases accepted units
// from Redis through client. It reads every option of packages limiter
// and hybrid: those redissup.New reads (WithWindow, WithBucket,
// WithHardLimitFactor, WithRandom, WithPrefix, WithClock, WithTimeout,
// WithFailurePolicy and the other failure options) and WithSyncInterval,
// WithMaxLease and WithLeaseAhead. WithSuppressionCache applies to the
// decisions Redis makes and to those from memory, which compute the factor
// from the figures of the latest reply and keep it as long. It starts the background
// sync goroutine, which Close stops; it makes no call to Redis until the
// first Inc. A nil client is ErrInvalidConfig.
func NewSuppressed(client Client, opts ...limiter.Option) (*Suppressed, error) {
	l := &Suppressed{}
	err := l.init(l, kind[*supEntry]{redis: redisprov.Suppressed, newEntry: func() *supEntry { return new(supEntry) },
		sync: scripts.SupInc, get: scripts.SupGet, usageLen: 3}, client, opts)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// draw is the call's one random draw, in ppm.
func (l *Suppressed) draw() int64 { return window.DrawPPM(l.b.Cfg.Rand()) }

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
func (e *supEntry) cachedFactor(now int64, cfg *window.Config) int64 {
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
func (e *supEntry) peekFactor(now int64, cfg *window.Config) int64 {
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

// local answers an Inc from e's lease or its cached refusal (strategy),
// with the call's draw when q has one, else drawing once when it answers;
// ok false: Redis must be asked (and nothing was drawn).
func (l *Suppressed) local(e *supEntry, q request, now int64, refusals bool) (d limiter.Decision, ok bool) {
	soft, hard, n := q.soft, q.hard, q.n
	if e.gone || e.soft != soft || e.hard != hard {
		return d, false
	}
	cfg := &l.b.Cfg
	span := l.span()
	if now < e.until && e.left >= n && !fromFuture(now, e.resetAt, span) {
		// The fleet's accepted units without this instance's unused
		// lease: acc + n <= acc + left <= H.
		acc := e.acc - e.left
		d = limiter.Decision{Limit: soft, ResetAfter: msDur(e.resetAt - now)}
		r := q.draw
		if !q.drawn {
			r = l.draw()
		}
		if acc+n <= soft {
			d.Allowed = true
		} else {
			f := e.cachedFactor(now, cfg)
			d.Suppressed, d.SuppressionFactor, d.Allowed = true, ppmFactor(f), r >= f
		}
		if d.Allowed {
			e.left -= n
			e.used += n
			e.hits++
			acc += n
		} else {
			e.decl = addDeclined(e.decl, n)
			// When the window first frees units: the oldest bucket's death.
			d.RetryAfter = msDur(e.firstAt - now)
		}
		d.Remaining = max(0, soft-acc)
		e.idle = 0
		e.lastUse = now
		return d, true
	}
	if r, ok := e.ref.Answer(soft, hard, n, now, 0); ok && refusals && !fromFuture(now, e.ref.ResetAt(), span) {
		if !q.drawn {
			l.draw()
		}
		e.decl = addDeclined(e.decl, n)
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
	hard, err = window.HardCapacity(rate, l.b.Cfg.Window, l.b.Cfg.HardLimitFactor)
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
	// From memory without the table's generic code, as Absolute.Inc
	// (and, as there, not in the grace after an outage).
	e, found := l.lookup(k)
	if soft, hard, err := l.capacities("inc", rate); found && err == nil && n >= 1 && n <= hard && !l.closed.Load() && !l.g.InGrace() {
		q := request{soft: soft, hard: hard, n: n}
		now, refusals := l.now(), !l.g.Open() // before the lock (Absolute.Inc)
		e.mu.Lock()
		d, ok := l.local(e, q, now, refusals)
		e.mu.Unlock()
		if ok {
			l.g.Observe(ctx, "inc", k, n, d)
			return d, nil
		}
	}
	return l.inc(ctx, k, rate, n)
}

// IsAllowed reports whether one more unit of key would be admitted without
// suppression now, and above S the factor an Inc would apply: from memory,
// with the figures of the latest reply, while this instance's lease is
// open, else from Redis at the capacities stored by the key's latest Inc, as
// redissup answers. It writes nothing and draws nothing.
func (l *Suppressed) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	return l.allowed(ctx, k)
}

// peek answers an IsAllowed from the figures of the latest reply, those
// of a lease still open, as sup_allowed.lua would.
func (l *Suppressed) peek(e *supEntry, now int64) (limiter.Decision, bool) {
	acc := e.acc - e.left
	d := limiter.Decision{Allowed: true, Limit: e.soft,
		Remaining: max(0, e.soft-acc), ResetAfter: msDur(e.resetAt - now)}
	if acc+1 > e.soft {
		d.Suppressed, d.Allowed, d.SuppressionFactor = true, false, 1
		if acc+1 <= e.hard {
			d.SuppressionFactor = ppmFactor(e.peekFactor(now, &l.b.Cfg))
		}
		d.RetryAfter = msDur(e.firstAt - now)
	}
	return d, true
}

// Get returns key's accepted (Used) and declined units in Redis and its
// stored soft capacity: every instance's, with other instances' unused
// leases counted as accepted and their latest declines not yet sent left
// out; this instance's unused lease is left out and its declines are in.
// Redis failures are errors, as for redissup.
func (l *Suppressed) Get(ctx context.Context, k string) (limiter.Usage, error) { return l.get(ctx, k) }

// Reset forgets key: it drops this instance's lease, cached refusal and
// declines not yet sent, UNLINKs the key's hash and drops what the local
// fallback holds for it. Other instances' leases of the key stay theirs
// until they expire.
func (l *Suppressed) Reset(ctx context.Context, k string) error { return l.reset(ctx, k) }

// Close stops the sync, gives back the unused units of every lease, sends
// the declines not yet sent, and marks the limiter closed: later calls
// return ErrClosed. After Close a Get on Redis reports the units this
// instance accepted and declined. It waits for the sync and the failure
// policy's probe until ctx is done (then it returns ctx's error; leases not
// given back expire with their buckets). It does not close the client.
// Closing twice is harmless.
func (l *Suppressed) Close(ctx context.Context) error { return l.close(ctx) }

// unleased decides an Inc of n = 0 or n > H, or of a key with no room in
// memory (plain).
func (l *Suppressed) unleased(ctx context.Context, k string, q request) (limiter.Decision, error) {
	return l.plain(ctx, k, q.soft, q.hard, q.n, q.draw)
}

// peekRedis is IsAllowed's call to Redis, as redissup makes it.
func (l *Suppressed) peekRedis(ctx context.Context, k string) (limiter.Decision, error) {
	h, err := l.b.Check("is allowed", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	v, err := l.b.Run(ctx, scripts.SupAllowed, []string{h}, redisprov.NowArg(&l.b.Cfg), l.b.W, l.b.Cache, l.b.B)
	if err != nil {
		return limiter.Decision{}, l.errorf("is allowed", err)
	}
	r, err := redisprov.Decision(v, 0, window.OutcomeAllowed, window.OutcomeSuppressed)
	if err != nil {
		return limiter.Decision{}, l.errorf("is allowed", err)
	}
	d := r.Decision()
	if d.Allowed {
		// This instance's unused lease is free for it, as in Get.
		if left, _ := l.own(k); left > 0 {
			d.Remaining = min(d.Remaining+left, d.Limit)
		}
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
	v, err := l.b.Run(ctx, scripts.SupInc, []string{h}, redisprov.NowArg(&l.b.Cfg), l.b.W, l.b.B,
		soft, hard, window.RecordedCost(n, hard), l.b.Cache, draw, l.b.TTL, 0, 0, 0, 0)
	if err != nil {
		return limiter.Decision{}, l.errorf("inc", err)
	}
	rep, err := parseSupReply(v, soft)
	if err != nil {
		return limiter.Decision{}, l.errorf("inc", err)
	}
	if e, ok := l.lookup(k); ok {
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
	r, err := redisprov.Decision(arr[:8], soft, window.OutcomeAllowed, window.OutcomeSuppressed)
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

// fetchLease is the lease request of an Inc (table.leaseLocked), with the
// call's draw: one sup_inc.lua call gives back what is left of the key's
// lease, records the declines made from memory, and decides for n,
// reserving a new lease when admitted.
func (l *Suppressed) fetchLease(ctx context.Context, e *supEntry, q request, a ask) (limiter.Decision, error) {
	soft, hard, n, draw, send := q.soft, q.hard, q.n, q.draw, a.send
	if a.plain && a.rel == 0 && a.push == 0 {
		// Nothing to give back or to send: redissup's own call, whose
		// reply is one integer where a lease request's has 16.
		return l.single(ctx, e, soft, hard, n, draw, send)
	}
	v, err := l.b.Run(ctx, scripts.SupInc, []string{e.hash},
		redisprov.NowArg(&l.b.Cfg), l.b.W, l.b.B, soft, hard, n, l.b.Cache, draw, l.b.TTL, a.want, a.start, a.rel, a.push, a.ahead)
	if err != nil {
		// The release may not have happened: those units stay counted
		// until their bucket dies, which only admits less. The declines
		// sent may be lost, which only lowers the factor others see.
		return limiter.Decision{}, l.errorf("inc", err)
	}
	rep, err := parseSupReply(v, soft)
	if err != nil {
		return limiter.Decision{}, l.errorf("inc", err)
	}
	d := rep.r.Decision()
	e.mu.Lock()
	e.soft, e.hard = soft, hard
	e.observe(send, &rep)
	e.idle = 0
	e.lastUse = send
	if rep.g > 0 {
		// A lease, with the call's n in it when admitted.
		l.install(&e.entry, send, rep.start, rep.now, rep.g)
		if d.Allowed {
			e.left -= n
			e.used += n
		}
		if a.plain {
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
	return d, nil
}

// single is fetchLease's call for a sparse key with nothing to give back
// or to send: sup_inc.lua without the hybrid's arguments, as redissup
// calls it. It brings no figures back; a key without a lease decides
// nothing from them.
func (l *Suppressed) single(ctx context.Context, e *supEntry, soft, hard, n, draw, send int64) (limiter.Decision, error) {
	v, err := l.b.Run(ctx, scripts.SupInc, []string{e.hash},
		redisprov.NowArg(&l.b.Cfg), l.b.W, l.b.B, soft, hard, n, l.b.Cache, draw, l.b.TTL)
	if err != nil {
		return limiter.Decision{}, l.errorf("inc", err)
	}
	r, err := redisprov.Decision(v, soft, window.OutcomeAllowed, window.OutcomeSuppressed)
	if err != nil {
		return limiter.Decision{}, l.errorf("inc", err)
	}
	var life int64
	if r.FactorPPM == window.PPM {
		life = l.interval.Milliseconds() // beyond H, as after a lease request
	}
	l.noLease(&e.entry, soft, hard, n, send, &r, life)
	return r.Decision(), nil
}

// refresh reports whether a tick must call Redis for e besides a release
// or a renewal, with e.mu held: to send the declines, once the lease is
// over or the key idle (a lease request would carry them), and to refresh
// the figures of a lease still open that the latest reply left a tick
// old, on a key past half its soft capacity then (the figures serve only
// while a lease is open, a lease request brings its own, and far below S
// they decide nothing a tick's lag could change).
func (l *Suppressed) refresh(e *supEntry, now, used int64, closing bool) bool {
	open := now < e.until
	stale := now-e.seen >= l.interval.Milliseconds()
	near := 2*(e.acc-e.left) >= e.soft
	return e.decl > 0 && (closing || !open || used == 0 || stale) || open && stale && near && used > 0
}

// syncArgs is the ARGV of a tick's call of sup_inc.lua: it decides
// nothing (n = 0; a renewal peeks with the draw that admits whenever the
// factor is below 1, and reserves its lease if admitted); every call
// brings the key's figures back.
func (l *Suppressed) syncArgs(s *syncCall[*supEntry], held bool) []any {
	want, push := int64(0), int64(0)
	if held {
		want, push = s.want, s.push
	}
	return []any{redisprov.NowArg(&l.b.Cfg), l.b.W, l.b.B, s.soft, s.hard, 0, l.b.Cache,
		int64(window.PPM - 1), l.b.TTL, want, s.start, s.rel, push, s.ahead}
}

// synced installs a renewal's lease (table.renewed) and takes the
// figures of a reply about the key's current lease.
func (l *Suppressed) synced(s *syncCall[*supEntry], _ bool, send int64, v any) error {
	rep, err := parseSupReply(v, s.soft)
	if err != nil {
		return err
	}
	e := s.e
	e.mu.Lock()
	if l.renewed(&e.entry, s, send, rep.start, rep.now, rep.g) && !s.releaseOnly {
		e.observe(send, &rep)
	}
	e.mu.Unlock()
	return nil
}

// Ping checks that Redis answers this limiter, as redissup.Limiter.Ping
// does: one script call that writes a unit to a key of the limiter's own,
// bounded by WithTimeout on top of ctx; a failure is an error naming the
// address. Call it at start-up.
func (l *Suppressed) Ping(ctx context.Context) error { return l.g.Ping(ctx) }
