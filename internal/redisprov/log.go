package redisprov

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/internal/window"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/limiter"
)

// Logging is loud by default: without WithObserver a guard logs through
// slog.Default() (read at each record, so a program that sets its default
// logger after New is heard). It logs a limiter's first failed Redis call
// once, and each outage (entering and leaving degraded mode, as a pair) up
// to logBurst outages and then one per logEvery, so that a flapping Redis
// cannot flood the log; the outages left out are counted in the next one
// logged. An observer, when given, replaces this log and sees every
// transition.
const (
	logBurst = 5
	logEvery = time.Minute
)

// logState is what a guard's logging remembers.
type logState struct {
	failed     atomic.Bool // the first failure was logged
	mu         sync.Mutex
	logged     bool      // the current outage's entry was logged
	credit     float64   // outages that may be logged now, up to logBurst
	at         time.Time // when credit was last topped up
	suppressed int       // outages left out since the last one logged
}

// logger is the guard's logger: slog.Default(), or nil when WithObserver
// was given (the observer is then the one channel), or window.WithLogger's
// in the tests of this log.
func (g *Guard) logger() *slog.Logger {
	if g.cfg.LoggerSet {
		return g.cfg.Logger
	}
	if g.cfg.ObserverSet {
		return nil
	}
	return slog.Default()
}

// logFailure logs the first failed Redis call of the limiter, once: the
// error, the operation and the address, so that a wrong address or a
// refused password is heard even before (or without) an outage. Errors
// that are not the backend's (bad input, ErrClosed) are not failures.
func (g *Guard) logFailure(op string, err error) {
	if notBackend(err) {
		return
	}
	if g.log.failed.Load() || !g.log.failed.CompareAndSwap(false, true) {
		return
	}
	if l := g.logger(); l != nil {
		l.Warn("sluice: first failed Redis call of this limiter",
			"provider", g.pkg, "op", op, "addr", Addr(g.client), "error", err)
	}
}

// logStateChange logs sc within the rate limit: an outage's entry when the
// budget allows it, its exit (or Close) when its entry was logged.
func (g *Guard) logStateChange(sc limiter.StateChange) {
	l := g.logger()
	if l == nil {
		return
	}
	s := &g.log
	s.mu.Lock()
	if !sc.Degraded {
		ok := s.logged
		s.logged = false
		s.mu.Unlock()
		if ok {
			window.LogStateChange(context.Background(), l, sc)
		}
		return
	}
	now := time.Now()
	if s.at.IsZero() {
		s.credit = logBurst
	} else {
		s.credit = min(logBurst, s.credit+float64(now.Sub(s.at))/float64(logEvery))
	}
	s.at = now
	if s.credit < 1 {
		s.suppressed++
		s.mu.Unlock()
		return
	}
	s.credit--
	s.logged = true
	left := s.suppressed
	s.suppressed = 0
	s.mu.Unlock()
	window.LogStateChange(context.Background(), l, sc)
	if left > 0 {
		l.Warn("sluice: outages not logged (at most one a minute after five)",
			"provider", sc.Provider, "outages", left)
	}
}

// Addr is the address a client dials, for errors and logs: a client's
// Addr, or a cluster's or ring's addresses joined by commas; for a client
// that is not go-redis', what its Addr method returns (the rueidis
// adapter has one); "" for a client it cannot inspect.
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

// Ping asks Redis what the probe asks (a script call that writes one unit
// to the probe's own key), whatever the breaker's state, bounded by the
// timeout (1 s when it is 0) on top of ctx. It returns nil when Redis
// answered, else an error naming the operation and the address, wrapping
// Redis's error; it opens and closes nothing. A Redis that answers and
// whose maxmemory-policy can evict the limiter's keys is warned about
// through the logger (evict.go). A provider's Ping is this.
func (g *Guard) Ping(ctx context.Context) error {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return fmt.Errorf("%s: ping: %w", g.pkg, limiter.ErrClosed)
	}
	to := g.cfg.Timeout
	if to <= 0 {
		to = probeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	if err := g.probeBy(ctx); err != nil {
		return PingError(g.pkg, g.client, err)
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
