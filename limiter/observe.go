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

// Provider names, the values of DecisionEvent.Provider and Event.Provider.
const (
	ProviderLocal    = "local"
	ProviderRedisAbs = "redisabs"
	ProviderRedisSup = "redissup"
	// ProviderHybrid is the Provider of both hybrid strategies.
	ProviderHybrid = "hybrid"
	// ProviderCleanup is the Provider of an EventCleanup.
	ProviderCleanup = "cleanup"
)

// Strategy names, the values of DecisionEvent.Strategy.
const (
	StrategyAbsolute   = "absolute"
	StrategySuppressed = "suppressed"
)

// Operation names, the values of DecisionEvent.Op and Event.Op.
const (
	OpInc          = "inc"
	OpIsAllowed    = "is_allowed"
	OpIncSet       = "inc_set"
	OpIsAllowedSet = "is_allowed_set"
	OpGet          = "get"
	OpReset        = "reset"
	OpGetSet       = "get_set"
	OpResetSet     = "reset_set"
)

// Error classes, the values of DecisionEvent.ErrorClass and
// Event.ErrorClass: a small fixed set, fit for a metric attribute.
const (
	// ErrorTimeout: the call ran out of time (WithTimeout's deadline, a
	// socket timeout, the client's pool wait). The call is shed; the
	// breaker opens only if a confirming probe fails too.
	ErrorTimeout = "timeout"
	// ErrorConnection: the connection was refused, reset or closed. The
	// breaker opens.
	ErrorConnection = "connection"
	// ErrorUnavailable: Redis answered LOADING, BUSY, MASTERDOWN,
	// CLUSTERDOWN, TRYAGAIN, READONLY or OOM. The breaker opens.
	ErrorUnavailable = "unavailable"
	// ErrorReply: any other error reply, or a reply the provider could
	// not read. The error is returned to the caller; the breaker stays
	// closed.
	ErrorReply = "reply"
	// ErrorCanceled: the caller's context was cancelled or passed its own
	// deadline during the call. Returned to the caller; not Redis's fault.
	ErrorCanceled = "canceled"
)

// DecisionEvent describes one decision: an Inc, IsAllowed, IncSet or
// IsAllowedSet that returned a nil error (calls that return an error are
// not decisions; a failed Redis call is reported by an EventBackendError).
//
// Key is the caller's key. It is here for the observer that needs it (a
// sampled log, a bounded top-k); a metric attribute made of it would have
// one series per key, so adapters leave it out unless told otherwise.
type DecisionEvent struct {
	Provider string // ProviderLocal, ProviderRedisAbs, ProviderRedisSup, ProviderHybrid
	Strategy string // StrategyAbsolute, StrategySuppressed
	Op       string // OpInc, OpIsAllowed, OpIncSet, OpIsAllowedSet
	Key      string
	Cost     int64 // n as the caller gave it; 0 for IsAllowed and IsAllowedSet
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
	// Start and Duration are when the Redis call started and how long it
	// took, whether it succeeded or failed (then the failure policy
	// answered, Decision.Degraded is set and ErrorClass says why). Zero
	// when Backend is false.
	Start    time.Time
	Duration time.Duration
	// ErrorClass is the class of the Redis call's error when the failure
	// policy answered for it, "" otherwise.
	ErrorClass string
}

// Policy returns the name of the limit that decided a set call: the first
// limit (in the set's order) that refused it, or, for an admitted call,
// (or a refusal that names no limit, as a degraded answer may) the limit
// with the fewest units remaining, whose Limit and Remaining the set's
// Decision carries. "" for a call on a single limit, which has no
// name. Limit names are few and chosen by the program, so the result is
// fit for a metric attribute.
func (e *DecisionEvent) Policy() string {
	if len(e.Limits) == 0 {
		return ""
	}
	best := 0
	for i := range e.Limits {
		if e.Limits[i].Refused {
			return e.Limits[i].Name
		}
		if e.Limits[i].Remaining < e.Limits[best].Remaining {
			best = i
		}
	}
	return e.Limits[best].Name
}

