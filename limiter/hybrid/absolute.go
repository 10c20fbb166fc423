package hybrid

import (
	"context"
	"time"

	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

// Absolute is the absolute limiter with leases: it answers from memory
// against units reserved in Redis, and never lets the instances that share
// a Redis and a prefix (hybrid or redisabs) admit more than the capacity in
// any window. It is safe for concurrent use. Build it with NewAbsolute and
// Close it to give back the units it holds; the zero value is not usable.
type Absolute struct {
	table[*entry] // an entry's capacities are both C
}

var (
	_ limiter.Limiter                     = (*Absolute)(nil)
	_ interface{ Window() time.Duration } = (*Absolute)(nil)
)

// Window returns the window the limiter was built with (WithWindow).
func (l *Absolute) Window() time.Duration { return l.b.Cfg.Window }

// NewAbsolute returns an absolute limiter that leases units from Redis
// through client. It reads the options redisabs.New reads (WithWindow,
// WithBucket, WithPrefix, WithClock, WithTimeout, WithFailurePolicy and the
// other failure options, WithBatching, WithHotKeyRelief, WithObserver) and
// WithSyncInterval, WithMaxLease and WithLeaseAhead; any other option (the
// suppressed strategy's) is ErrInvalidConfig. It starts the background
// sync goroutine, which Close stops; it makes no call to Redis until the
// first Inc. A nil client is ErrInvalidConfig.
func NewAbsolute(client Client, opts ...limiter.Option) (*Absolute, error) {
	l := &Absolute{}
	err := l.init(l, kind[*entry]{redis: redisprov.Absolute, newEntry: func() *entry { return new(entry) },
		sync: scripts.AbsInc, get: scripts.AbsGet, usageLen: 2}, client, opts)
	if err != nil {
		return nil, err
	}
	return l, nil
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
	// Nearly every call is answered from memory: that path calls the
	// strategy's code directly, not through the table's generic code
	// (docs/benchmarks.md, Hybrid); the table's inc is the rest. In the
	// grace after an outage every admission goes through the guard, which
	// charges it to the fallback's share (a lease would bypass it).
	if c, err := limiter.Capacity(rate, l.b.Cfg.Window); err == nil && n >= 1 && n <= c && !l.closed.Load() && !l.g.InGrace() {
		if e, ok := l.lookup(k); ok {
			// The clock is read before the lock, as the table's inc does:
			// read under it, it lengthened the critical section that 64
			// goroutines on one key queue for (BenchmarkInc hot rows).
			now, refusals := l.now(), !l.g.Open()
			e.mu.Lock()
			d, ok := l.local(e, request{soft: c, hard: c, n: n}, now, refusals)
			e.mu.Unlock()
			if ok {
				l.g.Observe(ctx, "inc", k, n, d)
				return d, nil
			}
		}
	}
	return l.inc(ctx, k, rate, n)
}

// capacities returns rate's capacity C, as both the soft and the hard.
func (l *Absolute) capacities(op string, rate limiter.Rate) (soft, hard int64, err error) {
	c, err := limiter.Capacity(rate, l.b.Cfg.Window)
	if err != nil {
		return 0, 0, l.errorf(op, err)
	}
	return c, c, nil
}

// local answers an Inc from e's lease, or its cached refusal (strategy).
func (l *Absolute) local(e *entry, q request, now int64, refusals bool) (d limiter.Decision, ok bool) {
	c, n := q.soft, q.n
	if e.soft != c || e.gone {
		return d, false
	}
	span := l.span()
	if now < e.until && e.left >= n && !fromFuture(now, e.resetAt, span) {
		e.left -= n
		e.used += n
		e.hits++
		e.idle = 0
		e.lastUse = now
		return limiter.Decision{Allowed: true, Limit: c,
			Remaining: c - e.acc + e.left, ResetAfter: msDur(e.resetAt - now)}, true
	}
	if r, ok := e.ref.Answer(c, c, n, now, 0); ok && refusals && !fromFuture(now, e.ref.ResetAt(), span) {
		e.idle = 0
		return r.Decision(), true
	}
	return d, false
}

// draw: the absolute strategy draws nothing.
func (l *Absolute) draw() int64 { return 0 }

// IsAllowed reports whether one more unit of key would be admitted now:
// from memory while this instance holds a lease with a unit left, else
// from Redis at the capacity stored by the key's latest Inc (a key with no
// live state is allowed, with Limit 0). It writes nothing.
func (l *Absolute) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	return l.allowed(ctx, k)
}

