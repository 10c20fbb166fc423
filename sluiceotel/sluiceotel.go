// Package sluiceotel exports what sluice's providers do as OpenTelemetry
// metrics and, optionally, spans. It is a module of its own, so that the
// core module depends on go-redis, miniredis and golang.org/x/time/rate
// alone; programs that want OpenTelemetry add this module.
//
//	obs, err := sluiceotel.New(sluiceotel.WithMeterProvider(mp))
//	l, err := redisabs.New(rdb, limiter.WithObserver(obs))
//
// # Metrics
//
// Names follow the OpenTelemetry semantic conventions' style: a namespace
// (sluice), dot-separated lowercase words, units in UCUM, durations in
// seconds, error.type for the class of an error.
//
//	name                      instrument            unit        attributes
//	sluice.decisions          Int64Counter          {decision}  sluice.provider, sluice.strategy, sluice.outcome, sluice.allowed, sluice.degraded, [sluice.limit], [sluice.key]
//	sluice.backend.duration   Float64Histogram      s           sluice.provider, sluice.operation, [error.type]
//	sluice.backend.errors     Int64Counter          {error}     sluice.provider, sluice.operation, error.type
//	sluice.degraded           Int64ObservableGauge  {limiter}   sluice.provider
//	sluice.state_changes      Int64Counter          {change}    sluice.provider, sluice.degraded
//	sluice.cleanup.runs       Int64Counter          {run}       [error.type]
//	sluice.cleanup.keys       Int64Counter          {key}       sluice.cleanup.action (scanned, deleted, trimmed)
//
// sluice.limit is the name of the limit that decided a call on a set of
// limits (limiter.DecisionEvent.Policy), absent for a single limit.
// sluice.key is absent unless WithKeyAttribute is given. docs/operations.md
// in the sluice repository has the full table, alerts and examples.
//
// sluice.backend.duration has one sample per Redis call made for a
// decision, failed or not (then with error.type); decisions answered while
// the breaker is open, and local decisions, ask no backend and add none.
// sluice.degraded is the number of limiters of each provider that uses
// Redis (redisabs, redissup, hybrid) in degraded mode, from the state
// changes this observer has seen.
package sluiceotel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-go/sluice/limiter"
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/sluice-go/sluice/sluiceotel"

// Attribute keys.
const (
	AttrProvider = attribute.Key("sluice.provider")
	AttrStrategy = attribute.Key("sluice.strategy")
	AttrOutcome  = attribute.Key("sluice.outcome")
	AttrAllowed  = attribute.Key("sluice.allowed")
	AttrDegraded = attribute.Key("sluice.degraded")
	// AttrSource is who answered a decision (limiter.DecisionEvent.Source):
	// local, redis, memory, policy or shed.
	AttrSource        = attribute.Key("sluice.source")
	AttrLimit         = attribute.Key("sluice.limit")
	AttrKey           = attribute.Key("sluice.key")
	AttrOperation     = attribute.Key("sluice.operation")
	AttrCleanupAction = attribute.Key("sluice.cleanup.action")
	// AttrErrorType is the semantic conventions' error.type.
	AttrErrorType = attribute.Key("error.type")
	// AttrDBSystem is the semantic conventions' db.system.name, set on
	// spans.
	AttrDBSystem = attribute.Key("db.system.name")
)

// OtherKey is the value of sluice.key for keys beyond WithKeyAttribute's
// bound.
const OtherKey = "_other"

// DurationBuckets are the bucket boundaries of sluice.backend.duration, in
// seconds: from 100 µs (a Redis call on the same host) to 1 s.
var DurationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// ErrInvalidOption is returned by New for a bad option.
var ErrInvalidOption = errors.New("sluiceotel: invalid option")

// Option configures New.
type Option func(*options)

type options struct {
	mp      metric.MeterProvider
	tp      trace.TracerProvider
	maxKeys int
	err     error
}

// WithMeterProvider sets where the metrics go. Default: the global
// otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) {
		if mp == nil {
			o.err = fmt.Errorf("%w: nil meter provider", ErrInvalidOption)
			return
		}
		o.mp = mp
	}
}

