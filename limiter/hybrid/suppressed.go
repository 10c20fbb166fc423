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
// span of W holds more than H accepted units across the instances that
// share a Redis and a prefix; the soft target S holds within the tolerance
// docs/algorithms.md gives (Hybrid leases). It is safe for concurrent use.
// Build it with NewSuppressed and Close it to give back the units it
// holds; the zero value is not usable.
type Suppressed struct {
	table[*supEntry]
}

var (
	_ limiter.Limiter                     = (*Suppressed)(nil)
	_ limiter.SetLimiter                  = (*Suppressed)(nil)
	_ interface{ Window() time.Duration } = (*Suppressed)(nil)
)

// supEntry is one key's local state: entry, and the fleet's figures as the
// latest reply saw them, guarded by entry.mu. They are as old as that
// reply: a tick refreshes them when a lease still open on a key past S/2
// finds them a tick old (refresh), and they serve only while a lease is
// open.
type supEntry struct {
	entry
	// obs and recent are the observed units in the window and in the last
	// min(W, 1 s), this instance's lease counted (recent may be 0 while
	// acc is below S); firstAt (local ms) is when the oldest live bucket
	// dies; seen is the local ms of the reply's send.
	obs, recent, firstAt, seen int64
	// The factor in ppm cached at fAt (local ms; 0: none), kept as long as
	// WithSuppressionCache caches it in Redis.
	fppm, fAt int64
}

// NewSuppressed returns a suppressed limiter that leases accepted units
// from Redis through client. It reads the options redissup.New reads and
// WithSyncInterval, WithMaxLease and WithLeaseAhead; a nil client is
// ErrInvalidConfig. WithSuppressionCache applies to the decisions from
// memory too. It starts the background sync, which Close stops, and calls
// Redis first at the first Inc.
func NewSuppressed(client Client, opts ...limiter.Option) (*Suppressed, error) {
	l := &Suppressed{}
	err := l.init(l, kind[*supEntry]{redis: redisprov.Suppressed, newEntry: func() *supEntry { return new(supEntry) },
		sync: scripts.SupInc, get: scripts.SupGet, usageLen: 3}, client, opts)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Suppressed) draw() int64 { return window.DrawPPM(l.b.Cfg.Rand()) }

// factor is the suppression factor in ppm from the latest figures, with
// this instance's unused lease taken out and its declines since put in:
// the one cached while younger than the cache period, else a fresh one,
// cached when caching is on and store is set (IsAllowed stores nothing).
func (e *supEntry) factor(now int64, cfg *window.Config, store bool) int64 {
	if cfg.CacheMs > 0 && e.fAt > 0 && now-e.fAt < cfg.CacheMs {
		return e.fppm
	}
	obs := max(0, e.obs-e.left+e.decl)
	recent := max(0, e.recent-e.left+e.decl)
	f := window.FactorPPM(obs, recent, cfg.WindowMs, e.soft)
	if store && cfg.CacheMs > 0 {
		e.fppm, e.fAt = f, max(now, 1)
	}
	return f
}

func ppmFactor(ppm int64) float64 { return float64(ppm) / window.PPM }

