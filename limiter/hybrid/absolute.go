package hybrid

import (
	"context"
	"time"

	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

// Absolute is the absolute limiter with leases: the instances that share a
// Redis and a prefix (hybrid or redisabs) never admit more than the
// capacity in any window. It is safe for concurrent use. Build it with
// NewAbsolute and Close it to give back the units it holds; the zero value
// is not usable.
type Absolute struct {
	table[*entry] // an entry's capacities are both C
}

var (
	_ limiter.Limiter                     = (*Absolute)(nil)
	_ limiter.SetLimiter                  = (*Absolute)(nil)
	_ interface{ Window() time.Duration } = (*Absolute)(nil)
)

// NewAbsolute returns an absolute limiter that leases units from Redis
// through client. It reads the options redisabs.New reads and
// WithSyncInterval, WithMaxLease and WithLeaseAhead; any other option, or
// a nil client, is ErrInvalidConfig. It starts the background sync, which
// Close stops, and calls Redis first at the first Inc.
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
// nothing: from memory while the key's lease has n units left, else by one
// Redis call that gives back the rest of the old lease, decides for n and,
// when it admits, reserves a new lease. A refusal is answered from memory
// for the same n until the RetryAfter Redis gave, one sync interval or one
// bucket at most. n = 0 decides for one unit and records nothing; n above
// the capacity is refused with Never set. Remaining and ResetAfter are
// those of the latest Redis reply. While Redis is unavailable leases keep
// serving; then the failure policy answers, with Degraded set.
func (l *Absolute) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	// The common path, calling the strategy directly rather than through
	// the table's generic code (docs/benchmarks.md, Hybrid). In the grace
	// after an outage the guard charges every admission to the fallback's
	// share, which a lease would bypass.
	if c, err := limiter.Capacity(rate, l.b.Cfg.Window); err == nil && n >= 1 && n <= c && !l.closed.Load() && !l.g.InGrace() {
		if e, ok := l.lookup(k); ok {
			// The clock is read before the lock, which 64 goroutines on one
			// key queue for.
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

func (l *Absolute) capacities(op string, rate limiter.Rate) (soft, hard int64, err error) {
	c, err := limiter.Capacity(rate, l.b.Cfg.Window)
	if err != nil {
		return 0, 0, l.errorf(op, err)
	}
	return c, c, nil
}

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

func (l *Absolute) draw() int64 { return 0 }

func (l *Absolute) peek(e *entry, now int64) (limiter.Decision, bool) {
	if e.left < 1 {
		return limiter.Decision{}, false
	}
	return limiter.Decision{Allowed: true, Limit: e.soft,
		Remaining: e.soft - e.acc + e.left, ResetAfter: msDur(e.resetAt - now)}, true
}

// peekRedis: abs_inc.lua with c = 0 asks for the stored capacity and
// writes nothing.
func (l *Absolute) peekRedis(ctx context.Context, k string) (limiter.Decision, error) {
	return l.plain(ctx, "is allowed", k, 0, 0)
}

// unleased decides as redisabs does: over the capacity is refused
// whatever its size (the script sees C + 1).
func (l *Absolute) unleased(ctx context.Context, k string, q request) (limiter.Decision, error) {
	return l.plain(ctx, "inc", k, q.soft, min(q.n, q.soft+1))
}

// plain is one abs_inc.lua call without a lease, as redisabs makes it.
func (l *Absolute) plain(ctx context.Context, op, k string, c, n int64) (limiter.Decision, error) {
	h, err := l.b.Check(op, k)
	if err != nil {
		return limiter.Decision{}, err
	}
	r, err := l.run(ctx, op, h, c, n)
	return r.Decision(), err
}

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

// refusalLife is how long a refusal is answered from memory at most: one
// sync interval or one bucket, whichever is longer, so that units other
// instances give back (which Redis' RetryAfter cannot foresee) are seen
// within that.
func (l *Absolute) refusalLife() int64 { return max(l.interval.Milliseconds(), l.b.Cfg.BucketMs) }

// fetchLease: one abs_inc.lua call gives back the rest of the key's lease
// and decides for n, reserving a new lease when admitted.
func (l *Absolute) fetchLease(ctx context.Context, e *entry, q request, a ask) (limiter.Decision, error) {
	c, n, send := q.soft, q.n, a.send
	v, err := l.b.Run(ctx, scripts.AbsInc, []string{e.hash},
		redisprov.NowArg(&l.b.Cfg), l.b.W, l.b.B, c, n, l.b.TTL, a.want, a.start, a.rel, a.ahead)
	if err != nil {
		// The release may not have happened: those units stay counted
		// until their bucket dies, which only admits less.
		return limiter.Decision{}, l.errorf("inc", err)
	}
	if g, ok := leaseReply(v); ok {
		e.mu.Lock()
		l.install(e, send, g.start, g.now, g.units)
		e.soft, e.hard = c, c
		e.acc = c - g.room
		e.resetAt = send + g.reset
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

func (l *Absolute) alone(ctx context.Context, h string, q request) (window.Result, int64, error) {
	r, err := l.run(ctx, "inc", h, q.soft, q.n)
	return r, l.refusalLife(), err
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
		if x[i], ok = a.(int64); !ok {
			return grant{}, false
		}
	}
	return grant{x[0], x[1], x[2], x[3], x[4]}, x[0] >= 1
}

func (l *Absolute) refresh(*entry, int64, int64, bool) bool { return false }

// syncArgs: a release decides nothing (n = 0); a renewal asks for one unit
// and a lease of want.
func (l *Absolute) syncArgs(s *syncCall[*entry], held bool) []any {
	n, want := int64(0), int64(0)
	if s.renew && held {
		n, want = 1, s.want
	}
	return []any{redisprov.NowArg(&l.b.Cfg), l.b.W, l.b.B, s.soft, n, l.b.TTL, want, s.start, s.rel, s.ahead}
}

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