// WithTracerProvider turns spans on: each Redis call made for a decision
// becomes a client span, a child of the span in the caller's context, that
// starts and ends when the call did. Default: no spans.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) {
		if tp == nil {
			o.err = fmt.Errorf("%w: nil tracer provider", ErrInvalidOption)
			return
		}
		o.tp = tp
	}
}

// WithKeyAttribute adds the caller's key to sluice.decisions as
// sluice.key, for the first max distinct keys this
// observer sees; every later key is counted as OtherKey. A metric series
// per key is costly for the backend that stores them, and keys may be
// personal data (IP addresses, e-mail addresses): use it for a small,
// known population of keys (tenants, API clients), never for end users.
// Each decision then builds its attribute set, which allocates. max must
// be at least 1. Default: no key attribute.
func WithKeyAttribute(max int) Option {
	return func(o *options) {
		if max < 1 {
			o.err = fmt.Errorf("%w: key attribute bound %d must be at least 1", ErrInvalidOption, max)
			return
		}
		o.maxKeys = max
	}
}

// Observer is a limiter.Observer that records OpenTelemetry metrics and
// spans. It is safe for concurrent use and may serve many limiters. Build
// it with New; the zero value is not usable. Close unregisters its gauge.
type Observer struct {
	decisions   metric.Int64Counter
	duration    metric.Float64Histogram
	errors      metric.Int64Counter
	changes     metric.Int64Counter
	cleanupRuns metric.Int64Counter
	cleanupKeys metric.Int64Counter
	reg         metric.Registration
	tracer      trace.Tracer // nil: no spans

	degraded [numProviders]atomic.Int64

	// decisionOpts caches the attribute set of each combination of a
	// decision's attributes without a limit name or key.
	decisionOpts [numProviders][2][len(outcomes)][2][numSources][]metric.AddOption
	// opts caches other attribute sets (sets' limit names, durations,
	// errors): optKey → []metric.AddOption (or []metric.RecordOption).
	opts sync.Map

	maxKeys int
	keyMu   sync.Mutex
	keys    map[string]struct{}
}

var _ limiter.Observer = (*Observer)(nil)

const numProviders = 4

var providers = [numProviders]string{"local", "redisabs", "redissup", "hybrid"}

func providerIndex(p string) int {
	switch p {
	case "local":
		return 0
	case "redisabs":
		return 1
	case "redissup":
		return 2
	case "hybrid":
		return 3
	}
	return -1
}

// New returns an Observer with its instruments created on the meter of
// ScopeName.
func New(opts ...Option) (*Observer, error) {
	o := options{}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	if o.mp == nil {
		o.mp = otel.GetMeterProvider()
	}
	m := o.mp.Meter(ScopeName)
	obs := &Observer{maxKeys: o.maxKeys}
	if o.tp != nil {
		obs.tracer = o.tp.Tracer(ScopeName)
	}
	if o.maxKeys > 0 {
		obs.keys = make(map[string]struct{})
	}
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	obs.decisions, err = m.Int64Counter("sluice.decisions", metric.WithUnit("{decision}"),
		metric.WithDescription("Decisions of rate limiters, by outcome."))
	add(err)
	obs.duration, err = m.Float64Histogram("sluice.backend.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of the Redis calls made for decisions."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	add(err)
	obs.errors, err = m.Int64Counter("sluice.backend.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Failed Redis calls, by error class."))
	add(err)
	obs.changes, err = m.Int64Counter("sluice.state_changes", metric.WithUnit("{change}"),
		metric.WithDescription("Redis providers entering (sluice.degraded=true) or leaving degraded mode."))
	add(err)
	obs.cleanupRuns, err = m.Int64Counter("sluice.cleanup.runs", metric.WithUnit("{run}"),
		metric.WithDescription("Runs of the cleanup loop."))
	add(err)
	obs.cleanupKeys, err = m.Int64Counter("sluice.cleanup.keys", metric.WithUnit("{key}"),
		metric.WithDescription("Keys the cleanup loop scanned, deleted or trimmed."))
	add(err)
	gauge, err := m.Int64ObservableGauge("sluice.degraded", metric.WithUnit("{limiter}"),
		metric.WithDescription("Limiters of each provider that uses Redis in degraded mode (answering by the failure policy)."))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("sluiceotel: %w", err)
	}
	gaugeOpts := [numProviders]metric.ObserveOption{}
	for i, p := range providers {
		gaugeOpts[i] = metric.WithAttributeSet(attribute.NewSet(AttrProvider.String(p)))
	}
	obs.reg, err = m.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
		for i := 1; i < numProviders; i++ { // the providers that use Redis
			ob.ObserveInt64(gauge, max(obs.degraded[i].Load(), 0), gaugeOpts[i])
		}
		return nil
	}, gauge)
	if err != nil {
		return nil, fmt.Errorf("sluiceotel: %w", err)
	}
	strategies := [2]string{"absolute", "suppressed"}
	for p := range providers {
		for s := range strategies {
			for oc := range outcomes {
				for a := 0; a < 2; a++ {
					for src := range sources {
						set := attribute.NewSet(AttrProvider.String(providers[p]), AttrStrategy.String(strategies[s]),
							AttrOutcome.String(outcomes[oc]), AttrAllowed.Bool(a == 1),
							AttrDegraded.Bool(sources[src] == "policy"), AttrSource.String(sources[src]))
						obs.decisionOpts[p][s][oc][a][src] = []metric.AddOption{metric.WithAttributeSet(set)}
					}
				}
			}
		}
	}
	return obs, nil
}