// peek answers an IsAllowed from an open lease with a unit left.
func (l *Absolute) peek(e *entry, now int64) (limiter.Decision, bool) {
	if e.left < 1 {
		return limiter.Decision{}, false
	}
	return limiter.Decision{Allowed: true, Limit: e.soft,
		Remaining: e.soft - e.acc + e.left, ResetAfter: msDur(e.resetAt - now)}, true
}

// Get returns key's usage in Redis: the units admitted by every instance,
// plus the unused units of other instances' leases (this instance's own
// unused lease is left out), and the stored capacity. Redis failures are
// errors, as for redisabs.
func (l *Absolute) Get(ctx context.Context, k string) (limiter.Usage, error) { return l.get(ctx, k) }

// peekRedis is IsAllowed's Redis call: abs_inc.lua with c = 0, which asks
// for the stored capacity and writes nothing.
func (l *Absolute) peekRedis(ctx context.Context, k string) (limiter.Decision, error) {
	return l.plain(ctx, "is allowed", k, 0, 0)
}

// Reset forgets key: it drops this instance's lease and cached refusal,
// UNLINKs the key's hash and drops what the local fallback holds for it.
// Other instances' leases of the key stay theirs until they expire.
func (l *Absolute) Reset(ctx context.Context, k string) error { return l.reset(ctx, k) }

// unleased decides an Inc of n = 0 or n > C, or of a key with no room in
// memory, as redisabs does: a request over the capacity is refused
// whatever its size (the script sees C + 1).
func (l *Absolute) unleased(ctx context.Context, k string, q request) (limiter.Decision, error) {
	return l.plain(ctx, "inc", k, q.soft, min(q.n, q.soft+1))
}

// Close stops the sync, gives back the unused units of every lease and
// marks the limiter closed: later calls return ErrClosed. The units used
// stay counted where they are, so after Close a Get on Redis reports the
// units this instance admitted. It waits for the sync and the failure
// policy's probe until ctx is done (then it returns ctx's error; leases not
// given back expire with their buckets). It does not close the client.
// Closing twice is harmless.
func (l *Absolute) Close(ctx context.Context) error { return l.close(ctx) }

// plain is one abs_inc.lua call without a lease, as redisabs makes it.
func (l *Absolute) plain(ctx context.Context, op, k string, c, n int64) (limiter.Decision, error) {
	h, err := l.b.Check(op, k)
	if err != nil {
		return limiter.Decision{}, err
	}
	r, err := l.run(ctx, op, h, c, n)
	return r.Decision(), err
}

// run is plain's call on the key's hash h.
func (l *Absolute) run(ctx context.Context, op, h string, c, n int64) (window.Result, error) {
	v, err := l.b.Run(ctx, scripts.AbsInc, []string{h},
		redisprov.NowArg(&l.b.Cfg), l.b.W, l.b.B, c, n, l.b.TTL)
	if err != nil {
		return window.Result{}, l.errorf(op, err)
	}
	r, err := redisprov.Decision(v, c, window.OutcomeAllowed, window.OutcomeRejected)
	if err != nil {
		return window.Result{}, l.errorf(op, err)
	}
	return r, nil
}

// refusalLife is how long a refusal of Redis is answered from memory at
// most: one sync interval or one bucket, whichever is longer. Units that
// other instances give back (unused leases, which Redis' exact RetryAfter
// cannot foresee) are seen within that. (A saturated key called often
// would otherwise cost a Redis call per tick for every key.)
func (l *Absolute) refusalLife() int64 { return max(l.interval.Milliseconds(), l.b.Cfg.BucketMs) }

