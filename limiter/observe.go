package limiter

import (
	"context"
	"time"
)

// Observer receives what the providers do, for metrics, traces and logs:
// ObserveDecision once for every decision a provider returns, and
// ObserveEvent once for every backend event (a failed Redis call, the
// breaker opening or closing, a cleanup run). Register one with
// WithObserver; package sluiceotel (a module of its own) turns the calls
// into OpenTelemetry metrics and spans, and NewLogObserver into slog
// records.
//
// The methods run on the caller's goroutine, after the decision and before
// the provider returns it (state changes run on the provider's probe
// goroutine), so they add their cost to every call: they must be quick,
// safe for concurrent use, and must not call the provider back. ctx is the
// caller's context (context.Background for state changes); it carries the
// caller's span, if any.
type Observer interface {
	ObserveDecision(ctx context.Context, e DecisionEvent)
	ObserveEvent(ctx context.Context, e Event)
}

// DecisionEvent describes one decision: an Inc, IsAllowed or IncSet that
// returned a nil error (calls that return an error are not decisions; a
// failed Redis call is reported by a "backend_error" Event).
//
// Key is the caller's key. It is here for the observer that needs it (a
// sampled log, a bounded top-k); a metric attribute made of it would have
// one series per key, so adapters leave it out unless told otherwise.
type DecisionEvent struct {
	// Provider is "local", "redisabs", "redissup" or "hybrid" (both
	// hybrid strategies); Strategy "absolute" or "suppressed"; Op "inc",
	// "is_allowed" or "inc_set". These values, like
	// ErrorClass's and Source's, are few and fixed: fit for a metric
	// attribute.
	Provider string
	Strategy string
	Op       string
	Key      string
	Cost     int64 // n as the caller gave it; 0 for IsAllowed
	// Decision is the decision returned (for a set, the set's).
	Decision Decision
	// Limits is, for a set call, each limit's part of the decision, in
	// the set's order; nil otherwise. It is the slice the caller receives
	// in SetDecision.Limits: read it during the call, never keep or change
	// it.
	Limits []LimitDecision
	// Backend reports that the provider called Redis for this decision
	// (whether or not Redis answered: a shed call and one the policy
	// answered after a failed call asked). False for the local provider,
	// for decisions answered by the failure policy while the breaker is
	// open, and for those a provider answered from memory (a hybrid
	// lease, a remembered refusal). Source sorts all of these.
	Backend bool
	// Source says who answered the decision: "local" (a local provider,
	// in process), "redis" (Redis, in a script call of this decision),
	// "memory" (the provider answered from what it remembers of Redis's
	// earlier answers, without a Redis call: a refusal hot-key relief
	// remembers, a hybrid's lease or cached refusal; exact within the
	// staleness bounds of docs/algorithms.md, Staleness), "policy" (Redis
	// could not be asked and the failure policy answered:
	// Decision.Degraded) or "shed" (the call's budget ran out while Redis
	// was not known to be down, and it was refused unasked:
	// Decision.Shed).
	Source string
	// Policy is the name of the limit that decided a set call: the first
	// limit (in the set's order) that refused it or, for an admitted call
	// (or a refusal that names no limit, as a degraded answer may), the
	// limit with the fewest units remaining (the first such), whose Limit
	// and Remaining the set's Decision carries. "" for a call on a single
	// limit, which has no name. Limit names are few and chosen by the
	// program, so it is fit for a metric attribute.
	Policy string
	// Start and Duration are when the Redis call started and how long it
	// took, whether it succeeded or failed (then the failure policy
	// answered, Decision.Degraded is set and ErrorClass says why). Zero
	// when Backend is false.
	Start    time.Time
	Duration time.Duration
	// ErrorClass is the class of the Redis call's error when the failure
	// policy answered for it, "" otherwise: "timeout" (WithTimeout's
	// deadline, a socket timeout, the client's pool wait: the call is
	// shed, and the breaker opens only if a confirming probe fails too),
	// "connection" (refused, reset or closed: the breaker opens),
	// "unavailable" (LOADING, BUSY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN,
	// READONLY or OOM: the breaker opens), "reply" (any other error reply,
	// or a reply the provider could not read: returned to the caller, the
	// breaker stays closed) or "canceled" (the caller's context was
	// cancelled or passed its own deadline: returned, not Redis's fault).
	ErrorClass string
}

// Event is a backend event. Kind says what it reports, and which fields
// are set:
//
//   - "backend_error": a Redis call failed. Op, ErrorClass, Err and
//     Duration describe it. One event per failed call; while the breaker
//     is open no call is made, so there is none.
//   - "state_change": a Redis provider entered or left degraded mode
//     (State). It comes from the provider's probe goroutine, so the event
//     of entering degraded mode may arrive before or after the
//     "backend_error" of the call that opened the breaker.
//   - "cleanup": a cleanup run finished (Cleanup); Provider is "cleanup".
type Event struct {
	Kind     string
	Provider string // "redisabs", "redissup", "hybrid" or "cleanup"
	// "backend_error": the operation (DecisionEvent.Op's values, or
	// "get", "reset", "get_set", "reset_set"), the error's class (as
	// DecisionEvent.ErrorClass) and the error as the provider saw it, and
	// how long the call took (0 for Get, Reset, GetSet and ResetSet, which
	// are not timed).
	Op         string
	ErrorClass string
	Err        error
	Duration   time.Duration
	// "state_change": the transition.
	State StateChange
	// "cleanup": what the run did.
	Cleanup CleanupReport
}

// CleanupReport is what one cleanup run did (cleanup.Report embeds it),
// sent in a "cleanup" Event to the observer of cleanup.WithObserver.
type CleanupReport struct {
	Scanned  int64         // keys SCAN returned under the prefix
	Deleted  int64         // limiter hashes with no live bucket, UNLINKed
	Trimmed  int64         // live hashes whose expired buckets were removed
	Duration time.Duration // how long the run took
	// Err is why the run stopped before the end of the scan (nil when it
	// finished); ErrorClass is its class, as for a "backend_error".
	Err        error
	ErrorClass string
}

// MultiObserver returns an Observer that passes every call to each of
// obs in turn, skipping nils. With no non-nil observer it returns nil, so
// WithObserver(MultiObserver()) registers none.
func MultiObserver(obs ...Observer) Observer {
	var m multi
	for _, o := range obs {
		if o != nil {
			m = append(m, o)
		}
	}
	switch len(m) {
	case 0:
		return nil
	case 1:
		return m[0]
	}
	return m
}

type multi []Observer

func (m multi) ObserveDecision(ctx context.Context, e DecisionEvent) {
	for _, o := range m {
		o.ObserveDecision(ctx, e)
	}
}

func (m multi) ObserveEvent(ctx context.Context, e Event) {
	for _, o := range m {
		o.ObserveEvent(ctx, e)
	}
}
