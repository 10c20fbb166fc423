package redisprov

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

// Key is the strategy's part of the Redis keys: key.Absolute or
// key.Suppressed.
func (s Strategy) Key() string { return s.key }

// InitGuard sets g up for a provider of strategy s named pkg (redisabs,
// redissup or the hybrid) whose calls carry b's arguments: the probe
// (Probe) and the strategy's write-back of fallback units.
func (s Strategy) InitGuard(g *Guard, pkg string, client Client, b *Base, opts []limiter.Option) {
	recon := absReconciler(b)
	if s.sup {
		recon = supReconciler(b)
	}
	g.Init(pkg, s.key, client, &b.Cfg, opts, Probe(&b.Cfg), recon)
}

// Call validates an Inc (or, with peek, an IsAllowed) of a provider of
// strategy s whose calls carry b's configuration: NewCall at
// the strategy's hard limit factor (1 for absolute), the Validate of its
// Backend.
func (s Strategy) Call(b *Base, op, k string, rate limiter.Rate, n int64, peek bool) (*Call, error) {
	factor := 1.0
	if s.sup {
		factor = b.Cfg.HardLimitFactor
	}
	return NewCall(b, op, k, rate, n, peek, factor)
}

// Probe returns the probe both strategies use: one abs_inc.lua call that
// records one unit on ProbeKey(prefix, "abs") with a capacity that never
// refuses, the window's TTL, and the limiter's clock argument. It is a
// write, so a Redis that answers reads but refuses writes (OOM, READONLY)
// keeps the breaker open. The guard runs it on its own connection when it
// can (Guard.Init).
func Probe(cfg *window.Config) func(ctx context.Context, client redis.Scripter) error {
	return probeOf(cfg, ProbeKey(cfg.Prefix, key.Absolute))
}

// NodeProbe returns the probe of a cluster master's guard
// (Guard.ByNode): Probe's call on the probe key of hash tag tag,
// one of that master's slots.
func NodeProbe(cfg *window.Config) func(tag string) func(ctx context.Context, client redis.Scripter) error {
	return func(tag string) func(ctx context.Context, client redis.Scripter) error {
		return probeOf(cfg, NodeProbeKey(cfg.Prefix, tag, key.Absolute))
	}
}

// probeOf is the probe that writes hash h.
func probeOf(cfg *window.Config, h string) func(ctx context.Context, client redis.Scripter) error {
	w, b, ttl := cfg.WindowMs, cfg.BucketMs, TTLMs(cfg)
	return func(ctx context.Context, client redis.Scripter) error {
		return scripts.AbsInc.Run(ctx, client, []string{h},
			NowArg(cfg), w, b, settings.MaxCapacity, 1, ttl).Err()
	}
}

// absReconciler is the Reconciler of an absolute provider whose
// script calls carry b's arguments: the units are recorded at Redis TIME
// with the capacity of the key's latest rate, as admitted whatever the key
// holds, even above that capacity (the scripts' mode WriteBack: on
// a set, in every limit).
func absReconciler(b *Base) Reconciler {
	cfg := &b.Cfg
	return Reconciler{
		Scripts: []*redis.Script{scripts.AbsInc, scripts.AbsSet},
		Queue: func(ctx context.Context, pipe redis.Scripter, p *Pending, n int64) *redis.Cmd {
			if p.Set == nil {
				c, _ := limiter.Capacity(p.Rate, cfg.Window) // validated by the Inc that admitted them
				return scripts.AbsInc.EvalSha(ctx, pipe, []string{p.Hash}, NowArg(cfg), b.W, b.B, c, n, b.TTL,
					0, 0, 0, 0, WriteBack)
			}
			hs, ls, err := setLimits(b, p, 1)
			if err != nil {
				return errCmd(ctx, err)
			}
			args := make([]any, 2, 3+4*len(ls))
			args[0], args[1] = NowArg(cfg), n
			for i := range ls {
				args = append(args, ls[i].P.W, ls[i].P.B, ls[i].Soft, SetTTL(cfg, &ls[i]))
			}
			return scripts.AbsSet.EvalSha(ctx, pipe, hs, append(args, WriteBack)...)
		},
	}
}

// supReconciler is the Reconciler of a suppressed provider whose
// script calls carry b's arguments: the units are recorded at Redis TIME
// with the capacities of the key's latest rate, as accepted whatever the
// key holds, even above the hard capacity (the scripts' mode
// WriteBack, as the absolute reconciler's; the draw sent is 0).
func supReconciler(b *Base) Reconciler {
	cfg := &b.Cfg
	return Reconciler{
		Scripts: []*redis.Script{scripts.SupInc, scripts.SupSet},
		Queue: func(ctx context.Context, pipe redis.Scripter, p *Pending, n int64) *redis.Cmd {
			if p.Set == nil {
				soft, _ := limiter.Capacity(p.Rate, cfg.Window) // validated by the Inc that admitted them
				hard, _ := window.HardCapacity(p.Rate, cfg.Window, cfg.HardLimitFactor)
				return scripts.SupInc.EvalSha(ctx, pipe, []string{p.Hash},
					NowArg(cfg), b.W, b.B, soft, hard, n, b.Cache, 0, b.TTL, 0, 0, 0, 0, 0, WriteBack)
			}
			hs, ls, err := setLimits(b, p, cfg.HardLimitFactor)
			if err != nil {
				return errCmd(ctx, err)
			}
			args := make([]any, 3, 4+setArgs*len(ls))
			args[0], args[1], args[2] = NowArg(cfg), b.Cache, 0
			for i := range ls {
				l := &ls[i]
				args = append(args, l.P.W, l.P.B, l.Soft, l.Hard, n, SetTTL(cfg, l))
			}
			return scripts.SupSet.EvalSha(ctx, pipe, hs, append(args, WriteBack)...)
		},
	}
}

// setLimits returns the hashes and limits of p's set for its write-back.
func setLimits(b *Base, p *Pending, factor float64) ([]string, []window.Limit, error) {
	hs, err := b.CheckSet("inc set", p.Key, p.Set, 0)
	if err != nil {
		return nil, nil, err
	}
	var lb [window.MaxSet]window.Limit
	ls, err := window.SetLimits(p.Set, factor, &lb)
	return hs, ls, err
}

// errCmd is a command that failed before it was sent.
func errCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}
