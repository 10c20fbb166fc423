package redissup

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"

	"github.com/sluice-go/sluice/internal/config"
	"github.com/sluice-go/sluice/internal/redisx"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

// Client is what the limiter calls: script evaluation and UNLINK.
// *redis.Client, *redis.ClusterClient, *redis.Ring and the failover clients
// of go-redis v9 satisfy it.
type Client = redisx.Client

// Limiter is the suppressed strategy on Redis. It is safe for concurrent
// use; build it with New (the zero value is not usable). It holds no
// connection of its own and starts no goroutine: Close only makes later
// calls fail with ErrClosed, and the caller still owns and closes the
// client.
type Limiter struct {
	client Client
	cfg    config.Config
	closed atomic.Bool
}

var _ limiter.Limiter = (*Limiter)(nil)

// New returns a suppressed limiter that keeps its state in Redis through
// client. It reads every option: WithWindow, WithBucket,
// WithHardLimitFactor, WithSuppressionCache, WithRandom and WithPrefix shape
// the decisions; WithClock replaces Redis TIME by the given clock, which is
// meant for tests and simulations (every instance of a fleet must share one
// clock, and Redis TIME is that clock). A nil client or a bad option is
// ErrInvalidConfig. New starts no goroutine and makes no call to Redis.
func New(client Client, opts ...limiter.Option) (*Limiter, error) {
	if isNil(client) {
		return nil, fmt.Errorf("redissup: %w: nil client", limiter.ErrInvalidConfig)
	}
	cfg, err := config.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("redissup: %w", err)
	}
	return &Limiter{client: client, cfg: cfg}, nil
}

// isNil reports a nil client, also a typed nil such as (*redis.Client)(nil),
// which would otherwise panic on the first call.
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

// Lengths of the scripts' replies.
const (
	decisionLen = 8 // sup_inc.lua and sup_allowed.lua
	usageLen    = 3 // sup_get.lua
)

// check rejects calls after Close and builds the key's hash name, which
// validates the key.
func (l *Limiter) check(op, k string) (string, error) {
	if l.closed.Load() {
		return "", fmt.Errorf("redissup: %s: %w", op, limiter.ErrClosed)
	}
	h, err := key.Name(l.cfg.Prefix, k, key.Suppressed, key.Hash)
	if err != nil {
		return "", fmt.Errorf("redissup: %s: %w", op, err)
	}
	return h, nil
}

// Inc offers n units of key at rate, in one script call. At or below the
// soft capacity S = C the request is Allowed; beyond the hard capacity H it
// is refused with factor 1; in between it is admitted with probability
// 1 − f. n = 0 is a peek for one unit that records nothing. Every call with
// valid arguments draws exactly one number from the random source (peeks
// too), before Redis is asked, so a failed call still consumes its draw.
func (l *Limiter) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	h, err := l.check("inc", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	if n < 0 || n > limiter.MaxCost {
		return limiter.Decision{}, fmt.Errorf("redissup: inc: %w: %d (want 0 ≤ n ≤ %d)", limiter.ErrInvalidCost, n, limiter.MaxCost)
	}
	soft, err := limiter.Capacity(rate, l.cfg.Window)
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redissup: inc: %w", err)
	}
	hard, err := limiter.HardCapacity(rate, l.cfg.Window, l.cfg.HardLimitFactor)
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redissup: inc: %w", err)
	}
	draw := window.DrawPPM(l.cfg.Rand())
	v, err := scripts.SupInc.Run(ctx, l.client, []string{h},
		redisx.NowArg(&l.cfg), l.cfg.WindowMs, l.cfg.BucketMs, soft, hard, n, l.cfg.CacheMs, draw, redisx.TTLMs(&l.cfg)).Result()
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redissup: inc: %w", err)
	}
	r, err := parseDecision(v)
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redissup: inc: %w", err)
	}
	return r.Decision(), nil
}

// IsAllowed reports whether one more unit of key would be admitted without
// suppression now, at the capacities stored by the key's latest Inc. Above
// the soft capacity it reports the factor an Inc would apply. It writes
// nothing and draws nothing. A key with no live state is allowed with
// Limit 0.
func (l *Limiter) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	h, err := l.check("is allowed", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	v, err := scripts.SupAllowed.Run(ctx, l.client, []string{h},
		redisx.NowArg(&l.cfg), l.cfg.WindowMs, l.cfg.CacheMs).Result()
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redissup: is allowed: %w", err)
	}
	r, err := parseDecision(v)
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redissup: is allowed: %w", err)
	}
	return r.Decision(), nil
}

var errReply = errors.New("malformed script reply")

func parseDecision(v any) (window.Result, error) {
	x, err := redisx.Int64s(v, decisionLen)
	if err != nil {
		return window.Result{}, err
	}
	if x[0] != window.OutcomeAllowed && x[0] != window.OutcomeSuppressed ||
		x[1] != 0 && x[1] != 1 || x[6] < 0 || x[6] > window.PPM || x[7] != 0 && x[7] != 1 {
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

// Get returns key's accepted (Used) and declined units in the live window
// and its stored soft capacity. It writes nothing.
func (l *Limiter) Get(ctx context.Context, k string) (limiter.Usage, error) {
	h, err := l.check("get", k)
	if err != nil {
		return limiter.Usage{}, err
	}
	v, err := scripts.SupGet.Run(ctx, l.client, []string{h}, redisx.NowArg(&l.cfg), l.cfg.WindowMs).Result()
	if err != nil {
		return limiter.Usage{}, fmt.Errorf("redissup: get: %w", err)
	}
	x, err := redisx.Int64s(v, usageLen)
	if err != nil {
		return limiter.Usage{}, fmt.Errorf("redissup: get: %w", err)
	}
	return limiter.Usage{Used: x[0], Declined: x[1], Limit: x[2]}, nil
}

// Reset forgets key: it UNLINKs the key's hash.
func (l *Limiter) Reset(ctx context.Context, k string) error {
	h, err := l.check("reset", k)
	if err != nil {
		return err
	}
	if err := l.client.Unlink(ctx, h).Err(); err != nil {
		return fmt.Errorf("redissup: reset: %w", err)
	}
	return nil
}

// Close makes later calls return ErrClosed. It does not close the client.
// Closing twice is harmless; ctx is not consulted.
func (l *Limiter) Close(context.Context) error {
	l.closed.Store(true)
	return nil
}
