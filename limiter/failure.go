package limiter

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluice-go/sluice/internal/settings"
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
	// FailClosed refuses every request (Degraded; for the suppressed
	// strategy Suppressed, with factor 1), with RetryAfter set to the probe
	// interval as a hint.
	FailClosed
	// FailError returns the error: Redis's own error (wrapped with the
	// package and operation) from the call that found Redis unavailable,
	// then ErrUnavailable wrapping it at once while the breaker is open.
	FailError
)

// policyName returns the policy's name as written in Go ("FallbackLocal",
// …), or "FailurePolicy(n)" for a value that is none of them: the
// "policy" of a logged state change, and WithFailurePolicy's error.
func policyName(p FailurePolicy) string {
	return enumName(p, "FailurePolicy", "FallbackLocal", "FailOpen", "FailClosed", "FailError")
}

// StateChange reports a Redis provider entering or leaving degraded mode,
// to the Observer (Event.State).
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
	// Reconciled, leaving: keys (on a set: key and set pairs) whose
	// fallback units Redis recorded, as admitted whatever it held.
	Reconciled int
	// Unreconciled, leaving: keys whose fallback units Redis did not
	// record (the write failed, the limiter was closed, or more than
	// 10,000 keys were pending), and UnreconciledUnits their units (see
	// docs/operations.md, Reconciliation).
	Unreconciled      int
	UnreconciledUnits int64
}

// WithTimeout bounds every Redis call of a Redis provider by d on top of
// the caller's context, on any client. Default 250 ms; 0 means the
// caller's context alone. A call that runs out of d while Redis is not
// known to be down is shed (refused with Decision.Shed set), not degraded
// (docs/operations.md, What counts as an outage).
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		c.Record(settings.OptTimeout)
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
// Degraded set and a nil error; the cause goes to the observer (a
// "state_change" Event) or, without one, to the default log. The breaker opens on wire evidence only (a refused or reset
// connection, replies such as LOADING or READONLY), or on a timeout that a
// probe of its own confirms; until then a call that timed out is shed
// (Decision.Shed, ErrShed under FailError). Bad input, ErrClosed and the
// caller's own context are errors under every policy and never open the
// breaker (docs/operations.md, What counts as an outage).
func WithFailurePolicy(p FailurePolicy) Option {
	return func(c *config) {
		c.Record(settings.OptFailurePolicy)
		if p < FallbackLocal || p > FailError {
			c.Fail(fmt.Errorf("%w: unknown failure policy %s", ErrInvalidConfig, policyName(p)))
			return
		}
		c.Policy = p
	}
}

// WithFallbackInstances scales the FallbackLocal limiter for a fleet of n
// instances sharing one Redis: while Redis is unavailable each instance
// admits rate/n (at least one unit per window). Default 1: each instance
// admits the full rate, so a fleet of n may admit n × C per window during
// an outage. n must be at least 1. Other policies ignore it
// (docs/operations.md, Reconciliation).
func WithFallbackInstances(n int) Option {
	return func(c *config) {
		c.Record(settings.OptFallbackInstances)
		c.FallbackInstances = n
	}
}

// WithProbeInterval sets how often the background probe asks Redis while
// the breaker is open. Default 200 ms; between 1 ms and 1 minute. At most
// one probe is in flight; each is bounded by WithTimeout.
func WithProbeInterval(d time.Duration) Option {
	return func(c *config) {
		c.Record(settings.OptProbeInterval)
		c.ProbeInterval = d
	}
}

// WithBatching lets concurrent calls of a Redis provider share round
// trips: with more than 8 calls in progress to one Redis node, calls that
// arrive while two round trips are in flight are sent together, as one
// pipeline of at most n calls (of *redis.Client, *redis.ClusterClient
// and the rueidis adapter of module sluicerueidis, whose pipelines are
// one rueidis DoMulti; other clients' calls go alone). Each call is still one atomic script
// run with its own context and WithTimeout. Default 128; 0 or 1 sends
// every call alone; n must be between 0 and 1,024. A pipeline of n
// worst-case calls holds the server for their sum: keep n low where the
// Redis server is shared with latency-sensitive traffic
// (docs/operations.md, Batching).
func WithBatching(n int) Option {
	return func(c *config) {
		c.Record(settings.OptBatching)
		c.Batch = n
	}
}
