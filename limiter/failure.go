package limiter

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluice-go/sluice/internal/config"
)

// ErrUnavailable is returned, wrapped with the operation and the error
// that opened the circuit breaker, by a call that a Redis provider answered
// without asking Redis because Redis was found unavailable: under the
// FailError policy for every call, and under every policy for Get and Reset,
// which have no Decision to mark as degraded.
var ErrUnavailable = errors.New("sluice: redis unavailable")

// FailurePolicy says what a Redis provider answers to Inc and IsAllowed
// while Redis is unavailable (see WithFailurePolicy). The zero value is
// FallbackLocal.
type FailurePolicy int

const (
	// FallbackLocal decides with an in-process limiter of the same
	// strategy, window, bucket and rates (package local), exact within the
	// instance. Units it admits are written to Redis when Redis answers
	// again. The default.
	FallbackLocal FailurePolicy = iota
	// FailOpen admits every request (Allowed, Degraded). A request that can
	// never fit (n > C) is still refused with Never set.
	FailOpen
	// FailClosed refuses every request (Rejected for absolute, Suppressed
	// with factor 1 for suppressed; Degraded), with RetryAfter set to the
	// probe interval as a hint.
	FailClosed
	// FailError returns the error, as the providers did before failure
	// policies existed: the call that found Redis unavailable returns
	// Redis's error unchanged (wrapped with the package and operation), and
	// calls made while the breaker is open return ErrUnavailable wrapping
	// that error, without waiting for a timeout of their own.
	FailError
)

// String returns the policy's name as written in Go ("FallbackLocal", …),
// or "FailurePolicy(n)" for a value that is none of them.
func (p FailurePolicy) String() string { return config.FailurePolicy(p).String() }

// StateChange reports a Redis provider entering or leaving degraded mode,
// to the hook of WithStateChange and to an Observer (Event.State).
// Whatever the policy, a provider enters degraded mode when a call finds
// Redis unavailable (the circuit breaker opens) and leaves it when a
// background probe gets an answer (the breaker closes, after
// reconciliation under FallbackLocal), or when it is closed while degraded
// (Cause ErrClosed, nothing reconciled).
type StateChange struct {
	Provider string // "redisabs", "redissup"
	Degraded bool   // true: entering degraded mode; false: leaving it
	// Cause, entering: the error that opened the breaker; leaving: nil, or
	// ErrClosed when Close ended the outage.
	Cause  error
	Policy FailurePolicy
	// Duration, leaving: how long the provider was degraded.
	Duration time.Duration
	// Reconciled, leaving: keys whose fallback units were written to Redis.
	Reconciled int
	// Unreconciled, leaving: keys whose units could not be written (see
	// docs/operations.md, Reconciliation).
	Unreconciled int
}

// stateChange and internalStateChange convert between StateChange and the
// configuration's copy of it, which the providers fill.
func stateChange(sc config.StateChange) StateChange {
	return StateChange{Provider: sc.Provider, Degraded: sc.Degraded, Cause: sc.Cause, Policy: FailurePolicy(sc.Policy),
		Duration: sc.Duration, Reconciled: sc.Reconciled, Unreconciled: sc.Unreconciled}
}

func internalStateChange(sc StateChange) config.StateChange {
	return config.StateChange{Provider: sc.Provider, Degraded: sc.Degraded, Cause: sc.Cause, Policy: config.FailurePolicy(sc.Policy),
		Duration: sc.Duration, Reconciled: sc.Reconciled, Unreconciled: sc.Unreconciled}
}

// WithTimeout bounds every Redis call of a Redis provider by d on top of
// the caller's context: a call finds Redis unavailable after d at most.
// Default 250 ms; 0 means the caller's context alone. Calls whose context
// can never be cancelled (context.Background(), context.WithoutCancel)
// share one deadline among the calls that start within d/16 of each other,
// so each is bounded by between 15/16 of d and d; that saves a timer and
// five allocations per call on the healthy path. The bound holds on any
// client: when the client does not honour context deadlines on its
// sockets (Options.ContextTimeoutEnabled false, go-redis's default), the
// call runs on a goroutine of its own and returns at the deadline while
// its command completes in the background (at most the client's pool size
// of them at once). A call that runs out of d while Redis is not known to
// be down is shed (Decision.Shed), not degraded: a timeout alone never
// opens the circuit breaker (docs/operations.md, What counts as an
// outage).
func WithTimeout(d time.Duration) Option {
	return func(c *config.Config) {
		if d < 0 {
			c.Fail(fmt.Errorf("%w: timeout %v must not be negative", ErrInvalidConfig, d))
			return
		}
		c.Timeout = d
	}
}

