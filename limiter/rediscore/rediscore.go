package rediscore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/failover"
	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/internal/redisx"
	"github.com/sluice-go/sluice/limiter"
)

// Client is the part of a go-redis client the limiter calls: script
// execution (EVALSHA, EVAL, SCRIPT LOAD, SCRIPT EXISTS) and UNLINK.
// *redis.Client, *redis.ClusterClient, *redis.Ring and the failover clients
// of go-redis v9 satisfy it, and so does the rueidis adapter of module
// sluicerueidis. A client that is not go-redis' may also have
// ScriptPipelined(ctx, fn func(pipe redis.Scripter)) error, which queues
// the script calls fn makes on pipe and sends them in one round trip: the
// failure policy's write-back (and the hybrid provider's sync) then batch
// their calls, as they do with a go-redis client's Pipeline.
type Client interface {
	redis.Scripter
	Unlink(ctx context.Context, keys ...string) *redis.IntCmd
}

// Every Client is one for the shared provider code.
var _ redisx.Client = Client(nil)

// Limiter is a limiter on Redis: every process that uses the same Redis
// and key prefix shares each key's sliding window. Its strategy is the
// one it was built with: absolute (redisabs.New) or suppressed
// (redissup.New). It is safe for concurrent use; the zero value is not
// usable. It holds no connection of its own: the caller owns and closes
// the client.
type Limiter struct {
	p redisprov.Provider
	// g and be are p's Guard and p as its Backend (Provider.Decider), so
	// that Inc and IsAllowed call the Guard directly.
	g  *failover.Guard
	be failover.Backend
}

var (
	_ limiter.Limiter                     = (*Limiter)(nil)
	_ limiter.SetLimiter                  = (*Limiter)(nil)
	_ interface{ Window() time.Duration } = (*Limiter)(nil)
)

// NewAbsolute returns an absolute limiter on Redis: redisabs.New, which
// says which options it reads.
func NewAbsolute(client Client, opts ...limiter.Option) (*Limiter, error) {
	return newLimiter(redisprov.Absolute, client, opts)
}

// NewSuppressed returns a suppressed limiter on Redis: redissup.New, which
// says which options it reads.
func NewSuppressed(client Client, opts ...limiter.Option) (*Limiter, error) {
	return newLimiter(redisprov.Suppressed, client, opts)
}

func newLimiter(s redisprov.Strategy, client Client, opts []limiter.Option) (*Limiter, error) {
	l := &Limiter{}
	if err := l.p.Init(s, client, opts); err != nil {
		return nil, err
	}
	l.g, l.be = l.p.Decider()
	return l, nil
}

// Window returns the window the limiter was built with (WithWindow).
func (l *Limiter) Window() time.Duration { return l.p.Window() }

// Inc offers n units of key at rate, in one script call bounded by
// WithTimeout; n = 0 decides for one unit and records nothing.
//
// Absolute: the units are admitted if they all fit in the window, and
// recorded; a refusal records nothing.
//
// Suppressed: at or below the soft capacity S = C the request is Allowed;
// beyond the hard capacity H it is refused with factor 1; in between it is
// admitted with probability 1 − f. Refused units are recorded as declined:
// they drive f. Every call with valid arguments that asks Redis or the
// local fallback draws exactly one number from the random source (peeks
// too), before Redis is asked, so a failed call still consumes its draw.
//
// A call is never retried: one that timed out may or may not have counted.
// When Redis is unavailable (see limiter.WithFailurePolicy) the failure
// policy answers, with Degraded set, and later calls do not ask Redis until
// the background probe finds it back.
func (l *Limiter) Inc(ctx context.Context, k string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	return l.g.Decide(ctx, l.be, "inc", k, rate, n, false)
}

// IsAllowed reports whether one more unit of key would be admitted now (by
// the suppressed strategy: without suppression), at the capacities stored
// by the key's latest Inc; above the soft capacity the suppressed strategy
// reports the factor an Inc would apply. It writes nothing and draws
// nothing. A key with no live state is allowed, with Limit 0. Redis
// failures are handled as for Inc.
func (l *Limiter) IsAllowed(ctx context.Context, k string) (limiter.Decision, error) {
	return l.g.Decide(ctx, l.be, "is allowed", k, limiter.Rate{}, 0, true)
}

// Get returns key's usage in the live window: the units admitted (Used),
// under the suppressed strategy the units declined (Declined), and the
// stored (soft) capacity, all 0 for a key with no live state. It writes
// nothing. It has no Decision to mark as degraded, so under every policy
// an unavailable Redis is an error: Redis's own, or ErrUnavailable while
// the breaker is open.
func (l *Limiter) Get(ctx context.Context, k string) (limiter.Usage, error) {
	return l.p.Get(ctx, k)
}

// Reset forgets key: it UNLINKs the key's hash, and drops what the local
// fallback and hot-key relief hold for it. Redis failures are errors, as
// for Get.
func (l *Limiter) Reset(ctx context.Context, k string) error {
	return l.p.Reset(ctx, k)
}

// Close marks the limiter closed: later calls return ErrClosed. It stops
// the background probe, if Redis is down, and the local fallback, and
// waits for them and for the batching goroutines (which end once the calls
// made before Close are answered) until ctx is done (then it returns ctx's
// error). It does not close the client, which belongs to the caller.
// Closing twice is harmless.
func (l *Limiter) Close(ctx context.Context) error {
	return l.p.Close(ctx)
}

// Ping checks that Redis answers this limiter: one script call that
// writes a unit to a key of the limiter's own (never a caller's key),
// bounded by WithTimeout on top of ctx, whatever the state of the circuit
// breaker. Call it at start-up: a wrong address, a refused password or a
// Redis that refuses writes is an error naming the address, where Inc
// would answer from the local fallback (FallbackLocal, the default) and
// say so only in Decision.Degraded and the log.
func (l *Limiter) Ping(ctx context.Context) error {
	return l.p.Ping(ctx)
}
