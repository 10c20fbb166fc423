package redisprov

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// Base is what every Redis provider holds: the client, the resolved
// configuration, the closed flag, and the package and strategy names that
// prefix errors and Redis keys. Use it by pointer; it must not be copied.
type Base struct {
	Client Client
	Cfg    window.Config
	// W, B, TTL and Cache are Cfg.WindowMs, Cfg.BucketMs, TTLMs(&Cfg) and
	// Cfg.CacheMs boxed once for the arguments of every script call.
	W, B, TTL, Cache any
	batch            *Batcher // nil: every call alone
	pkg              string   // "redisabs", "redissup", "hybrid": the prefix of every error
	strat            string   // key.Absolute or key.Suppressed
	sup              bool     // strat is key.Suppressed
	closed           atomic.Bool
}

// Init checks the client, resolves opts and fills b. A nil client (a
// typed nil such as (*redis.Client)(nil) included) or a bad option is
// ErrInvalidConfig.
func (b *Base) Init(pkg, strategy string, client Client, opts []limiter.Option) error {
	if isNil(client) {
		return fmt.Errorf("%s: %w: nil client", pkg, limiter.ErrInvalidConfig)
	}
	name := window.StrategyAbsolute
	if strategy == key.Suppressed {
		name = window.StrategySuppressed
	}
	cfg, err := window.ConfigFor(pkg, name, opts...)
	if err != nil {
		return fmt.Errorf("%s: %w", pkg, err)
	}
	b.Client, b.Cfg, b.pkg, b.strat, b.sup = client, cfg, pkg, strategy, strategy == key.Suppressed
	b.W, b.B, b.TTL, b.Cache = cfg.WindowMs, cfg.BucketMs, TTLMs(&cfg), cfg.CacheMs
	b.batch = NewBatcher(client, cfg.Batch)
	return nil
}

// Run runs a script over keys with args and returns its reply, batched
// with concurrent calls to the same node when b batches (Batcher).
func (b *Base) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) (any, error) {
	if b.batch == nil {
		return run(ctx, script, b.Client, keys, args)
	}
	return b.batch.Run(ctx, script, keys, args...)
}

func isNil(c Client) bool {
	if c == nil {
		return true
	}
	switch v := reflect.ValueOf(c); v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// Errorf wraps err, read by StateErr, as "<pkg>: <op>: err".
func (b *Base) Errorf(op string, err error) error {
	return fmt.Errorf("%s: %s: %w", b.pkg, op, StateErr(err))
}

// Check rejects calls after Close and returns the key's hash name, which
// validates the key.
func (b *Base) Check(op, k string) (string, error) {
	if b.closed.Load() {
		return "", b.Errorf(op, limiter.ErrClosed)
	}
	h, err := key.Name(b.Cfg.Prefix, k, b.strat, key.Hash)
	if err != nil {
		return "", b.Errorf(op, err)
	}
	return h, nil
}

// Reset UNLINKs the key's hash.
func (b *Base) Reset(ctx context.Context, k string) error {
	h, err := b.Check("reset", k)
	if err != nil {
		return err
	}
	if err := b.Client.Unlink(ctx, h).Err(); err != nil {
		return b.Errorf("reset", err)
	}
	return nil
}

// Valid is Check without the hash name, which it does not allocate.
func (b *Base) Valid(op, k string) error {
	if b.closed.Load() {
		return b.Errorf(op, limiter.ErrClosed)
	}
	if err := key.Validate(k); err != nil {
		return b.Errorf(op, err)
	}
	return nil
}

// Close makes later calls return ErrClosed. The client belongs to the
// caller and stays open.
func (b *Base) Close() { b.closed.Store(true) }

// SetGate makes batched calls watch the breaker (Batcher.SetGate).
func (b *Base) SetGate(opened func() <-chan struct{}) { b.batch.SetGate(opened) }

// Wait waits, after Close, for the batching goroutines to end, or until
// ctx is done.
func (b *Base) Wait(ctx context.Context) error { return b.batch.Wait(ctx) }

// Decision reads a decision script's reply for capacity c, the one the
// call sent (0 for IsAllowed: the stored one), and the outcomes the
// strategy can return. The reply is one of (layout.go):
//   - r ≥ 0, an admission below capacity with fewer than ShortMaxRemaining
//     units remaining: remaining r >> ShortShift, reset ms the low bits;
//   - r < 0, a decision with nothing remaining, not never (refusal);
//   - {limit, remaining, reset ms}, an admission;
//   - {outcome, allowed, limit, remaining, retry ms, reset ms, factor ppm,
//     never}, checked for a known outcome and flags of 0 or 1.
//
// The one-integer forms come only when the call sent its capacity.
func Decision(v any, c int64, outcomes ...int64) (window.Result, error) {
	if r, ok := v.(int64); ok {
		switch {
		case c <= 0 || r < -1<<53:
			return window.Result{}, fmt.Errorf("%w: %d for capacity %d", errReply, r, c)
		case r < 0:
			return refusal(-r-1, c, outcomes)
		}
		return window.Result{Outcome: window.OutcomeAllowed, Allowed: true, Limit: c, Remaining: r >> ShortShift, ResetAfter: r & mask(ShortShift)}, nil
	}
	arr, ok := v.([]any)
	if !ok {
		return window.Result{}, fmt.Errorf("%w: %T", errReply, v)
	}
	var x [8]int64
	if len(arr) != 3 && len(arr) != len(x) {
		return window.Result{}, fmt.Errorf("%w: %d values", errReply, len(arr))
	}
	for i, e := range arr {
		if x[i], ok = e.(int64); !ok {
			return window.Result{}, fmt.Errorf("%w: value %d is %T", errReply, i, e)
		}
	}
	if len(arr) == 3 {
		return window.Result{Outcome: window.OutcomeAllowed, Allowed: true, Limit: x[0], Remaining: x[1], ResetAfter: x[2]}, nil
	}
	if !slices.Contains(outcomes, x[0]) || x[1] != 0 && x[1] != 1 || x[6] < 0 || x[6] > window.PPM || x[7] != 0 && x[7] != 1 {
		return window.Result{}, fmt.Errorf("%w: %v", errReply, x)
	}
	return window.Result{Outcome: int(x[0]), Allowed: x[1] == 1, Limit: x[2], Remaining: x[3],
		RetryAfter: x[4], ResetAfter: x[5], FactorPPM: x[6], Never: x[7] == 1}, nil
}

// refusal reads v = −r − 1 of a one-integer reply r < 0 for capacity c: a
// suppressed decision when outcomes holds OutcomeSuppressed (SupFieldBits),
// else an absolute refusal (AbsRetryShift).
func refusal(v, c int64, outcomes []int64) (window.Result, error) {
	r := window.Result{Limit: c}
	switch {
	case slices.Contains(outcomes, window.OutcomeSuppressed):
		r.Outcome = window.OutcomeSuppressed
		r.ResetAfter, r.RetryAfter = v&mask(SupFieldBits), v>>SupFieldBits&mask(SupFieldBits)
		r.Allowed, r.FactorPPM = v>>SupAllowedBit&1 == 1, v>>SupFactorShift
		if r.FactorPPM <= window.PPM {
			return r, nil
		}
	case slices.Contains(outcomes, window.OutcomeRejected) && v>>(2*AbsRetryShift) == 0:
		r.Outcome = window.OutcomeRejected
		r.ResetAfter, r.RetryAfter = v&mask(AbsRetryShift), v>>AbsRetryShift
		return r, nil
	}
	return window.Result{}, fmt.Errorf("%w: %d for capacity %d", errReply, -v-1, c)
}
