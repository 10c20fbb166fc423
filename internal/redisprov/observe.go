// What the guard tells: the observer's events, and without an observer
// the default log (slog.Default(), read at each record) with its
// warnings: the first failed call, outages, shed calls, and a
// maxmemory-policy that evicts.

package redisprov

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

// ErrorClass sorts the error of a Redis call made with the caller's ctx
// into the classes of window.ErrorTimeout and friends; "" for errors that
// are not the backend's (bad input, ErrClosed), which no event reports.
func ErrorClass(ctx context.Context, err error) string {
	var re redis.Error
	switch {
	case notBackend(err):
		return ""
	case ctx.Err() != nil, errors.Is(err, context.Canceled):
		return window.ErrorCanceled
	case !Unavailable(err):
		return window.ErrorReply
	case TimedOut(err):
		return window.ErrorTimeout
	case errors.As(err, &re):
		return window.ErrorUnavailable
	}
	return window.ErrorConnection
}

// opNames are the observer's names of the operations.
var opNames = map[string]string{"inc": window.OpInc, "is allowed": window.OpIsAllowed, "inc set": window.OpIncSet,
	"get": window.OpGet, "reset": window.OpReset, "get set": window.OpGetSet, "reset set": window.OpResetSet}

func (g *Guard) strategyName() string {
	if g.b.sup {
		return window.StrategySuppressed
	}
	return window.StrategyAbsolute
}

// timing records the Redis call of one observed decision; a nil timing
// records nothing.
type timing struct {
	asked bool
	start time.Time
	took  time.Duration
	err   error
}

func (t *timing) begin() {
	if t != nil {
		t.asked, t.start = true, time.Now()
	}
}

// end ends a timed call; a decision from memory did not ask Redis.
func (t *timing) end(err error) {
	switch {
	case t == nil:
	case err == ErrRemembered:
		*t = timing{}
	default:
		t.took, t.err = time.Since(t.start), err
	}
}

// decideObserved is decide with an observer: a failed Redis call is
// reported as a backend error Event, and the decision as a DecisionEvent.
func (g *Guard) decideObserved(ctx context.Context, a *ask, d *limiter.SetDecision) error {
	var t timing
	err := g.decide(ctx, a, d, &t)
	class := ""
	if t.asked {
		class = g.observeErr(ctx, a.op, t.err, t.took)
	}
	if err != nil {
		return err
	}
	e := limiter.DecisionEvent{Provider: g.b.pkg, Strategy: g.strategyName(), Op: opNames[a.op], Key: a.k, Cost: a.n,
		Decision: d.Decision, Limits: d.Limits, Backend: t.asked, ErrorClass: class,
		Source: window.DecisionSource(g.b.pkg, &d.Decision, t.asked), Policy: window.DecisionPolicy(d.Limits)}
	if t.asked {
		e.Start, e.Duration = t.start, t.took
	}
	g.cfg.Observer.ObserveDecision(ctx, e)
	return nil
}

// observeErr reports a failed Redis call that took took (0: not timed),
// and returns its ErrorClass.
func (g *Guard) observeErr(ctx context.Context, op string, err error, took time.Duration) string {
	class := ErrorClass(ctx, err)
	if obs := g.cfg.Observer; obs != nil && class != "" {
		obs.ObserveEvent(ctx, limiter.Event{Kind: window.EventBackendError, Provider: g.b.pkg, Op: opNames[op],
			ErrorClass: class, Err: err, Duration: took})
	}
	return class
}

// Observe reports a decision made without asking Redis (a hybrid lease, a
// remembered refusal) to the observer, if any. It inlines; observeLocal
// does the work.
func (g *Guard) Observe(ctx context.Context, op, k string, n int64, d limiter.Decision) {
	if g.cfg.Observer != nil {
		g.observeLocal(ctx, op, k, n, d)
	}
}

func (g *Guard) observeLocal(ctx context.Context, op, k string, n int64, d limiter.Decision) {
	g.cfg.Observer.ObserveDecision(ctx, limiter.DecisionEvent{Provider: g.b.pkg, Strategy: g.strategyName(), Op: opNames[op],
		Key: k, Cost: n, Decision: d, Source: window.DecisionSource(g.b.pkg, &d, false)})
}

// notify reports a state change to the log and the observer.
func (g *Guard) notify(sc limiter.StateChange) {
	sc.Provider, sc.Policy = g.b.pkg, g.cfg.Policy
	g.logStateChange(sc)
	if obs := g.cfg.Observer; obs != nil {
		obs.ObserveEvent(context.Background(), limiter.Event{Kind: window.EventStateChange, Provider: sc.Provider, State: sc})
	}
}

// The log logs each outage (entering and leaving, as a pair) up to
// logBurst outages and then one per logEvery, so that a flapping Redis
// cannot flood it; the next one logged counts those left out.
const (
	logBurst     = 5
	logEvery     = time.Minute
	shedLogEvery = 10 * time.Second // the most often shed calls are logged
)

// logState is what a guard's log remembers.
type logState struct {
	failed     atomic.Bool // the first failure was logged
	mu         sync.Mutex
	logged     bool      // the current outage's entry was logged
	used       float64   // of the logBurst outages, those logged, less one per logEvery since
	at         time.Time // when used was last updated
	suppressed int       // outages left out since the last one logged
}