// Close unregisters the gauge's callback. The counters stay usable.
func (o *Observer) Close() error { return o.reg.Unregister() }

// outcomes are the values of AttrOutcome, in decisionOpts' order:
// "suppressed" when the suppressed strategy was above its soft target
// (Decision.Suppressed), else "allowed" or "rejected".
var outcomes = [...]string{"allowed", "rejected", "suppressed"}

// outcomeIndex is d's index in outcomes.
func outcomeIndex(d *limiter.Decision) int {
	switch {
	case d.Suppressed:
		return 2
	case d.Allowed:
		return 0
	}
	return 1
}

// sources are the values of AttrSource, in decisionOpts' order.
var sources = [...]string{"local", "redis", "memory", "policy", "shed"}

const numSources = len(sources)

// sourceIndex is src's index in sources.
func sourceIndex(src string) int {
	for i, s := range sources {
		if s == src {
			return i
		}
	}
	return 0
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ObserveDecision counts the decision and records its Redis call.
func (o *Observer) ObserveDecision(ctx context.Context, e limiter.DecisionEvent) {
	o.decisions.Add(ctx, 1, o.decisionAttrs(&e)...)
	if !e.Backend {
		return
	}
	o.duration.Record(ctx, e.Duration.Seconds(), o.callAttrs(e.Provider, e.Op, e.ErrorClass)...)
	if o.tracer != nil {
		o.span(ctx, &e)
	}
}

// decisionAttrs returns the attributes of a decision.
func (o *Observer) decisionAttrs(e *limiter.DecisionEvent) []metric.AddOption {
	p, s, oc := providerIndex(e.Provider), 0, outcomeIndex(&e.Decision)
	if e.Strategy == "suppressed" {
		s = 1
	}
	policy, src := e.Policy, sourceIndex(e.Source)
	if p >= 0 && policy == "" && o.maxKeys == 0 {
		return o.decisionOpts[p][s][oc][b2i(e.Decision.Allowed)][src]
	}
	attrs := []attribute.KeyValue{AttrProvider.String(e.Provider), AttrStrategy.String(e.Strategy),
		AttrOutcome.String(outcomes[oc]), AttrAllowed.Bool(e.Decision.Allowed),
		AttrDegraded.Bool(e.Decision.Degraded), AttrSource.String(sources[src])}
	if policy != "" {
		attrs = append(attrs, AttrLimit.String(policy))
	}
	if o.maxKeys > 0 {
		attrs = append(attrs, AttrKey.String(o.boundedKey(e.Key)))
		return []metric.AddOption{metric.WithAttributes(attrs...)}
	}
	k := optKey{kind: 'd', a: e.Provider, b: e.Strategy, c: policy,
		d: byte(oc<<4 | b2i(e.Decision.Allowed)<<3 | src)}
	if v, ok := o.opts.Load(k); ok {
		return v.([]metric.AddOption)
	}
	v := []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
	o.opts.Store(k, v)
	return v
}

// optKey identifies a cached attribute set.
type optKey struct {
	kind    byte
	a, b, c string
	d       byte
}

// callAttrs returns the attributes of a Redis call.
func (o *Observer) callAttrs(provider, op, class string) []metric.RecordOption {
	k := optKey{kind: 'c', a: provider, b: op, c: class}
	if v, ok := o.opts.Load(k); ok {
		return v.([]metric.RecordOption)
	}
	attrs := []attribute.KeyValue{AttrProvider.String(provider), AttrOperation.String(op)}
	if class != "" {
		attrs = append(attrs, AttrErrorType.String(class))
	}
	v := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
	o.opts.Store(k, v)
	return v
}

// errorAttrs returns the attributes of a failed Redis call.
func (o *Observer) errorAttrs(provider, op, class string) []metric.AddOption {
	k := optKey{kind: 'e', a: provider, b: op, c: class}
	if v, ok := o.opts.Load(k); ok {
		return v.([]metric.AddOption)
	}
	v := []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
		AttrProvider.String(provider), AttrOperation.String(op), AttrErrorType.String(class)))}
	o.opts.Store(k, v)
	return v
}

