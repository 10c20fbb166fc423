package window

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// Config is the resolved configuration of limiter.Option values: each
// provider resolves them with ConfigFor.
type Config = settings.Config[limiter.Observer, limiter.FailurePolicy, limiter.StateChange]

// NewConfig applies opts over the defaults and validates the result (a
// value out of range is limiter.ErrInvalidConfig), reading every option
// (the CLI's flags, cleanup's window).
func NewConfig[O ~func(*Config)](opts ...O) (Config, error) {
	return settings.New[limiter.Observer, limiter.FailurePolicy, limiter.StateChange](limiter.ErrInvalidConfig, opts...)
}

// ConfigFor is NewConfig for a provider and strategy: an option given that
// it does not read (Reads) is limiter.ErrInvalidConfig naming every such
// option, the provider and the strategy, before any value is checked.
func ConfigFor[O ~func(*Config)](provider, strategy string, opts ...O) (Config, error) {
	c := settings.Apply[limiter.Observer, limiter.FailurePolicy, limiter.StateChange](opts...)
	if err := unread(provider, strategy, c.Given); err != nil {
		return Config{}, err
	}
	if err := c.Resolve(limiter.ErrInvalidConfig); err != nil {
		return Config{}, err
	}
	return c, nil
}

// reader is a set of providers with a strategy: those reading an option.
type reader uint8

const (
	localAbs reader = 1 << iota
	localSup
	redisAbs
	redisSup
	hybridAbs
	hybridSup

	everyProvider = localAbs | localSup | redisAbs | redisSup | hybridAbs | hybridSup
	suppressed    = localSup | redisSup | hybridSup
	usesRedis     = redisAbs | redisSup | hybridAbs | hybridSup
	hybrids       = hybridAbs | hybridSup
)

// readers says which providers read each option (docs/operations.md,
// Options across providers).
var readers = map[string]reader{
	settings.OptWindow:            everyProvider,
	settings.OptBucket:            everyProvider,
	settings.OptClock:             everyProvider,
	settings.OptObserver:          everyProvider,
	settings.OptHardLimitFactor:   suppressed,
	settings.OptSuppressionCache:  suppressed,
	settings.OptRandom:            suppressed,
	settings.OptPrefix:            usesRedis,
	settings.OptTimeout:           usesRedis,
	settings.OptFailurePolicy:     usesRedis,
	settings.OptFallbackInstances: usesRedis,
	settings.OptProbeInterval:     usesRedis,
	settings.OptBatching:          usesRedis,
	settings.OptHotKeyRelief:      usesRedis,
	settings.OptSyncInterval:      hybrids,
	settings.OptMaxLease:          hybrids,
	settings.OptLeaseAhead:        hybrids,
}

// providers are the readers by provider and strategy.
var providers = map[[2]string]reader{
	{ProviderLocal, StrategyAbsolute}:      localAbs,
	{ProviderLocal, StrategySuppressed}:    localSup,
	{ProviderRedisAbs, StrategyAbsolute}:   redisAbs,
	{ProviderRedisSup, StrategySuppressed}: redisSup,
	{ProviderHybrid, StrategyAbsolute}:     hybridAbs,
	{ProviderHybrid, StrategySuppressed}:   hybridSup,
}

// Reads reports whether the provider named provider, with strategy, reads
// the option named opt ("WithTimeout", "hybrid.WithMaxLease").
func Reads(provider, strategy, opt string) bool {
	return readers[opt]&providers[[2]string{provider, strategy}] != 0
}

// unread is the error for the options of given that the provider does not
// read, nil when it reads them all.
func unread(provider, strategy string, given []string) error {
	var names []string
	for _, n := range given {
		if !Reads(provider, strategy, n) && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil
	}
	verb := "is"
	if len(names) > 1 {
		verb = "are"
	}
	return fmt.Errorf("%w: %s %s not read by the %s provider (%s strategy); see docs/operations.md, Options across providers",
		limiter.ErrInvalidConfig, strings.Join(names, ", "), verb, provider, strategy)
}

