package redisabs

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/limiter"
)

// Client is the part of a go-redis client the limiter calls: script
// execution and UNLINK. go-redis v9's clients (single, cluster, ring,
// failover) satisfy it, and so does module sluicerueidis' adapter. A client
// with ScriptPipelined(ctx, fn func(pipe redis.Scripter)) error, sending
// fn's script calls in one round trip, batches the fallback's write-back.
type Client interface {
	redis.Scripter
	Unlink(ctx context.Context, keys ...string) *redis.IntCmd
}

// Limiter is the absolute limiter on Redis: a request is admitted while the
// key's window, shared by every process on the same Redis and prefix, has
// room for all of it. It is safe for concurrent use; build it with New
// (the zero value is not usable). The caller owns and closes the client.
type Limiter struct {
	p  redisprov.Provider
	g  *redisprov.Guard  // p's Guard, called directly by Inc and IsAllowed
	be redisprov.Backend // p as the Guard's Backend
}

// New returns an absolute limiter on client. It reads WithWindow,
// WithBucket, WithPrefix, WithClock (for tests: it replaces Redis TIME),
// WithTimeout, WithFailurePolicy, WithFallbackInstances, WithProbeInterval,
// WithObserver, WithBatching and WithHotKeyRelief; any other option, or a
// nil client, is ErrInvalidConfig. It starts no goroutine and makes no call
// to Redis.
func New(client Client, opts ...limiter.Option) (*Limiter, error) {
	l := &Limiter{}
	if err := l.p.Init(redisprov.Absolute, client, opts); err != nil {
		return nil, err
	}
	l.g, l.be = l.p.Decider()
	return l, nil
}

// Window returns the window the limiter was built with (WithWindow).
func (l *Limiter) Window() time.Duration { return l.p.Window() }

// Inc admits n units of key at rate if they all fit, and records them, in
// one script call bounded by WithTimeout; n = 0 decides for one unit and
// records nothing. A call is never retried: one that timed out may or may
// not have counted. While Redis is unavailable the failure policy answers
// (Degraded) until the background probe finds Redis back.
func (l *Limiter) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	return l.g.Decide(ctx, l.be, "inc", k, rate, n, false)
}

// IsAllowed reports whether one more unit of key would be admitted now at
// the capacity its latest Inc stored, writing nothing; a key with no live
// state is allowed, with Limit 0. Failures are handled as for Inc.
func (l *Limiter) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	return l.g.Decide(ctx, l.be, "is allowed", k, limiter.Rate{}, 0, true)
}

// Get returns key's usage in the live window, writing nothing. An
// unavailable Redis is an error under every policy: Redis's own, or
// ErrUnavailable while the breaker is open.
func (l *Limiter) Get(ctx context.Context, k string) (limiter.Usage, error) { return l.p.Get(ctx, k) }

// Reset forgets key: it UNLINKs its hash and drops what the fallback and
// hot-key relief hold for it. Failures are errors, as for Get.
func (l *Limiter) Reset(ctx context.Context, k string) error { return l.p.Reset(ctx, k) }

// IncSet admits n units of key if every limit of set has room, and records
// them in every limit, in one script call (docs/data-model.md); n = 0
// records nothing. Failures are handled as for Inc: the fallback decides
// sets too, and its admissions are written back when Redis returns.
func (l *Limiter) IncSet(ctx context.Context, k string, set *limiter.Set, n int64) (limiter.SetDecision, error) {
	return l.p.IncSet(ctx, k, set, n)
}

// GetSet returns key's usage in each limit of set, in the set's order;
// failures are errors, as for Get.
func (l *Limiter) GetSet(ctx context.Context, k string, set *limiter.Set) ([]limiter.Usage, error) {
	return l.p.GetSet(ctx, k, set)
}

// ResetSet forgets key's state in every limit of set (one UNLINK), and
// what the fallback holds for them; other limits and the single-limit
// hash stay.
func (l *Limiter) ResetSet(ctx context.Context, k string, set *limiter.Set) error {
	return l.p.ResetSet(ctx, k, set)
}

// Close marks the limiter closed (later calls return ErrClosed) and waits
// for its background work and batched calls until ctx is done. It does not
// close the client; closing twice is harmless.
func (l *Limiter) Close(ctx context.Context) error { return l.p.Close(ctx) }

// Ping checks at start-up that Redis answers this limiter, with one script
// call on a key of its own, whatever the breaker's state.
func (l *Limiter) Ping(ctx context.Context) error { return l.p.Ping(ctx) }