// boundedKey returns k while fewer than maxKeys distinct keys have been
// seen, or k was among them, and OtherKey beyond.
func (o *Observer) boundedKey(k string) string {
	o.keyMu.Lock()
	defer o.keyMu.Unlock()
	if _, ok := o.keys[k]; ok {
		return k
	}
	if len(o.keys) < o.maxKeys {
		o.keys[k] = struct{}{}
		return k
	}
	return OtherKey
}

// span records the Redis call of a decision as a client span.
func (o *Observer) span(ctx context.Context, e *limiter.DecisionEvent) {
	_, sp := o.tracer.Start(ctx, "sluice."+e.Op,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(e.Start),
		trace.WithAttributes(AttrDBSystem.String("redis"), AttrProvider.String(e.Provider),
			AttrOperation.String(e.Op), AttrOutcome.String(outcomes[outcomeIndex(&e.Decision)]),
			AttrAllowed.Bool(e.Decision.Allowed), AttrDegraded.Bool(e.Decision.Degraded),
			AttrSource.String(e.Source)))
	if e.ErrorClass != "" {
		sp.SetAttributes(AttrErrorType.String(e.ErrorClass))
		sp.SetStatus(codes.Error, e.ErrorClass)
	}
	if p := e.Policy; p != "" {
		sp.SetAttributes(AttrLimit.String(p))
	}
	sp.End(trace.WithTimestamp(e.Start.Add(e.Duration)))
}

// ObserveEvent counts failed calls, state changes and cleanup runs.
func (o *Observer) ObserveEvent(ctx context.Context, e limiter.Event) {
	switch e.Kind {
	case "backend_error":
		o.errors.Add(ctx, 1, o.errorAttrs(e.Provider, e.Op, e.ErrorClass)...)
	case "state_change":
		if i := providerIndex(e.Provider); i >= 0 {
			if e.State.Degraded {
				o.degraded[i].Add(1)
			} else {
				o.degraded[i].Add(-1)
			}
		}
		o.changes.Add(ctx, 1, metric.WithAttributes(AttrProvider.String(e.Provider), AttrDegraded.Bool(e.State.Degraded)))
	case "cleanup":
		r := e.Cleanup
		if r.Err != nil {
			class := r.ErrorClass
			if class == "" {
				class = "other"
			}
			o.cleanupRuns.Add(ctx, 1, metric.WithAttributes(AttrErrorType.String(class)))
		} else {
			o.cleanupRuns.Add(ctx, 1)
		}
		for _, a := range [...]struct {
			action string
			n      int64
		}{{"scanned", r.Scanned}, {"deleted", r.Deleted}, {"trimmed", r.Trimmed}} {
			o.cleanupKeys.Add(ctx, a.n, metric.WithAttributes(AttrCleanupAction.String(a.action)))
		}
	}
}
