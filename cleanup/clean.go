package cleanup

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-go/sluice/internal/redisprov"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/key"
)

// span returns the W + B and the B in ms the options give for p, if any;
// clean.lua only lengthens the window a hash records by it.
func (c *Cleaner) span(p key.Parsed) (sp, b int64, known bool) {
	if c.o.fn != nil {
		if w, b, ok := c.o.fn(p); ok {
			if sp, b, err := spanMs(w, b); err == nil {
				return sp, b, true
			}
		}
	}
	if p.Limit != "" {
		if w, ok := c.o.limits[p.Limit]; ok {
			return w.span, w.bucket, true
		}
	}
	if c.o.all.span > 0 {
		return c.o.all.span, c.o.all.bucket, true
	}
	return 0, 0, false
}

// Replies of clean.lua.
const (
	stateGone    = 0
	stateLive    = 1
	stateDeleted = 2
	stateLayout  = 3
	moreSteps    = 1
	moreBatches  = 2
)

// clean handles one key.
func (c *Cleaner) clean(ctx context.Context, node Client, k string, r *Report) error {
	p, err := key.Parse(k)
	probe := false
	if strategy, ok := redisprov.ParseProbe(k, c.o.prefix); ok {
		// The failure policy's probe hash, of the schema's layout.
		p, err, probe = key.Parsed{Prefix: c.o.prefix, Strategy: strategy, Suffix: key.Hash}, nil, true
	}
	switch {
	case err != nil || p.Prefix != c.o.prefix:
		return c.unknown(ctx, node, k, Foreign, r)
	case p.Strategy != key.Absolute && p.Strategy != key.Suppressed:
		return c.unknown(ctx, node, k, UnknownStrategy, r)
	case p.Suffix != key.Hash:
		return c.unknown(ctx, node, k, UnknownLayout, r)
	}
	var sp, b int64
	if probe {
		sp, b = c.o.all.span, c.o.all.bucket // a WindowFunc is for user keys
	} else {
		sp, b, _ = c.span(p)
	}
	args := []any{c.now(), p.Strategy, sp, unknownSpan.Milliseconds(), c.slack, c.o.threshold, step, b01(c.o.dryRun), b}
	res, err := c.run(ctx, node, k, args)
	if err != nil {
		return c.failed(k, err, r)
	}
	switch res[0] {
	case stateGone:
		r.skip(Gone, 1, k)
		return nil
	case stateDeleted:
		r.Deleted++
		r.list(k, res)
		return nil
	case stateLayout:
		return c.unknown(ctx, node, k, UnknownLayout, r)
	}
	if res[4] == 1 {
		r.Live++
	} else {
		r.skip(NoWindow, 1, k)
	}
	if res[1] > 0 {
		r.TTLSet++
	}
	trimmed := res[2]
	// Further steps of a large trim, each paced and under the lease.
	for more := res[3]; more != 0; {
		held, err := c.paced(ctx, r)
		if err != nil {
			return err
		}
		if !held {
			break
		}
		if more == moreBatches {
			n, err := c.batches(ctx, node, k, args, r)
			trimmed += n
			if err != nil {
				return c.failed(k, err, r)
			}
			break
		}
		args[0] = c.now()
		res, err = c.run(ctx, node, k, args)
		if err != nil {
			return c.failed(k, err, r)
		}
		if res[0] != stateLive {
			break
		}
		trimmed += res[2]
		more = res[3]
		if more == moreSteps && res[2] == 0 {
			break // no progress: never loop
		}
	}
	if trimmed > 0 {
		r.Trimmed++
		r.Buckets += trimmed
	}
	return nil
}

// batches trims a large hash whose links are broken: HSCAN hands its field
// names to clean.lua a page at a time, each page paced and under the lease.
func (c *Cleaner) batches(ctx context.Context, node Client, k string, args []any, r *Report) (int64, error) {
	var trimmed int64
	var cursor uint64
	for {
		kv, next, err := node.HScan(ctx, k, cursor, "", step).Result()
		if err != nil {
			return trimmed, err
		}
		a := args
		for i := 0; i < len(kv); i += 2 {
			if f := kv[i]; f != "" && (f[0] >= '0' && f[0] <= '9' || f[0] == '-' || f[0] == 'd') {
				a = append(a, f)
			}
		}
		if len(a) > len(args) {
			a[0] = c.now()
			res, err := c.run(ctx, node, k, a)
			if err != nil {
				return trimmed, err
			}
			if res[0] != stateLive {
				return trimmed, nil
			}
			trimmed += res[2]
		}
		if next == 0 {
			return trimmed, nil
		}
		cursor = next
		if held, err := c.paced(ctx, r); err != nil || !held {
			return trimmed, err
		}
	}
}

func (c *Cleaner) run(ctx context.Context, node Client, k string, args []any) ([]int64, error) {
	res, err := cleanScript.Run(ctx, node, []string{k}, args...).Int64Slice()
	if err == nil && len(res) != 8 {
		err = fmt.Errorf("clean.lua replied %v", res)
	}
	return res, err
}

// failed counts a key whose script Redis refused, and passes any other
// error up to stop the pass.
func (c *Cleaner) failed(k string, err error, r *Report) error {
	var rerr redis.Error
	if errors.As(err, &rerr) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		r.skip(Failed, 1, k)
		return nil
	}
	return fmt.Errorf("%s: %w", k, err)
}

// now is clean.lua's clock argument: WithClock's ms, or "" for Redis TIME.
func (c *Cleaner) now() any {
	if c.o.clock == nil {
		return ""
	}
	return settings.ClampMs(c.o.clock().UnixMilli())
}

// unknown reports a key the cleaner does not read, or deletes it
// (WithDeleteUnknown).
func (c *Cleaner) unknown(ctx context.Context, node Client, k string, why Reason, r *Report) error {
	if c.o.unknown == nil || !c.o.unknown(k) {
		r.skip(why, 1, k)
		return nil
	}
	if !c.o.dryRun {
		if err := node.Unlink(ctx, k).Err(); err != nil {
			return c.failed(k, err, r)
		}
	}
	r.Unlinked++
	return nil
}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}
