package window

import (
	"context"
	"log/slog"

	"github.com/sluice-go/sluice/limiter"
)

// LogStateChange writes sc to l: Warn on entering degraded mode, Info on
// leaving it. It logs through limiter.NewLogObserver, so a provider's
// default log and a log observer write the same records.
func LogStateChange(ctx context.Context, l *slog.Logger, sc limiter.StateChange) {
	limiter.NewLogObserver(l).ObserveEvent(ctx, limiter.Event{Kind: EventStateChange, Provider: sc.Provider, State: sc})
}

// WithLogger replaces a Redis provider's default log by l (nil: silent),
// observer or not. It is not public (the observer is the one channel): it
// is for the tests of that log, its first-failure record and its throttle.
func WithLogger(l *slog.Logger) limiter.Option {
	return func(c *Config) { c.Logger, c.LoggerSet = l, true }
}

// StateObserver returns an Observer that calls fn with every state change
// and ignores the rest: what a test that waits for the breaker registers
// with limiter.WithObserver (combined with its other observers by
// limiter.MultiObserver).
func StateObserver(fn func(limiter.StateChange)) limiter.Observer { return stateObserver(fn) }

type stateObserver func(limiter.StateChange)

func (stateObserver) ObserveDecision(context.Context, limiter.DecisionEvent) {}

func (fn stateObserver) ObserveEvent(_ context.Context, e limiter.Event) {
	if e.Kind == EventStateChange {
		fn(e.State)
	}
}
