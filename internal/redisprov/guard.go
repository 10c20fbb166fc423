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

// InitGuard sets g up for a provider of strategy s named pkg whose calls
// carry b's arguments, with Probe and the strategy's write-back.
func (s Strategy) InitGuard(g *Guard, pkg string, client Client, b *Base, opts []limiter.Option) {
	g.Init(pkg, s.key, client, &b.Cfg, opts, Probe(&b.Cfg), reconciler(b, s.sup))
}

// Call is NewCall at the strategy's hard limit factor.
func (s Strategy) Call(b *Base, op, k string, rate limiter.Rate, n int64, peek bool) (*Call, error) {
	return NewCall(b, op, k, rate, n, peek, hardFactor(&b.Cfg, s.sup))
}

// Probe returns the probe both strategies use: one abs_inc.lua call that
// records one unit on ProbeKey(prefix, "abs") with a capacity that never
// refuses. It is a write, so a Redis that answers reads but refuses
// writes (OOM, READONLY) keeps the breaker open.
func Probe(cfg *window.Config) func(ctx context.Context, client redis.Scripter) error {
	return probeOf(cfg, ProbeKey(cfg.Prefix, key.Absolute))
}

// NodeProbe returns the probe of a cluster master's guard (Guard.ByNode):
// Probe's call on the probe key of hash tag tag, in that master's slots.
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

// reconciler is the Reconciler of a provider of strategy sup or absolute
// whose script calls carry b's arguments: the scripts' mode WriteBack, at
// the capacities of the key's latest rate (on a set, in every limit), with
// a draw of 0.
func reconciler(b *Base, sup bool) Reconciler {
	cfg := &b.Cfg
	one, many := scripts.AbsInc, scripts.AbsSet
	if sup {
		one, many = scripts.SupInc, scripts.SupSet
	}
	return Reconciler{
		Scripts: []*redis.Script{one, many},
		Queue: func(ctx context.Context, pipe redis.Scripter, p *Pending, n int64) *redis.Cmd {
			if p.Set == nil {
				// The rate was validated by the Inc that admitted them.
				soft, _ := limiter.Capacity(p.Rate, cfg.Window)
				hs := []string{p.Hash}
				if !sup {
					return one.EvalSha(ctx, pipe, hs, NowArg(cfg), b.W, b.B, soft, n, b.TTL, 0, 0, 0, 0, WriteBack)
				}
				hard, _ := window.HardCapacity(p.Rate, cfg.Window, cfg.HardLimitFactor)
				return one.EvalSha(ctx, pipe, hs, NowArg(cfg), b.W, b.B, soft, hard, n, b.Cache, 0, b.TTL, 0, 0, 0, 0, 0, WriteBack)
			}
			hs, err := b.CheckSet("inc set", p.Key, p.Set, 0)
			var lb [window.MaxSet]window.Limit
			var ls []window.Limit
			if err == nil {
				ls, err = window.SetLimits(p.Set, hardFactor(cfg, sup), &lb)
			}
			if err != nil {
				cmd := redis.NewCmd(ctx) // failed before it was sent
				cmd.SetErr(err)
				return cmd
			}
			args := make([]any, 0, 4+setArgs*len(ls))
			if sup {
				args = append(args, NowArg(cfg), b.Cache, 0)
			} else {
				args = append(args, NowArg(cfg), n)
			}
			for i := range ls {
				l := &ls[i]
				args = append(args, l.P.W, l.P.B, l.Soft)
				if sup {
					args = append(args, l.Hard, n)
				}
				args = append(args, SetTTL(cfg, l))
			}
			return many.EvalSha(ctx, pipe, hs, append(args, WriteBack)...)
		},
	}
}
