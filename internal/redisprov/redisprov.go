package redisprov

import (
	"cmp"
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

// Strategy is the strategy of a Provider: Absolute or Suppressed. Its
// Base keeps it as sup, on which calls branch: a flag, not an interface,
// so that the buffers of a call stay on the stack.
type Strategy struct {
	pkg string // the face's package: the prefix of every error
	key string // key.Absolute or key.Suppressed: the Redis key's part
	sup bool
}

// The two strategies.
var (
	Absolute   = Strategy{pkg: "redisabs", key: key.Absolute}
	Suppressed = Strategy{pkg: "redissup", key: key.Suppressed, sup: true}
)

// Provider is a Redis limiter of one strategy. It is safe for concurrent
// use once Init has returned; use it by pointer, it must not be copied.
type Provider struct {
	b      Base
	g      Guard
	relief *Memory // hot-key relief's refusals; nil when it is off
	peeks  Peeks
}

// Init resolves opts and sets p up for strategy s over client. It starts
// no goroutine and makes no call to Redis. A nil client or a bad option is
// ErrInvalidConfig.
func (p *Provider) Init(s Strategy, client Client, opts []limiter.Option) error {
	if err := p.b.Init(s.pkg, s.key, client, opts); err != nil {
		return err
	}
	cfg := &p.b.Cfg
	p.g.Init(&p.b, opts, Probe(cfg))
	p.g.ByNode()
	p.b.SetGate(p.g.Opened)
	if !cfg.NoRelief {
		p.relief = new(Memory)
		p.relief.Init(cfg.WindowMs, cfg.BucketMs, cfg.CacheMs)
	}
	return nil
}

// Window returns the window of WithWindow.
func (p *Provider) Window() time.Duration { return p.b.Cfg.Window }

// hardFactor is the hard limit factor of a strategy's calls: 1 unless sup.
func hardFactor(cfg *window.Config, sup bool) float64 {
	if sup {
		return cfg.HardLimitFactor
	}
	return 1
}

// drawPPM is a call's one number from the random source, in ppm: 0
// unless sup.
func drawPPM(cfg *window.Config, sup bool) int64 {
	if sup {
		return window.DrawPPM(cfg.Rand())
	}
	return 0
}

// Decider returns p's Guard and p as its Backend: the face calls
// Guard.Decide itself, so that its Inc and IsAllowed are one call deep.
func (p *Provider) Decider() (*Guard, Backend) { return &p.g, p }

// Get runs a Get: an unavailable Redis is an error under every policy.
func (p *Provider) Get(ctx context.Context, k string) (limiter.Usage, error) {
	return p.g.Get(ctx, p, &p.b, k)
}

// Reset UNLINKs the key's hash and drops what the fallback and relief
// hold for it.
func (p *Provider) Reset(ctx context.Context, k string) error {
	err := p.g.Reset(ctx, &p.b, k)
	if p.relief != nil {
		p.relief.Forget(k) // even after an error: a timed-out UNLINK may have run
	}
	return err
}

// Close makes later calls fail with ErrClosed and waits for the probe,
// the fallback and the batching goroutines until ctx is done.
func (p *Provider) Close(ctx context.Context) error {
	p.b.Close()
	return cmp.Or(p.g.Close(ctx), p.b.Wait(ctx))
}

// Ping runs the probe once, bounded by WithTimeout on top of ctx.
func (p *Provider) Ping(ctx context.Context) error { return p.g.Ping(ctx) }

// Validate checks an Inc (or, with peek, an IsAllowed) for the policy
// (Backend).
func (p *Provider) Validate(op, k string, rate limiter.Rate, n int64, peek bool) (*Call, error) {
	return NewCall(&p.b, op, k, rate, n, peek)
}

// Decide is the Redis call of an Inc, or with peek of an IsAllowed
// (Backend). It returns ErrRemembered with a refusal relief remembers.
func (p *Provider) Decide(ctx context.Context, k string, rate limiter.Rate, n int64, peek bool) (limiter.Decision, error) {
	if peek {
		return p.peek(ctx, k)
	}
	b := &p.b
	if err := b.Valid("inc", k); err != nil {
		return limiter.Decision{}, err
	}
	if err := window.CheckCost(n); err != nil {
		return limiter.Decision{}, b.Errorf("inc", err)
	}
	soft, err := limiter.Capacity(rate, b.Cfg.Window)
	if err != nil {
		return limiter.Decision{}, b.Errorf("inc", err)
	}
	hard := soft
	if b.sup {
		if hard, err = window.HardCapacity(rate, b.Cfg.Window, b.Cfg.HardLimitFactor); err != nil {
			return limiter.Decision{}, b.Errorf("inc", err)
		}
	}
	draw := drawPPM(&b.Cfg, b.sup)
	// Memory is asked before the hash name is built, so that a remembered
	// refusal allocates nothing. A suppressed call of 0 units is not
	// answered from memory: declines made there wait for a call that
	// writes.
	if p.relief != nil && (n > 0 || !b.sup) {
		if r, ok := p.relief.Answer(k, soft, hard, n, b.Cfg.NowMs(), draw); ok {
			return r.Decision(), ErrRemembered
		}
	}
	h, err := b.Check("inc", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	if p.relief == nil || n == 0 || !b.sup && n > soft {
		r, err := p.inc(ctx, h, soft, hard, n, draw, 0)
		return r.Decision(), err
	}
	r, remembered, err := p.relief.Decide(ctx, k, soft, hard, n, draw, b.Cfg.NowMs, func(ctx context.Context, decl int64) (window.Result, error) {
		return p.inc(ctx, h, soft, hard, n, draw, decl)
	})
	if err == nil && remembered {
		err = ErrRemembered
	}
	return r.Decision(), err
}

// inc is one call of the strategy's decision script on hash h. decl > 0
// reports units declined from memory with the call, through sup_inc.lua's
// arguments of the hybrid, whose reply begins with the decision.
func (p *Provider) inc(ctx context.Context, h string, soft, hard, n, draw, decl int64) (window.Result, error) {
	b := &p.b
	if !b.sup {
		// A request over the capacity is refused whatever its size: the
		// script sees C + 1, so its numbers stay exact in a double.
		return p.decide(ctx, "inc", scripts.AbsInc, h, soft, false, NowArg(&b.Cfg), b.W, b.B, soft, min(n, soft+1), b.TTL)
	}
	args := []any{NowArg(&b.Cfg), b.W, b.B, soft, hard, window.RecordedCost(n, hard), b.Cache, draw, b.TTL}
	if decl > 0 {
		args = append(args, 0, 0, 0, decl)
	}
	return p.decide(ctx, "inc", scripts.SupInc, h, soft, decl > 0, args...)
}

// decide runs a decision script on hash h with args and reads its reply
// for capacity c (0: the stored one); long: the reply may go on after the
// decision.
func (p *Provider) decide(ctx context.Context, op string, script *redis.Script, h string, c int64, long bool, args ...any) (window.Result, error) {
	v, err := p.b.Run(ctx, script, []string{h}, args...)
	if err != nil {
		return window.Result{}, p.b.Errorf(op, err)
	}
	if arr, ok := v.([]any); ok && long && len(arr) > 8 {
		v = arr[:8]
	}
	refused := int64(window.OutcomeRejected)
	if p.b.sup {
		refused = window.OutcomeSuppressed
	}
	r, err := Decision(v, c, window.OutcomeAllowed, refused)
	if err != nil {
		return window.Result{}, p.b.Errorf(op, err)
	}
	return r, nil
}

// peek is IsAllowed's call to Redis: sup_allowed.lua, or abs_inc.lua with
// c = 0, which asks for the stored capacity and writes nothing. With
// relief on, concurrent peeks of a key share round trips (Peeks).
func (p *Provider) peek(ctx context.Context, k string) (limiter.Decision, error) {
	b := &p.b
	h, err := b.Check("is allowed", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	peek := func(ctx context.Context) (limiter.Decision, error) {
		var r window.Result
		var err error
		if b.sup {
			r, err = p.decide(ctx, "is allowed", scripts.SupAllowed, h, 0, false, NowArg(&b.Cfg), b.W, b.Cache, b.B)
		} else {
			r, err = p.decide(ctx, "is allowed", scripts.AbsInc, h, 0, false, NowArg(&b.Cfg), b.W, b.B, 0, 0, b.TTL)
		}
		return r.Decision(), err
	}
	if p.relief == nil {
		return peek(ctx)
	}
	return p.peeks.Do(ctx, k, peek)
}

// Usage is the Redis call of a Get (Backend).
func (p *Provider) Usage(ctx context.Context, k string) (limiter.Usage, error) {
	b := &p.b
	h, err := b.Check("get", k)
	if err != nil {
		return limiter.Usage{}, err
	}
	var u [1]limiter.Usage
	if err := SetsOf(b).usages(ctx, "get", false, []string{h}, u[:], NowArg(&b.Cfg), b.W, b.B); err != nil {
		return limiter.Usage{}, err
	}
	if b.sup && p.relief != nil {
		// Units declined from memory reach Redis with the key's next
		// call; until then they are counted here.
		u[0].Declined += p.relief.Pending(k, b.Cfg.NowMs())
	}
	return u[0], nil
}