// ForFallback, appended to a Redis provider's options, forgets the options
// given, so that its local fallback is not refused those only the parent
// reads (the parent's ConfigFor checked them).
func ForFallback(c *Config) { c.Given = nil }

// ValidatePrefix reports limiter.ErrInvalidConfig, with the reason, for a
// prefix that cannot start a Redis key of the schema.
func ValidatePrefix(p string) error {
	if err := settings.ValidatePrefix(p); err != nil {
		return fmt.Errorf("%w: %w", limiter.ErrInvalidConfig, err)
	}
	return nil
}

// CheckCost reports limiter.ErrInvalidCost for n < 0.
func CheckCost(n int64) error {
	if n < 0 {
		return fmt.Errorf("%w: n = %d (want n ≥ 0)", limiter.ErrInvalidCost, n)
	}
	return nil
}

// CheckSet reports limiter.ErrInvalidConfig for a nil or empty set.
func CheckSet(s *limiter.Set) error {
	if s.Len() == 0 {
		return fmt.Errorf("%w: an empty set of limits (build one with NewSet)", limiter.ErrInvalidConfig)
	}
	return nil
}

// The values of limiter.DecisionEvent's and limiter.Event's string fields.
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
// limits (limiter documents it); "" for a single-limit call.
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

// LogStateChange writes sc to l: Warn on entering degraded mode, Info on
// leaving it. It logs through limiter.NewLogObserver, so a provider's
// default log and a log observer write the same records.
func LogStateChange(ctx context.Context, l *slog.Logger, sc limiter.StateChange) {
	limiter.NewLogObserver(l).ObserveEvent(ctx, limiter.Event{Kind: EventStateChange, Provider: sc.Provider, State: sc})
}

// WithLogger replaces a Redis provider's default log by l (nil: silent),
// observer or not: for the tests of that log (the observer is the public
// channel).
func WithLogger(l *slog.Logger) limiter.Option {
	return func(c *Config) { c.Logger, c.LoggerSet = l, true }
}

// StateObserver returns an Observer that calls fn with every state change
// and ignores the rest, for tests that wait for the breaker.
func StateObserver(fn func(limiter.StateChange)) limiter.Observer { return stateObserver(fn) }

type stateObserver func(limiter.StateChange)

func (stateObserver) ObserveDecision(context.Context, limiter.DecisionEvent) {}

func (fn stateObserver) ObserveEvent(_ context.Context, e limiter.Event) {
	if e.Kind == EventStateChange {
		fn(e.State)
	}
}

// ResolveLimit is the single limit a middleware (httplimit, grpclimit)
// enforces with l: Name defaults to defaultName; Window 0 takes the window
// l reports (Window() time.Duration, as every provider has), another is an
// error, and a limiter that reports none must be given one. Every error
// wraps limiter.ErrInvalidConfig.
func ResolveLimit(l limiter.Limiter, limit limiter.Limit, defaultName string) (limiter.Limit, error) {
	if limit.Name == "" {
		limit.Name = defaultName
	}
	if err := key.ValidateLimitName(limit.Name); err != nil {
		return limit, fmt.Errorf("%w: limit name: %w", limiter.ErrInvalidConfig, err)
	}
	if w, ok := l.(interface{ Window() time.Duration }); ok {
		switch lw := w.Window(); {
		case limit.Window == 0:
			limit.Window = lw
		case limit.Window != lw:
			return limit, fmt.Errorf("%w: limit %q: window %v differs from the limiter's window %v (leave Limit.Window 0 to use the limiter's)", limiter.ErrInvalidConfig, limit.Name, limit.Window, lw)
		}
	}
	if limit.Window < time.Millisecond {
		return limit, fmt.Errorf("%w: limit %q: window %v (this limiter does not report its window: give Limit.Window, the window it was built with, at least 1ms)", limiter.ErrInvalidConfig, limit.Name, limit.Window)
	}
	return limit, nil
}
