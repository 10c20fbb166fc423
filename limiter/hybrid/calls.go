package hybrid

import (
	"context"
	"time"

	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

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
	v, err := t.b.Run(ctx, script, []string{h}, redisprov.NowArg(&t.b.Cfg), t.b.W, t.b.B)
	if err != nil {
		return limiter.Usage{}, t.errorf("get", err)
	}
	x, err := redisprov.Int64s(v, width)
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

// inc is the rest of Inc for both strategies once memory had no answer:
// the argument checks, then the failure policy's decision.
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
// cached refusal and unsent declines, UNLINKs the key's hash and drops
// what the local fallback holds for it.
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

// backend is a table as its Guard sees it (redisprov.Backend).
type backend[E keyEntry] table[E]

// Validate checks an Inc (or, with peek, an IsAllowed) for the policy.
func (be *backend[E]) Validate(op, k string, rate limiter.Rate, n int64, peek bool) (*redisprov.Call, error) {
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
// bucket dies at reset (local ms) is of a key Redis now treats as dead
// (window.FromFuture): memory then answers nothing.
func fromFuture(now, reset, span int64) bool { return window.FromFuture(now, reset-span, span) }

func msDur(ms int64) time.Duration {
	if ms <= 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}
