package limiter

import (
	"context"
	"log/slog"
)

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
