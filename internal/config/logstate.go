package config

import (
	"context"
	"log/slog"

	"github.com/sluice-go/sluice/limiter"
)

// LogStateChange writes sc to l: Warn on entering degraded mode, Info on
// leaving it. It logs through limiter.NewLogObserver, so WithLogger and a
// log observer write the same records.
func LogStateChange(ctx context.Context, l *slog.Logger, sc limiter.StateChange) {
	limiter.NewLogObserver(l).ObserveEvent(ctx, limiter.Event{Kind: EventStateChange, Provider: sc.Provider, State: sc})
}
