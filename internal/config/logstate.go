package config

import (
	"context"
	"log/slog"
)

// LogStateChange writes sc to l: Warn on entering degraded mode, Info on
// leaving it. WithLogger and limiter.NewLogObserver both log through it, so
// the two read the same.
func LogStateChange(ctx context.Context, l *slog.Logger, sc StateChange) {
	if sc.Degraded {
		l.WarnContext(ctx, "sluice: Redis unavailable, answering by the failure policy",
			"provider", sc.Provider, "policy", sc.Policy.String(), "cause", sc.Cause)
		return
	}
	if sc.Cause != nil {
		l.InfoContext(ctx, "sluice: limiter closed while Redis was unavailable",
			"provider", sc.Provider, "degraded_for", sc.Duration, "cause", sc.Cause)
		return
	}
	l.InfoContext(ctx, "sluice: Redis answers again",
		"provider", sc.Provider, "degraded_for", sc.Duration,
		"reconciled", sc.Reconciled, "unreconciled", sc.Unreconciled, "unreconciled_units", sc.UnreconciledUnits)
}