// local draws once when it answers, unless q was drawn; ok false: nothing
// was drawn.
func (l *Suppressed) local(e *supEntry, q request, now int64, refusals bool) (d limiter.Decision, ok bool) {
	soft, hard, n := q.soft, q.hard, q.n
	if e.gone || e.soft != soft || e.hard != hard {
		return d, false
	}
	cfg := &l.b.Cfg
	span := l.span()
	if now < e.until && e.left >= n && !fromFuture(now, e.resetAt, span) {
		// The fleet's accepted units without this unused lease.
		acc := e.acc - e.left
		d = limiter.Decision{Limit: soft, ResetAfter: msDur(e.resetAt - now)}
		r := q.draw
		if !q.drawn {
			r = l.draw()
		}
		if acc+n <= soft {
			d.Allowed = true
		} else {
			f := e.factor(now, cfg, true)
			d.Suppressed, d.SuppressionFactor, d.Allowed = true, ppmFactor(f), r >= f
		}
		if d.Allowed {
			e.left -= n
			e.used += n
			e.hits++
			acc += n
		} else {
			e.decl = addDeclined(e.decl, n)
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

// Inc offers n units of key at rate: below the soft capacity S they are
// allowed; between S and the hard capacity H admitted with probability
// 1 − f, f the fleet's suppression factor; beyond H refused. While the
// key's lease has n units left the decision is made in memory, with the
// factor from the latest reply's figures and this instance's declines
// since; otherwise one Redis call gives back the rest of the old lease,
// decides for n as redissup would and, when it admits, reserves a new
// lease. Every call with valid arguments draws one number. A refusal
// beyond H is answered from memory for the same n until Redis' RetryAfter
// or one sync interval. n = 0 peeks for one unit and records nothing; n
// above H is refused with Never set. While Redis is unavailable leases
// keep serving; then the failure policy answers, with Degraded set.
func (l *Suppressed) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	// As Absolute.Inc.
	e, found := l.lookup(k)
	if soft, hard, err := l.capacities("inc", rate); found && err == nil && n >= 1 && n <= hard && !l.closed.Load() && !l.g.InGrace() {
		q := request{soft: soft, hard: hard, n: n}
		now, refusals := l.now(), !l.g.Open()
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

// peek answers as sup_allowed.lua would, from the latest reply's figures.
func (l *Suppressed) peek(e *supEntry, now int64) (limiter.Decision, bool) {
	acc := e.acc - e.left
	d := limiter.Decision{Allowed: true, Limit: e.soft,
		Remaining: max(0, e.soft-acc), ResetAfter: msDur(e.resetAt - now)}
	if acc+1 > e.soft {
		d.Suppressed, d.Allowed, d.SuppressionFactor = true, false, 1
		if acc+1 <= e.hard {
			d.SuppressionFactor = ppmFactor(e.factor(now, &l.b.Cfg, false))
		}
		d.RetryAfter = msDur(e.firstAt - now)
	}
	return d, true
}

func (l *Suppressed) unleased(ctx context.Context, k string, q request) (limiter.Decision, error) {
	return l.plain(ctx, k, q.soft, q.hard, q.n, q.draw)
}

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
// does and bringing the key's figures back to its entry, if it has one.
func (l *Suppressed) plain(ctx context.Context, k string, soft, hard, n, draw int64) (limiter.Decision, error) {
	h, err := l.b.Check("inc", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	e, ok := l.lookup(k)
	if !ok { // no entry for the figures: redissup's own call
		r, err := l.short(ctx, h, soft, hard, window.RecordedCost(n, hard), draw)
		if err != nil {
			return limiter.Decision{}, err
		}
		return r.Decision(), nil
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
	e.mu.Lock()
	if e.soft == soft && e.hard == hard {
		e.observe(send, &rep)
	}
	e.mu.Unlock()
	return rep.r.Decision(), nil
}

// supReply is the reply of a hybrid call of sup_inc.lua: the decision,
// the accepted units it recorded (g: its lease, and n when admitted), the
// start of the bucket written, the script's clock, and the fleet's figures.
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

// fetchLease: one sup_inc.lua call gives back the rest of the key's lease,
// records the declines made from memory, and decides for n, reserving a
// new lease when admitted.
func (l *Suppressed) fetchLease(ctx context.Context, e *supEntry, q request, a ask) (limiter.Decision, error) {
	soft, hard, n, draw, send := q.soft, q.hard, q.n, q.draw, a.send
	v, err := l.b.Run(ctx, scripts.SupInc, []string{e.hash},
		redisprov.NowArg(&l.b.Cfg), l.b.W, l.b.B, soft, hard, n, l.b.Cache, draw, l.b.TTL, a.want, a.start, a.rel, a.push, a.ahead)
	if err != nil {
		// The release may be lost, which only admits less, and the
		// declines, which only lowers the factor others see.
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
		// The units of this instance's lease count as free.
		d.Remaining = max(0, soft-(rep.acc-e.left))
	}
	if !d.Allowed && !rep.r.Never && rep.r.FactorPPM == window.PPM && rep.r.RetryAfter > 0 && !l.b.Cfg.NoRelief {
		// Beyond H: answered from memory for one sync interval at most.
		e.ref.Set(soft, hard, n, send, send+l.interval.Milliseconds(), &rep.r)
	}
	e.mu.Unlock()
	return d, nil
}

// alone: redissup's own call, which brings no figures back (a key without
// a lease decides nothing from them); a refusal beyond H is remembered as
// after a lease request.
func (l *Suppressed) alone(ctx context.Context, h string, q request) (window.Result, int64, error) {
	r, err := l.short(ctx, h, q.soft, q.hard, q.n, q.draw)
	var life int64
	if r.FactorPPM == window.PPM {
		life = l.interval.Milliseconds()
	}
	return r, life, err
}

// short is one sup_inc.lua call in redissup's form, of hash h.
func (l *Suppressed) short(ctx context.Context, h string, soft, hard, n, draw int64) (window.Result, error) {
	v, err := l.b.Run(ctx, scripts.SupInc, []string{h},
		redisprov.NowArg(&l.b.Cfg), l.b.W, l.b.B, soft, hard, n, l.b.Cache, draw, l.b.TTL)
	if err != nil {
		return window.Result{}, l.errorf("inc", err)
	}
	r, err := redisprov.Decision(v, soft, window.OutcomeAllowed, window.OutcomeSuppressed)
	if err != nil {
		return window.Result{}, l.errorf("inc", err)
	}
	return r, nil
}

// refresh: a tick sends the declines once the lease is over or the key
// idle (a lease request would carry them), and refreshes the figures of
// an open lease a tick old on a key past S/2 then (far below S they decide
// nothing a tick's lag could change).
func (l *Suppressed) refresh(e *supEntry, now, used int64, closing bool) bool {
	open := now < e.until
	stale := now-e.seen >= l.interval.Milliseconds()
	near := 2*(e.acc-e.left) >= e.soft
	return e.decl > 0 && (closing || !open || used == 0 || stale) || open && stale && near && used > 0
}

// syncArgs: a tick decides nothing (n = 0; a renewal peeks with the draw
// that admits whenever the factor is below 1, leasing if admitted).
func (l *Suppressed) syncArgs(s *syncCall[*supEntry], held bool) []any {
	want, push := int64(0), int64(0)
	if held {
		want, push = s.want, s.push
	}
	return []any{redisprov.NowArg(&l.b.Cfg), l.b.W, l.b.B, s.soft, s.hard, 0, l.b.Cache,
		int64(window.PPM - 1), l.b.TTL, want, s.start, s.rel, push, s.ahead}
}

// synced installs a renewal's lease and takes the figures of a reply
// about the key's current lease.
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
