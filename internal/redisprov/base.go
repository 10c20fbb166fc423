package redisprov

import (
	"context"
	"errors"
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

// Init checks the client, resolves opts and fills b. A nil client
// (including a typed nil such as (*redis.Client)(nil), which would panic on
// the first call) or a bad option is ErrInvalidConfig.
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

// Run runs a script of the provider over keys with args and returns its
// reply: batched with concurrent calls to the same node (see Batcher),
// unless batching is off or the client is one that is not batched.
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

// Errorf wraps err as "<pkg>: <op>: err" (a script's record errors as
// StateErr reads them).
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

// Valid is Check without the hash name, which it does not allocate: it
// rejects calls after Close and invalid keys, with Check's errors.
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

// SetGate makes the calls that wait for a batch slot watch the circuit
// breaker (Batcher.SetGate).
func (b *Base) SetGate(opened func() <-chan struct{}) { b.batch.SetGate(opened) }

// Wait waits, after Close, for the batching goroutines to end (they end
// once the calls made before Close are answered), or until ctx is done.
func (b *Base) Wait(ctx context.Context) error { return b.batch.Wait(ctx) }

var errReply = errors.New("malformed script reply")

// refusal reads the one-integer form of a decision with nothing remaining
// and not never, v = −r − 1 for the reply r < 0, limit c. For the
// suppressed strategy (outcomes holds window.OutcomeSuppressed;
// sup_inc.lua) it is a suppressed decision: reset ms v mod 2^16, retry
// ms ⌊v / 2^16⌋ mod 2^16, allowed ⌊v / 2^32⌋ mod 2, factor ppm ⌊v / 2^33⌋
// (SupFieldBits, SupAllowedBit, SupFactorShift). For the absolute strategy
// (abs_inc.lua) it is a refusal: reset ms v mod 2^26, retry ms ⌊v / 2^26⌋,
// factor 0 (AbsRetryShift).
func refusal(v, c int64, outcomes []int64) (window.Result, error) {
	r := window.Result{Limit: c}
	if slices.Contains(outcomes, window.OutcomeSuppressed) {
		r.Outcome = window.OutcomeSuppressed
		r.ResetAfter, r.RetryAfter = v&mask(SupFieldBits), v>>SupFieldBits&mask(SupFieldBits)
		r.Allowed, r.FactorPPM = v>>SupAllowedBit&1 == 1, v>>SupFactorShift
		if r.FactorPPM > window.PPM {
			return window.Result{}, fmt.Errorf("%w: %d for capacity %d", errReply, -v-1, c)
		}
		return r, nil
	}
	if !slices.Contains(outcomes, window.OutcomeRejected) || v>>(2*AbsRetryShift) != 0 {
		return window.Result{}, fmt.Errorf("%w: %d for capacity %d", errReply, -v-1, c)
	}
	r.Outcome = window.OutcomeRejected
	r.ResetAfter, r.RetryAfter = v&mask(AbsRetryShift), v>>AbsRetryShift
	return r, nil
}

// Decision reads a decision script's reply; c is the capacity the call
// sent (0 for IsAllowed). An admission below capacity (outcome allowed,
// nothing to retry, factor 0, not never) comes as one integer r ≥ 0 when
// the call sent its capacity and fewer than 2^21 units remain: remaining
// r >> 32, reset ms r & (2^32 − 1), limit c (ShortShift, ShortMaxRemaining); otherwise as {limit,
// remaining, reset ms}. The usual decision of a saturated or overloaded
// key (nothing remaining, not never, the call sent its capacity) comes as
// one integer r < 0, read by refusal. Every other decision comes as
// {outcome, allowed, limit, remaining, retry ms, reset ms, factor ppm,
// never}, checked for an outcome the strategy can return and flags that
// are 0 or 1. The short forms save the server the reply table (about
// 8,000 of a call's 60,000 to 100,000 instructions) and the client its
// parsing on the most common answers.
func Decision(v any, c int64, outcomes ...int64) (window.Result, error) {
	if r, ok := v.(int64); ok {
		if c <= 0 || r < -1<<53 {
			return window.Result{}, fmt.Errorf("%w: %d for capacity %d", errReply, r, c)
		}
		if r < 0 {
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
		n, ok := e.(int64)
		if !ok {
			return window.Result{}, fmt.Errorf("%w: value %d is %T", errReply, i, e)
		}
		x[i] = n
	}
	if len(arr) == 3 {
		return window.Result{Outcome: window.OutcomeAllowed, Allowed: true, Limit: x[0], Remaining: x[1], ResetAfter: x[2]}, nil
	}
	known := false
	for _, o := range outcomes {
		known = known || x[0] == o
	}
	if !known || x[1] != 0 && x[1] != 1 || x[6] < 0 || x[6] > window.PPM || x[7] != 0 && x[7] != 1 {
		return window.Result{}, fmt.Errorf("%w: %v", errReply, x)
	}
	return window.Result{
		Outcome:    int(x[0]),
		Allowed:    x[1] == 1,
		Limit:      x[2],
		Remaining:  x[3],
		RetryAfter: x[4],
		ResetAfter: x[5],
		FactorPPM:  x[6],
		Never:      x[7] == 1,
	}, nil
}
