package redisabs_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// TestTwoWindows: one limit name with two windows, and two limiters with
// two windows on one prefix, keep both bounds (limiter.ErrWindowConflict),
// on miniredis and a real server.
func TestTwoWindows(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	miniPair := func(t *testing.T, clk *conformance.Clock, o1, o2 []limiter.Option) (limiter.Limiter, limiter.Limiter) {
		mr, c := redistest.Mini(t)
		clk.Drive(mr)
		p := limiter.WithPrefix(redistest.Prefix(t))
		return newLimiter(t, c, append(o1, p)...), newLimiter(t, c, append(o2, p)...)
	}
	realPair := func(t *testing.T, clk *conformance.Clock, o1, o2 []limiter.Option) (limiter.Limiter, limiter.Limiter) {
		c := realClient(t)
		p := []limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithClock(clk.Now)}
		return newLimiter(t, c, append(o1, p...)...), newLimiter(t, c, append(o2, p...)...)
	}
	// Each pair has its own server or prefix: the two run in parallel.
	t.Run("Mini", func(t *testing.T) {
		t.Parallel()
		conformance.RunTwoWindowsMini(t, conformance.AbsoluteStrategy, onMini, miniPair)
	})
	t.Run("Real", func(t *testing.T) {
		t.Parallel()
		conformance.RunTwoWindows(t, conformance.AbsoluteStrategy, onReal, realPair)
	})
}

// TestLayoutError: a hash whose record names a layout this version does
// not read (a newer release on the prefix) fails the call with
// limiter.ErrLayout, and a live hash of another window with
// limiter.ErrWindowConflict; neither is taken for an outage.
func TestLayoutError(t *testing.T) {
	mr, c := redistest.Mini(t)
	prefix := redistest.Prefix(t)
	l := newLimiter(t, c, limiter.WithPrefix(prefix))
	h := hashOf(t, prefix, "k")
	at := time.UnixMilli(1_767_268_800_000)
	mr.SetTime(at)
	now := at.UnixMilli()
	c.HSet(ctx, h, "m", fmt.Sprintf("10 1 %d %d 1", now, now), "v", "a3 60000 600")
	if _, err := l.Inc(ctx, "k", limiter.PerMinute(10), 1); !errors.Is(err, limiter.ErrLayout) {
		t.Fatalf("Inc on a layout-3 hash = %v, want ErrLayout", err)
	}
	c.HSet(ctx, h, "v", "a2 3600000 36000")
	_, err := l.Inc(ctx, "k", limiter.PerMinute(10), 1)
	if !errors.Is(err, limiter.ErrWindowConflict) || !strings.Contains(err.Error(), "stored window 3600000 ms, bucket 36000 ms; the call's window 60000 ms, bucket 600 ms") {
		t.Fatalf("Inc on a live hash of an hour's window = %v, want ErrWindowConflict naming both", err)
	}
	if _, err := l.Get(ctx, "k"); !errors.Is(err, limiter.ErrWindowConflict) {
		t.Fatalf("Get = %v, want ErrWindowConflict", err)
	}
}