// fetchLease is the lease request of an Inc (table.leaseLocked): one
// abs_inc.lua call releases what is left of the key's lease and decides
// for n, reserving a new lease when admitted.
func (l *Absolute) fetchLease(ctx context.Context, e *entry, q request, a ask) (limiter.Decision, error) {
	c, n, send := q.soft, q.n, a.send
	if a.plain && a.rel == 0 {
		// Nothing to give back: redisabs' own call, whose reply is one
		// integer where a lease's has 5.
		r, err := l.run(ctx, "inc", e.hash, c, n)
		if err != nil {
			return limiter.Decision{}, err
		}
		l.noLease(e, c, c, n, send, &r, l.refusalLife())
		return r.Decision(), nil
	}
	v, err := l.b.Run(ctx, scripts.AbsInc, []string{e.hash},
		redisprov.NowArg(&l.b.Cfg), l.b.W, l.b.B, c, n, l.b.TTL, a.want, a.start, a.rel, a.ahead)
	if err != nil {
		// The release may not have happened: those units stay counted
		// until their bucket dies, which only admits less.
		return limiter.Decision{}, l.errorf("inc", err)
	}
	if g, ok := leaseReply(v); ok {
		e.mu.Lock()
		l.installGrant(e, c, send, g)
		if a.plain {
			e.granted = 0 // no lease: nothing to size the next one by
		}
		e.left -= n
		e.used += n
		e.idle = 0
		e.lastUse = send
		d := limiter.Decision{Allowed: true, Limit: c,
			Remaining: c - e.acc + e.left, ResetAfter: msDur(g.reset)}
		e.mu.Unlock()
		return d, nil
	}
	r, err := redisprov.Decision(v, c, window.OutcomeAllowed, window.OutcomeRejected)
	if err != nil {
		return limiter.Decision{}, l.errorf("inc", err)
	}
	if !r.Allowed && !r.Never && r.RetryAfter > 0 && !l.b.Cfg.NoRelief {
		e.mu.Lock()
		e.soft, e.hard = c, c
		e.ref.Set(c, c, n, send, send+l.refusalLife(), &r)
		e.idle = 0
		e.mu.Unlock()
	}
	return r.Decision(), nil
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

// installGrant makes g e's lease at capacity c, with e.mu held; send is
// the local time at which the call was sent (table.install).
func (l *Absolute) installGrant(e *entry, c, send int64, g grant) {
	l.install(e, send, g.start, g.now, g.units)
	e.soft, e.hard = c, c
	e.acc = c - g.room
	e.resetAt = send + g.reset
}

// refresh: an absolute key's tick calls Redis only to give back or renew.
func (l *Absolute) refresh(*entry, int64, int64, bool) bool { return false }

// syncArgs is the ARGV of a tick's call of abs_inc.lua: a release decides
// nothing (n = 0); a renewal asks for one unit and a lease of want.
func (l *Absolute) syncArgs(s *syncCall[*entry], held bool) []any {
	n, want := int64(0), int64(0)
	if s.renew && held {
		n, want = 1, s.want
	}
	return []any{redisprov.NowArg(&l.b.Cfg), l.b.W, l.b.B, s.soft, n, l.b.TTL, want, s.start, s.rel, s.ahead}
}

// synced installs a renewal's grant (table.renewed).
func (l *Absolute) synced(s *syncCall[*entry], held bool, send int64, v any) error {
	if !s.renew || !held {
		return nil
	}
	if g, ok := leaseReply(v); ok {
		e := s.e
		e.mu.Lock()
		if l.renewed(e, s, send, g.start, g.now, g.units) {
			e.acc = s.hard - g.room
			e.resetAt = send + g.reset
		}
		e.mu.Unlock()
	}
	return nil
}

// Ping checks that Redis answers this limiter, as redisabs.Limiter.Ping
// does: one script call that writes a unit to a key of the limiter's own,
// bounded by WithTimeout on top of ctx; a failure is an error naming the
// address. Call it at start-up.
func (l *Absolute) Ping(ctx context.Context) error { return l.g.Ping(ctx) }
