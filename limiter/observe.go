package limiter

import (
	"context"
	"log/slog"
	"time"
)

// Observer receives what the providers do, for metrics, traces and logs
// (WithObserver): ObserveDecision once for every decision a provider
// returns, ObserveEvent once for every backend event. Its methods run on
// the caller's goroutine before the provider returns (state changes on the
// probe goroutine, with context.Background), so they must be quick, safe
// for concurrent use, and must not call the provider back. Module
// sluiceotel adapts it to OpenTelemetry; NewLogObserver to slog.
type Observer interface {
	ObserveDecision(ctx context.Context, e DecisionEvent)
	ObserveEvent(ctx context.Context, e Event)
}

// DecisionEvent describes one decision: an Inc, IsAllowed or IncSet that
// returned a nil error. Its string fields but Key take few, fixed values,
// fit for metric attributes; Key would make one series per key.
type DecisionEvent struct {
	Provider string // "local", "redisabs", "redissup" or "hybrid"
	Strategy string // "absolute" or "suppressed"
	Op       string // "inc", "is_allowed" or "inc_set"
	Key      string
	Cost     int64 // n as the caller gave it; 0 for IsAllowed
	// Decision is the decision returned (for a set, the set's).
	Decision Decision
	// Limits is a set call's SetDecision.Limits (nil otherwise): read it
	// during the call, never keep or change it.
	Limits []LimitDecision
	// Backend reports that the provider called Redis for this decision,
	// whether or not Redis answered.
	Backend bool
	// Source says who answered: "local" (a local provider), "redis" (a
	// script call of this decision), "memory" (what the provider remembers
	// of Redis's earlier answers: a relief refusal, a hybrid lease; exact
	// within docs/algorithms.md, Staleness), "policy" (the failure policy:
	// Decision.Degraded) or "shed" (Decision.Shed).
	Source string
	// Policy is the name of the limit that decided a set call: the first
	// that refused it, else the first with the fewest units remaining,
	// whose Limit and Remaining the set's Decision carries. "" for a
	// single-limit call.
	Policy string
	// Start and Duration time the Redis call; zero when Backend is false.
	Start    time.Time
	Duration time.Duration
	// ErrorClass is the class of the Redis call's error when the failure
	// policy answered for it, "" otherwise: "timeout" (WithTimeout, a
	// socket or pool timeout: shed, unless a probe confirms), "connection"
	// (refused, reset, closed: the breaker opens), "unavailable" (LOADING,
	// BUSY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, READONLY or OOM: the breaker
	// opens), "reply" (another error reply: returned to the caller) or
	// "canceled" (the caller's context: returned).
	ErrorClass string
}

// Event is a backend event. Kind says what it reports, and which fields
// are set:
//
//   - "backend_error": a Redis call failed (Op, ErrorClass, Err,
//     Duration); none while the breaker is open.
//   - "state_change": a Redis provider entered or left degraded mode
//     (State), from its probe goroutine, so in no set order with the
//     "backend_error" of the call that opened the breaker.
//   - "cleanup": a cleanup run finished (Cleanup); Provider is "cleanup".
type Event struct {
	Kind     string
	Provider string // "redisabs", "redissup", "hybrid" or "cleanup"
	// "backend_error": DecisionEvent.Op's values or "get", "reset",
	// "get_set", "reset_set"; the class as DecisionEvent.ErrorClass; the
	// error; how long the call took (0 for the untimed Get and Reset
	// calls).
	Op         string
	ErrorClass string
	Err        error
	Duration   time.Duration
	State      StateChange   // "state_change"
	Cleanup    CleanupReport // "cleanup"
}

// CleanupReport is what one cleanup run did (cleanup.Report embeds it).
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

// NewLogObserver returns an Observer, safe for concurrent use, that writes
// to l (nil: slog.Default()) state changes (Warn entering degraded mode,
// Info leaving it, as a provider's default log), failed Redis calls
// (Warn), cleanup runs (Info, Warn on an error) and, when l is enabled for
// Debug, decisions (Debug, without the key).
func NewLogObserver(l *slog.Logger) Observer {
	if l == nil {
		l = slog.Default()
	}
	return logObserver{l}
}

type logObserver struct{ l *slog.Logger }

func (o logObserver) ObserveDecision(ctx context.Context, e DecisionEvent) {
	if !o.l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{
		slog.String("provider", e.Provider), slog.String("strategy", e.Strategy), slog.String("op", e.Op),
		slog.String("outcome", outcomeName(&e.Decision)), slog.Bool("allowed", e.Decision.Allowed),
		slog.Bool("degraded", e.Decision.Degraded), slog.Bool("shed", e.Decision.Shed), slog.String("source", e.Source),
		slog.Int64("cost", e.Cost),
	}
	if p := e.Policy; p != "" {
		attrs = append(attrs, slog.String("policy", p))
	}
	if e.Backend {
		attrs = append(attrs, slog.Duration("duration", e.Duration))
	}
	if e.ErrorClass != "" {
		attrs = append(attrs, slog.String("error_class", e.ErrorClass))
	}
	o.l.LogAttrs(ctx, slog.LevelDebug, "sluice: decision", attrs...)
}

func (o logObserver) ObserveEvent(ctx context.Context, e Event) {
	switch e.Kind {
	case "state_change":
		sc := e.State
		switch {
		case sc.Degraded:
			o.l.WarnContext(ctx, "sluice: Redis unavailable, answering by the failure policy",
				"provider", sc.Provider, "policy", policyName(sc.Policy), "cause", sc.Cause)
		case sc.Cause != nil:
			o.l.InfoContext(ctx, "sluice: limiter closed while Redis was unavailable",
				"provider", sc.Provider, "degraded_for", sc.Duration, "cause", sc.Cause)
		default:
			o.l.InfoContext(ctx, "sluice: Redis answers again",
				"provider", sc.Provider, "degraded_for", sc.Duration,
				"reconciled", sc.Reconciled, "unreconciled", sc.Unreconciled, "unreconciled_units", sc.UnreconciledUnits)
		}
	case "backend_error":
		o.l.LogAttrs(ctx, slog.LevelWarn, "sluice: Redis call failed",
			slog.String("provider", e.Provider), slog.String("op", e.Op),
			slog.String("error_class", e.ErrorClass), slog.Any("error", e.Err), slog.Duration("duration", e.Duration))
	case "cleanup":
		r := e.Cleanup
		level := slog.LevelInfo
		attrs := []slog.Attr{slog.Int64("scanned", r.Scanned), slog.Int64("deleted", r.Deleted),
			slog.Int64("trimmed", r.Trimmed), slog.Duration("duration", r.Duration)}
		if r.Err != nil {
			level = slog.LevelWarn
			attrs = append(attrs, slog.String("error_class", r.ErrorClass), slog.Any("error", r.Err))
		}
		o.l.LogAttrs(ctx, level, "sluice: cleanup run", attrs...)
	}
}

// outcomeName is the "outcome" of a logged decision.
func outcomeName(d *Decision) string {
	switch {
	case d.Suppressed:
		return "suppressed"
	case d.Allowed:
		return "allowed"
	}
	return "rejected"
}
