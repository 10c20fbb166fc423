package window

import (
	"context"

	"github.com/sluice-go/sluice/limiter"
)

// observed reports a single-limit decision and returns it. It is kept out
// of line so that a call with no observer pays only the nil check.
//
//go:noinline
func (s *store) observed(ctx context.Context, op, k string, n int64, d limiter.Decision) (limiter.Decision, error) {
	s.observe(ctx, op, k, n, d, nil)
	return d, nil
}

// observe reports one decision to the observer, which the caller has
// checked is set: a local decision asks no backend.
func (s *store) observe(ctx context.Context, op, k string, n int64, d limiter.Decision, limits []limiter.LimitDecision) {
	s.obs.ObserveDecision(ctx, limiter.DecisionEvent{
		Provider: ProviderLocal,
		Strategy: s.strategy,
		Op:       op,
		Key:      k,
		Cost:     n,
		Decision: d,
		Limits:   limits,
		Source:   SourceLocal,
		Policy:   DecisionPolicy(limits),
	})
}