// WithFailurePolicy sets what a Redis provider answers while Redis is
// unavailable: FallbackLocal (the default), FailOpen, FailClosed or
// FailError. Under the first three, Inc and IsAllowed return a Decision with
// Degraded set and a nil error; the cause goes to the state-change hook and
// the logger, not to the caller. The breaker opens on wire evidence
// only: connection refused, reset or closed, and Redis replies LOADING,
// BUSY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, READONLY and OOM at once; a
// timeout (WithTimeout's, the client's, the pool's) only when a probe of
// its own, with its own deadline, fails too and no other call got a reply
// meanwhile. Until then a call that timed out is shed: refused with
// Decision.Shed set under every policy, ErrShed under FailError. Bad
// input, ErrClosed and the caller's own context being cancelled or past
// its deadline are returned as errors under every policy and never open
// the breaker. NOSCRIPT is not a failure: the script is sent again.
func WithFailurePolicy(p FailurePolicy) Option {
	return func(c *config.Config) { c.Policy = config.FailurePolicy(p) }
}

// WithFallbackInstances scales the FallbackLocal limiter for a fleet of n
// instances sharing one Redis: while Redis is unavailable each instance
// admits rate/n (at least one unit per window), so the fleet as a whole
// stays near the rate. Default 1: each instance admits the full rate, so a
// fleet of n may admit n × C per window during an outage, but one instance
// that takes all the traffic of a key is never starved. n must be at least
// 1. Other policies ignore it.
func WithFallbackInstances(n int) Option {
	return func(c *config.Config) { c.FallbackInstances = n }
}

// WithProbeInterval sets how often the background probe asks Redis while
// the breaker is open. Default 200 ms; between 1 ms and 1 minute. At most
// one probe is in flight; each is bounded by WithTimeout.
func WithProbeInterval(d time.Duration) Option {
	return func(c *config.Config) { c.ProbeInterval = d }
}

// WithStateChange registers fn, called once when a Redis provider enters
// degraded mode and once when it leaves it. fn runs on the provider's
// probe goroutine, never on a caller's: it may log or export a metric, but
// while it runs the probe waits, and Close waits for it. Default: none.
func WithStateChange(fn func(StateChange)) Option {
	return func(c *config.Config) {
		if fn == nil {
			c.OnStateChange = nil
			return
		}
		c.OnStateChange = func(sc config.StateChange) { fn(stateChange(sc)) }
	}
}

// WithLogger sets a logger for the same transitions as WithStateChange
// (Warn on entering degraded mode, Info on leaving it) and for
// configuration warnings. Default: nil, no logging.
func WithLogger(l *slog.Logger) Option {
	return func(c *config.Config) { c.Logger = l }
}

// WithBatching sets the largest number of concurrent script calls of a
// Redis provider to one Redis node that are sent together, as one pipeline.
// Default 128; 0 or 1: every call alone, as one round trip. n must be
// between 0 and 1,024; New returns ErrInvalidConfig beyond.
//
// A provider counts its calls in progress per node. Up to 8, every call is
// sent at once, alone, exactly as without batching: a few callers keep a
// round trip each in flight and wait for nothing. Above 8, it keeps at most
// two round trips of its scripts in flight per node: a call that finds
// fewer is sent at once, alone; calls that arrive while two are in flight
// wait for one of them to end and are then sent together, up to n per
// pipeline. So the batch size follows the load, and under many concurrent
// callers one round trip carries many decisions.
//
// Batching is on by default because with this rule it won or tied
// everywhere measured. With the contenders interleaved round by round on
// one redis-server, batched over unbatched decisions per second were 1.57
// to 2.20 at 64 and 256 concurrent callers, both strategies, one hot key
// and 10,000 keys, and 0.97 to 1.03 at 1 and 8 callers, where every call
// goes alone (a lone caller's latency 1.00 to 1.01 of unbatched). Sending
// every call alone up to 8 callers is what makes it never lose: two round
// trips for eight callers had cost them 17 to 19 % on a quiet machine.
// Keep it off, or the cap low, where the Redis server is shared with
// latency-sensitive traffic: a pipeline of n worst-case calls holds the
// server for their sum (docs/operations.md, Batching; docs/benchmarks.md,
// A rule that never loses).
//
// Each caller keeps its context and WithTimeout: one whose context ends
// while it waits returns the context's error at once and its call is not
// sent (or, if already sent, goes on without it); a waiting caller honours
// its deadline even on a client without ContextTimeoutEnabled. Batching
// applies to *redis.Client and *redis.ClusterClient (per master; a call
// whose slot moved is sent again alone through the cluster client); calls
// through other clients always go alone. See docs/operations.md, Batching.
func WithBatching(n int) Option {
	return func(c *config.Config) { c.Batch = n }
}
