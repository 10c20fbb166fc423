// Config is the configuration every sluice provider reads: the option
// settings of package internal/settings over package limiter's types.
// Users never see it: they pass limiter.Option values, and each provider
// resolves them with NewConfig or ConfigFor.

package window

import (
	"fmt"

	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/limiter"
)

// Config is the resolved configuration.
type Config = settings.Config[limiter.Observer, limiter.FailurePolicy, limiter.StateChange]

// New applies opts over the defaults and validates the result; a value out
// of range is limiter.ErrInvalidConfig. It takes limiter.Option values and
// function literals over *Config alike.
func NewConfig[O ~func(*Config)](opts ...O) (Config, error) {
	return settings.New[limiter.Observer, limiter.FailurePolicy, limiter.StateChange](limiter.ErrInvalidConfig, opts...)
}

// ConfigFor is NewConfig for the provider named provider (ProviderLocal,
// …): an option of another provider's only is limiter.ErrInvalidConfig,
// naming the option and the provider.
func ConfigFor[O ~func(*Config)](provider string, opts ...O) (Config, error) {
	c, err := NewConfig(opts...)
	if err == nil && provider != ProviderHybrid && len(c.HybridOnly) > 0 {
		return Config{}, fmt.Errorf("%w: %s is an option of the hybrid providers only, not of %s",
			limiter.ErrInvalidConfig, c.HybridOnly[0], provider)
	}
	return c, err
}

// ForFallback, appended to a provider's options, drops the options of
// that provider's only, so that its local fallback, built from the same
// options, accepts them.
func ForFallback(c *Config) { c.HybridOnly = nil }

// ValidatePrefix reports limiter.ErrInvalidConfig, with the reason, for a
// prefix that cannot start a Redis key of the schema.
func ValidatePrefix(p string) error {
	if err := settings.ValidatePrefix(p); err != nil {
		return fmt.Errorf("%w: %w", limiter.ErrInvalidConfig, err)
	}
	return nil
}

// CheckCost reports limiter.ErrInvalidCost for n < 0. Every n ≥ 0 is a
// cost: one above the capacity is a decision with Never set.
func CheckCost(n int64) error {
	if n < 0 {
		return fmt.Errorf("%w: n = %d (want n ≥ 0)", limiter.ErrInvalidCost, n)
	}
	return nil
}

// CheckSet reports limiter.ErrInvalidConfig for a nil or empty set, which
// no set call accepts.
func CheckSet(s *limiter.Set) error {
	if s.Len() == 0 {
		return fmt.Errorf("%w: an empty set of limits (build one with NewSet)", limiter.ErrInvalidConfig)
	}
	return nil
}

// The observer's vocabulary: the values of limiter.DecisionEvent's and
// limiter.Event's string fields, as package limiter documents them.
const (
	ProviderLocal    = "local"
	ProviderRedisAbs = "redisabs"
	ProviderRedisSup = "redissup"
	ProviderHybrid   = "hybrid"
	ProviderCleanup  = "cleanup"

	StrategyAbsolute   = "absolute"
	StrategySuppressed = "suppressed"

	OpInc       = "inc"
	OpIsAllowed = "is_allowed"
	OpIncSet    = "inc_set"
	OpGet       = "get"
	OpReset     = "reset"
	OpGetSet    = "get_set"
	OpResetSet  = "reset_set"

	ErrorTimeout     = "timeout"
	ErrorConnection  = "connection"
	ErrorUnavailable = "unavailable"
	ErrorReply       = "reply"
	ErrorCanceled    = "canceled"

	SourceLocal  = "local"
	SourceRedis  = "redis"
	SourceMemory = "memory"
	SourcePolicy = "policy"
	SourceShed   = "shed"

	EventBackendError = "backend_error"
	EventStateChange  = "state_change"
	EventCleanup      = "cleanup"
)

// DecisionSource returns limiter.DecisionEvent.Source for a decision d of
// provider, backend telling whether Redis was called for it.
func DecisionSource(provider string, d *limiter.Decision, backend bool) string {
	switch {
	case provider == ProviderLocal:
		return SourceLocal
	case d.Degraded:
		return SourcePolicy
	case d.Shed:
		return SourceShed
	case !backend:
		return SourceMemory
	}
	return SourceRedis
}

// DecisionPolicy returns limiter.DecisionEvent.Policy for a set call's
// limits: the first that refused, else the first with the fewest units
// remaining; "" for no limits (a single-limit call).
func DecisionPolicy(limits []limiter.LimitDecision) string {
	if len(limits) == 0 {
		return ""
	}
	best := 0
	for i := range limits {
		if limits[i].Refused {
			return limits[i].Name
		}
		if limits[i].Remaining < limits[best].Remaining {
			best = i
		}
	}
	return limits[best].Name
}
