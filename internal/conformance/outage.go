package conformance

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// RunOutage checks that a stopped or a frozen Redis gives every call of a
// Redis provider a wrapped error ("<pkg>: <op>: …", with the network error
// (or io.EOF, the connection's end) or the context's deadline reachable
// through errors.As and errors.Is)
// within the context's deadline, and no panic. newLimiter builds the provider on the given client.
// The calling package's TestMain must run redistest.Main.
func RunOutage(t *testing.T, pkg string, newLimiter func(t *testing.T, c *redis.Client) limiter.Limiter) {
	const deadline = 500 * time.Millisecond
	ctx := context.Background()
	check := func(t *testing.T, l limiter.Limiter) {
		t.Helper()
		calls := []struct {
			op string
			f  func(context.Context) error
		}{
			{"inc", func(ctx context.Context) error { _, err := l.Inc(ctx, "k", limiter.PerMinute(10), 1); return err }},
			{"is allowed", func(ctx context.Context) error { _, err := l.IsAllowed(ctx, "k"); return err }},
			{"get", func(ctx context.Context) error { _, err := l.Get(ctx, "k"); return err }},
			{"reset", func(ctx context.Context) error { return l.Reset(ctx, "k") }},
		}
		for _, c := range calls {
			cctx, cancel := context.WithTimeout(ctx, deadline)
			start := time.Now()
			err := c.f(cctx)
			took := time.Since(start)
			callerDone := cctx.Err() != nil
			cancel()
			want := pkg + ": " + c.op + ": "
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%s with Redis down: error %v, want one starting %q", c.op, err, want)
			}
			// Wrapped, not just named: the cause stays reachable. A
			// client that does not redial before it answers (rueidis)
			// returns the end of the connection it had: io.EOF.
			var ne net.Error
			if err != nil && !errors.As(err, &ne) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, io.EOF) {
				t.Errorf("%s with Redis down: error %v wraps neither a network error, the connection's end nor the context's deadline", c.op, err)
			}
			// Get and Reset have no decision to mark: an outage is
			// ErrUnavailable, wrapping the wire's error (the caller's
			// own deadline is the context's error).
			if (c.op == "get" || c.op == "reset") && !callerDone && !errors.Is(err, limiter.ErrUnavailable) {
				t.Errorf("%s with Redis down: error %v, want limiter.ErrUnavailable", c.op, err)
			}
			t.Logf("%s: %v after %v", c.op, err, took)
			if took > deadline+250*time.Millisecond {
				t.Errorf("%s with Redis down took %v, deadline %v", c.op, took, deadline)
			}
		}
	}
	mustInc := func(t *testing.T, l limiter.Limiter) {
		t.Helper()
		if _, err := l.Inc(ctx, "k", limiter.PerMinute(10), 1); err != nil {
			t.Fatalf("Inc before the outage: %v", err)
		}
	}
	t.Run("Stopped", func(t *testing.T) {
		srv := redistest.StartServer(t)
		l := newLimiter(t, srv.Client(t))
		mustInc(t, l)
		srv.Stop()
		check(t, l)
	})
	t.Run("Frozen", func(t *testing.T) {
		srv := redistest.StartServer(t)
		opt := srv.Options()
		opt.ContextTimeoutEnabled = true // let ctx bound socket reads, as the providers' docs advise
		opt.MaxRetries = -1
		c := redis.NewClient(opt)
		t.Cleanup(func() { c.Close() })
		l := newLimiter(t, c)
		mustInc(t, l)
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		defer srv.Resume()
		check(t, l)
	})
}
