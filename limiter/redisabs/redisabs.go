package redisabs

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

// Client is the part of a go-redis client the limiter calls: script
// execution (EVALSHA, EVAL) and UNLINK. *redis.Client, *redis.ClusterClient,
// *redis.Ring and the failover clients satisfy it.
type Client = redisx.Client

// Limiter is the absolute limiter on Redis: a request is admitted while the
// key's sliding window, shared by every process that uses the same Redis
// and prefix, has room for all of it. It is safe for concurrent use. Build
// it with New; the zero value is not usable.
type Limiter struct {
	client Client
	cfg    config.Config
	closed atomic.Bool
}

var _ limiter.Limiter = (*Limiter)(nil)

// New returns an absolute limiter that keeps its state in Redis through
// client. It reads WithWindow, WithBucket, WithPrefix and WithClock (given
// WithClock, the clock's reading replaces Redis TIME: for tests only, since
// key expiry still runs on the Redis server's clock). It starts no
// goroutine and makes no call to Redis. A nil client is ErrInvalidConfig.
func New(client Client, opts ...limiter.Option) (*Limiter, error) {
	if isNil(client) {
		return nil, fmt.Errorf("redisabs: %w: nil client", limiter.ErrInvalidConfig)
	}
	cfg, err := config.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("redisabs: %w", err)
	}
	return &Limiter{client: client, cfg: cfg}, nil
}

// isNil reports a nil client, including a typed nil pointer such as a
// (*redis.Client)(nil), which would otherwise panic on the first call.
func isNil(c Client) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// Reply layout of abs_inc.lua.
const incReplyLen = 8

// check validates what every call shares and builds the key's hash name.
func (l *Limiter) check(op, k string) (string, error) {
	if l.closed.Load() {
		return "", fmt.Errorf("redisabs: %s: %w", op, limiter.ErrClosed)
	}
	h, err := key.Name(l.cfg.Prefix, k, key.Absolute, key.Hash)
	if err != nil {
		return "", fmt.Errorf("redisabs: %s: %w", op, err)
	}
	return h, nil
}

// Inc admits n units of key at rate if they all fit in the window, and
// records them; a refusal records nothing. n = 0 decides for one unit and
// records nothing. It costs one script call. A Redis error is returned
// wrapped, never retried: a call that timed out may or may not have
// counted.
func (l *Limiter) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	h, err := l.check("inc", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	if n < 0 || n > limiter.MaxCost {
		return limiter.Decision{}, fmt.Errorf("redisabs: inc: %w: %d (want 0 ≤ n ≤ %d)", limiter.ErrInvalidCost, n, limiter.MaxCost)
	}
	c, err := limiter.Capacity(rate, l.cfg.Window)
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redisabs: inc: %w", err)
	}
	return l.decide(ctx, "inc", h, c, n)
}

// IsAllowed reports whether one more unit of key would be admitted now at
// the capacity stored by its latest Inc. It writes nothing. A key with no
// live state is allowed, with Limit 0.
func (l *Limiter) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	h, err := l.check("is allowed", k)
	if err != nil {
		return limiter.Decision{}, err
	}
	return l.decide(ctx, "is allowed", h, 0, 0)
}

// decide runs abs_inc.lua; c = 0 asks for the stored capacity.
func (l *Limiter) decide(ctx context.Context, op, h string, c, n int64) (limiter.Decision, error) {
	v, err := scripts.AbsInc.Run(ctx, l.client, []string{h},
		redisx.NowArg(&l.cfg), l.cfg.WindowMs, l.cfg.BucketMs, c, n, redisx.TTLMs(&l.cfg)).Result()
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redisabs: %s: %w", op, err)
	}
	r, err := parseDecision(v)
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redisabs: %s: %w", op, err)
	}
	return r.Decision(), nil
}

var errReply = errors.New("malformed script reply")

func parseDecision(v any) (window.Result, error) {
	x, err := redisx.Int64s(v, incReplyLen)
	if err != nil {
		return window.Result{}, err
	}
	if x[0] != window.OutcomeAllowed && x[0] != window.OutcomeRejected ||
		x[1] != 0 && x[1] != 1 || x[7] != 0 && x[7] != 1 {
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

// Get returns key's usage in the live window: the units admitted and the
// stored capacity, both 0 for a key with no live state. It writes nothing.
func (l *Limiter) Get(ctx context.Context, k string) (limiter.Usage, error) {
	h, err := l.check("get", k)
	if err != nil {
		return limiter.Usage{}, err
	}
	v, err := scripts.AbsGet.Run(ctx, l.client, []string{h}, redisx.NowArg(&l.cfg), l.cfg.WindowMs).Result()
	if err != nil {
		return limiter.Usage{}, fmt.Errorf("redisabs: get: %w", err)
	}
	x, err := redisx.Int64s(v, 2)
	if err != nil {
		return limiter.Usage{}, fmt.Errorf("redisabs: get: %w", err)
	}
	return limiter.Usage{Used: x[0], Limit: x[1]}, nil
}

// Reset forgets key: it UNLINKs the key's hash.
func (l *Limiter) Reset(ctx context.Context, k string) error {
	h, err := l.check("reset", k)
	if err != nil {
		return err
	}
	if err := l.client.Unlink(ctx, h).Err(); err != nil {
		return fmt.Errorf("redisabs: reset: %w", err)
	}
	return nil
}

// Close marks the limiter closed: later calls return ErrClosed. It does
// not close the client, which belongs to the caller, and has nothing to
// wait for. Closing twice is harmless.
func (l *Limiter) Close(context.Context) error {
	l.closed.Store(true)
	return nil
}
