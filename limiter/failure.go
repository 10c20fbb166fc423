package limiter

import (
	"errors"
	"strconv"
	"time"
)

// ErrUnavailable is returned, wrapping the error that opened the circuit
// breaker, by a call a Redis provider answered without asking Redis
// because Redis was found unavailable: under FailError for every call, and
// under every policy for Get and Reset, which have no Decision to mark.
var ErrUnavailable = errors.New("sluice: redis unavailable")

// FailurePolicy says what a Redis provider answers to Inc and IsAllowed
// while Redis is unavailable (WithFailurePolicy). The zero value is
// FallbackLocal.
type FailurePolicy int

const (
	// FallbackLocal decides with an in-process limiter of the same
	// strategy, window, bucket and rates, exact within the instance; the
	// units it admits are written to Redis when Redis answers again. The
	// default.
	FallbackLocal FailurePolicy = iota
	// FailOpen admits every request (Allowed, Degraded), except one that
	// can never fit (Never).
	FailOpen
	// FailClosed refuses every request (Degraded; Suppressed with factor 1
	// for the suppressed strategy), with the probe interval as RetryAfter.
	FailClosed
	// FailError returns Redis's error from the call that found Redis
	// unavailable, then ErrUnavailable wrapping it while the breaker is
	// open.
	FailError
)

// policyName returns p's name as written in Go, or "FailurePolicy(n)".
func policyName(p FailurePolicy) string {
	names := [...]string{"FallbackLocal", "FailOpen", "FailClosed", "FailError"}
	if p >= 0 && int(p) < len(names) {
		return names[p]
	}
	return "FailurePolicy(" + strconv.Itoa(int(p)) + ")"
}

// StateChange reports to the Observer (Event.State) a Redis provider
// entering degraded mode (a call found Redis unavailable and the breaker
// opened) or leaving it (a probe got an answer and, under FallbackLocal,
// the fallback's units were reconciled; or Close ended the outage).
type StateChange struct {
	Provider string // "redisabs", "redissup"
	Degraded bool   // true: entering degraded mode; false: leaving it
	// Cause, entering: the error that opened the breaker; leaving: nil, or
	// ErrClosed when Close ended the outage.
	Cause  error
	Policy FailurePolicy
	// Duration, leaving: how long the provider was degraded.
	Duration time.Duration
	// Reconciled, leaving: keys (key and set pairs) whose fallback units
	// Redis recorded. Unreconciled: those it did not (the write failed,
	// the limiter closed, or more than 10,000 were pending), holding
	// UnreconciledUnits (docs/operations.md, Reconciliation).
	Reconciled        int
	Unreconciled      int
	UnreconciledUnits int64
}