// logger is the guard's log: slog.Default(), nil under WithObserver (the
// observer is then the one channel), or window.WithLogger's.
func (g *Guard) logger() *slog.Logger {
	if g.cfg.LoggerSet {
		return g.cfg.Logger
	}
	if g.cfg.ObserverSet {
		return nil
	}
	return slog.Default()
}

// warn logs a warning of g's, if g logs.
func (g *Guard) warn(msg string, args ...any) {
	if l := g.logger(); l != nil {
		l.Warn("sluice: "+msg, append([]any{"provider", g.b.pkg}, args...)...)
	}
}

// logFailure logs the limiter's first failed Redis call, once, so that a
// wrong address or password is heard even without an outage.
func (g *Guard) logFailure(op string, err error) {
	if notBackend(err) || g.log.failed.Load() || !g.log.failed.CompareAndSwap(false, true) {
		return
	}
	g.warn("first failed Redis call of this limiter", "op", op, "addr", Addr(g.b.Client), "error", err)
}

// logStateChange logs sc within the rate limit: an outage's entry when
// the budget allows it, its exit (or Close) when its entry was logged.
func (g *Guard) logStateChange(sc limiter.StateChange) {
	l := g.logger()
	if l == nil {
		return
	}
	s := &g.log
	s.mu.Lock()
	log, left := s.logged, 0
	if sc.Degraded {
		now := time.Now()
		s.used = max(0, s.used-float64(now.Sub(s.at))/float64(logEvery))
		s.at = now
		if log = s.used <= logBurst-1; log {
			s.used++
			left, s.suppressed = s.suppressed, 0
		} else {
			s.suppressed++
		}
	}
	s.logged = sc.Degraded && log
	s.mu.Unlock()
	if log {
		window.LogStateChange(context.Background(), l, sc)
	}
	if left > 0 {
		l.Warn("sluice: outages not logged (at most one a minute after five)", "provider", sc.Provider, "outages", left)
	}
}

// noteShed counts a shed call and, at most once per shedLogEvery, logs
// how many were shed since the last record.
func (g *Guard) noteShed() {
	n := g.shed.Add(1)
	if g.logger() == nil {
		return
	}
	now := time.Now().UnixNano()
	last := g.shedLogAt.Load()
	if last != 0 && now-last < int64(shedLogEvery) || !g.shedLogAt.CompareAndSwap(last, now) {
		return
	}
	prev := g.shedLogged.Swap(n)
	g.warn("calls shed: their budget ran out while Redis was not known to be down (a busy client, not an outage)",
		"shed", n-prev, "total", n)
}

// checkEviction warns, once per limiter, when the server's
// maxmemory-policy can evict keys (an evicted hash starts again from
// empty); a server refusing CONFIG or not answering is not checked. It
// asks on the probe's client when there is one, so its dials are not the
// callers'.
func (g *Guard) checkEviction(ctx context.Context) {
	var c any = g.b.Client
	if g.own != nil {
		c = g.own.client()
	}
	cg, ok := c.(interface {
		ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
	})
	if !ok || g.evictWarned.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	m, err := cg.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return
	}
	policy := m["maxmemory-policy"]
	if p := strings.ToLower(policy); p == "" || p == "noeviction" || !g.evictWarned.CompareAndSwap(false, true) {
		return
	}
	g.warn("Redis may evict the limiter's counts under memory pressure (an evicted key starts again from empty and admits up to its capacity more); use maxmemory-policy noeviction",
		"addr", Addr(g.b.Client), "maxmemory-policy", policy)
}

// firstCall starts the eviction check in the background at the limiter's
// first decision: one atomic load per call.
func (g *Guard) firstCall() {
	if g.evictAsked.Load() || !g.evictAsked.CompareAndSwap(false, true) {
		return
	}
	g.background(func() { g.checkEviction(g.stopCtx) })
}

// Addr is the address a client dials, for errors and logs: a client's
// Addr, or a cluster's or ring's addresses joined by commas; what the
// Addr method of another client returns (the rueidis adapter has one);
// "" for a client it cannot inspect.
func Addr(c any) string {
	switch c := c.(type) {
	case interface{ Addr() string }:
		return c.Addr()
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	case *redis.Ring:
		addrs := make([]string, 0, len(c.Options().Addrs))
		for _, a := range c.Options().Addrs {
			addrs = append(addrs, a)
		}
		return strings.Join(addrs, ",")
	}
	return ""
}

// Ping asks Redis what the probe asks, whatever the breaker's state,
// bounded by the timeout (1 s when it is 0) on top of ctx, and opens and
// closes nothing. It returns nil when Redis answered, else an error
// naming the operation and the address, wrapping Redis's error. A Redis
// that answers is checked for eviction (checkEviction).
func (g *Guard) Ping(ctx context.Context) error {
	if g.stopCtx.Err() != nil { // closed
		return fmt.Errorf("%s: ping: %w", g.b.pkg, limiter.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, g.probeDeadline())
	defer cancel()
	if err := g.probeBy(ctx); err != nil {
		return PingError(g.b.pkg, g.b.Client, err)
	}
	g.evictAsked.Store(true)
	g.checkEviction(ctx)
	return nil
}

// PingError is the error of a failed start-up check of package pkg on
// client: "<pkg>: ping <addr>: <err>" (the address left out when the
// client cannot say it).
func PingError(pkg string, client any, err error) error {
	if a := Addr(client); a != "" {
		return fmt.Errorf("%s: ping %s: %w", pkg, a, err)
	}
	return fmt.Errorf("%s: ping: %w", pkg, err)
}
