package faults

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

// Pinger is a provider's start-up check.
type Pinger interface {
	Ping(ctx context.Context) error
}

// capture is a slog handler that keeps the records it is given.
type capture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, r.Clone())
	c.mu.Unlock()
	return nil
}
func (c *capture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capture) WithGroup(string) slog.Handler      { return c }

// lines returns the records as "LEVEL message k=v …", those whose text
// holds want only ("" for all).
func (c *capture) lines(want string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, r := range c.recs {
		var b strings.Builder
		b.WriteString(r.Level.String() + " " + r.Message)
		r.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.String())
			return true
		})
		if s := b.String(); strings.Contains(s, want) {
			out = append(out, s)
		}
	}
	return out
}

// onDeadAddress builds the provider on a loopback address nothing
// listens on, with opts, while slog.Default() writes to the capture it
// returns (until the test ends).
func onDeadAddress(t *testing.T, newLimiter NewLimiter, opts ...limiter.Option) (limiter.Limiter, string, *capture) {
	t.Helper()
	h := &capture{}
	prev := slog.Default()
	slog.SetDefault(slog.New(h))
	t.Cleanup(func() { slog.SetDefault(prev) })
	c := redistest.DeadClient(t)
	l := newLimiter(t, c, append([]limiter.Option{limiter.WithPrefix(redistest.Prefix(t))}, opts...)...)
	t.Cleanup(func() { l.Close(context.Background()) })
	return l, c.Options().Addr, h
}

// RunLoud checks that a misconfiguration is loud: a limiter on a dead
// address, built with default options, warns through slog.Default() on
// its first failed call and its Ping returns an error naming the address;
// WithLogger(nil) silences it; a flapping Redis logs at most five
// outages a minute. The provider must implement Pinger.
func RunLoud(t *testing.T, newLimiter NewLimiter) {
	t.Run("DeadAddressWarnsByDefault", func(t *testing.T) { runDeadAddress(t, newLimiter) })
	t.Run("WithLoggerNilIsSilent", func(t *testing.T) { runSilent(t, newLimiter) })
	t.Run("FlappingIsRateLimited", func(t *testing.T) { runFlapping(t, newLimiter) })
	t.Run("PingHealthy", func(t *testing.T) {
		_, c := redistest.Mini(t)
		l := newLimiter(t, c, limiter.WithPrefix(redistest.Prefix(t)))
		defer l.Close(context.Background())
		if err := l.(Pinger).Ping(context.Background()); err != nil {
			t.Errorf("Ping on a healthy Redis: %v", err)
		}
	})
}

func runDeadAddress(t *testing.T, newLimiter NewLimiter) {
	ctx := context.Background()
	l, addr, h := onDeadAddress(t, newLimiter)
	start := time.Now()
	err := l.(Pinger).Ping(ctx)
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "ping") {
		t.Errorf("Ping on a dead address = %v, want an error naming %s", err, addr)
	}
	t.Logf("Ping: %v after %v", err, time.Since(start).Round(time.Millisecond))
	if got := h.lines(addr); len(got) != 0 {
		t.Errorf("Ping logged %q; want its error returned, not logged", got)
	}

	// The first call is degraded when the client's refused dial reaches
	// sluice within the timeout, and shed (refused, not degraded) when the
	// client's dial retries outlast it: a timeout alone is no evidence
	// until the confirming probe fails too.
	d, err := l.Inc(ctx, "k", limiter.PerSecond(10), 1)
	if err != nil || !d.Degraded && !(d.Shed && !d.Allowed) {
		t.Fatalf("Inc on a dead address = %+v, %v; want degraded (FallbackLocal) or shed", d, err)
	}
	// The first failure is logged by the call itself, before it returns.
	warn := h.lines("first failed Redis call")
	if len(warn) != 1 || !strings.HasPrefix(warn[0], "WARN") || !strings.Contains(warn[0], "addr="+addr) {
		t.Fatalf("records after the first failed call = %q; want one warning naming %s", h.lines(""), addr)
	}
	// The outage is logged by the probe goroutine, soon after.
	deadline := time.Now().Add(5 * time.Second)
	for len(h.lines("Redis unavailable")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no degraded-mode warning within 5 s; records: %q", h.lines(""))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if d, err := l.Inc(ctx, "k", limiter.PerSecond(10), 1); err != nil || !d.Degraded {
		t.Errorf("Inc once the outage is logged = %+v, %v; want degraded (FallbackLocal)", d, err)
	}
	for i := 0; i < 99; i++ {
		l.Inc(ctx, "k", limiter.PerSecond(10), 1)
	}
	if n := len(h.lines("first failed Redis call")); n != 1 {
		t.Errorf("%d first-failure warnings after 101 calls, want 1", n)
	}
}

func runSilent(t *testing.T, newLimiter NewLimiter) {
	ctx := context.Background()
	rec := &recorder{ch: make(chan limiter.StateChange, 16)}
	l, addr, h := onDeadAddress(t, newLimiter, window.WithLogger(nil), limiter.WithObserver(window.StateObserver(rec.hook)))
	if _, err := l.Inc(ctx, "k", limiter.PerSecond(10), 1); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, true, 5*time.Second)
	l.Close(ctx)
	if got := h.lines(addr); len(got) != 0 {
		t.Errorf("WithLogger(nil) logged %q", got)
	}
}

func runFlapping(t *testing.T, newLimiter NewLimiter) {
	ctx := context.Background()
	mr, c := redistest.Mini(t)
	h := &capture{}
	rec := &recorder{ch: make(chan limiter.StateChange, 64)}
	l := newLimiter(t, c, limiter.WithPrefix(redistest.Prefix(t)), window.WithLogger(slog.New(h)),
		limiter.WithProbeInterval(2*time.Millisecond), limiter.WithObserver(window.StateObserver(rec.hook)))
	defer l.Close(ctx)
	const outages = 8
	for i := 0; i < outages; i++ {
		mr.SetError(loading)
		l.Inc(ctx, "k", limiter.PerSecond(10), 1)
		rec.wait(t, true, 3*time.Second)
		mr.SetError("")
		rec.wait(t, false, 3*time.Second)
	}
	entering, leaving := len(h.lines("Redis unavailable")), len(h.lines("Redis answers again"))
	t.Logf("%d outages: %d logged entering, %d leaving; %d state changes to the hook", outages, entering, leaving, rec.count())
	if entering != 5 || leaving != 5 {
		t.Errorf("%d outages in well under a minute logged %d entries and %d exits, want 5 each", outages, entering, leaving)
	}
	if n := rec.count(); n != 2*outages {
		t.Errorf("the hook saw %d state changes, want all %d", n, 2*outages)
	}
}