// Answer sources, the values of DecisionEvent.Source: who answered a
// decision. Few and fixed, fit for a metric attribute.
const (
	// SourceLocal: a local provider decided, in process.
	SourceLocal = "local"
	// SourceRedis: Redis decided, in a script call of this decision.
	SourceRedis = "redis"
	// SourceMemory: the provider answered from what it remembers of
	// Redis's earlier answers, without a Redis call: a refusal hot-key
	// relief remembers, a hybrid's lease or cached refusal. Exact, within
	// the staleness bounds of docs/algorithms.md, Staleness.
	SourceMemory = "memory"
	// SourcePolicy: Redis could not be asked and the failure policy
	// answered (Decision.Degraded): the local fallback, FailOpen or
	// FailClosed.
	SourcePolicy = "policy"
	// SourceShed: the call's budget ran out while Redis was not known to
	// be down, and it was refused unasked (Decision.Shed).
	SourceShed = "shed"
)

// Source says who answered the decision: SourceLocal, SourceRedis,
// SourceMemory, SourcePolicy or SourceShed.
func (e *DecisionEvent) Source() string {
	switch {
	case e.Provider == ProviderLocal:
		return SourceLocal
	case e.Decision.Degraded:
		return SourcePolicy
	case e.Decision.Shed:
		return SourceShed
	case !e.Backend:
		return SourceMemory
	}
	return SourceRedis
}

// EventKind says what an Event reports.
type EventKind int

const (
	// EventBackendError: a Redis call failed. Op, ErrorClass, Err and
	// Duration describe it. One event per failed call; while the breaker
	// is open no call is made, so there is none.
	EventBackendError EventKind = iota + 1
	// EventStateChange: a Redis provider entered or left degraded mode
	// (State). The same transitions reach WithStateChange and WithLogger.
	// It comes from the provider's probe goroutine, so the event of
	// entering degraded mode may arrive before or after the
	// EventBackendError of the call that opened the breaker.
	EventStateChange
	// EventCleanup: a cleanup run finished (Cleanup).
	EventCleanup
)

// String returns "backend_error", "state_change" or "cleanup".
func (k EventKind) String() string {
	return enumName(k, "EventKind", "", "backend_error", "state_change", "cleanup")
}

// Event is a backend event. Kind says which fields are set.
type Event struct {
	Kind     EventKind
	Provider string // ProviderRedisAbs, ProviderRedisSup, ProviderHybrid, ProviderCleanup
	// EventBackendError: the operation (OpInc, …), the error's class and
	// the error as the provider saw it, and how long the call took (0 for
	// Get, Reset, GetSet and ResetSet, which are not timed).
	Op         string
	ErrorClass string
	Err        error
	Duration   time.Duration
	// EventStateChange: the transition.
	State StateChange
	// EventCleanup: what the run did.
	Cleanup CleanupReport
}

// CleanupReport is what one cleanup run did (cleanup.Report embeds it),
// sent in an EventCleanup to the observer of cleanup.WithObserver.
type CleanupReport struct {
	Scanned  int64         // keys SCAN returned under the prefix
	Deleted  int64         // limiter hashes with no live bucket, UNLINKed
	Trimmed  int64         // live hashes whose expired buckets were removed
	Duration time.Duration // how long the run took
	// Err is why the run stopped before the end of the scan (nil when it
	// finished); ErrorClass is its class, as for EventBackendError.
	Err        error
	ErrorClass string
}

// WithObserver registers o to receive every decision and backend event of
// the provider (see Observer). Default: none (one nil check per call).
// WithObserver(nil) removes an observer given earlier. To feed several
// observers, combine them with MultiObserver.
func WithObserver(o Observer) Option {
	return func(c *config) { c.Observer = o }
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
