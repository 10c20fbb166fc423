package local

import (
	"context"

	"github.com/sluice-go/sluice/limiter"
)

// observe reports one decision to the observer, which the caller has
// checked is set: a local decision asks no backend.
func (s *store) observe(ctx context.Context, op, k string, n int64, d limiter.Decision, limits []limiter.LimitDecision) {
	s.obs.ObserveDecision(ctx, limiter.DecisionEvent{
		Provider: limiter.ProviderLocal,
		Strategy: s.strategy,
		Op:       op,
		Key:      k,
		Cost:     n,
		Decision: d,
		Limits:   limits,
	})
}
