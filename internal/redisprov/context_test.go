package redisprov

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/window"
)

func guardWithTimeout(t time.Duration) *Guard {
	return &Guard{cfg: &window.Config{Timeout: t}}
}

type ctxKey struct{}

// checkBound fails t unless ctx's deadline lies within [lo, hi] of start.
func checkBound(t *testing.T, ctx context.Context, start time.Time, lo, hi time.Duration) {
	t.Helper()
	dl, ok := ctx.Deadline()
	if !ok {
		t.Fatal("no deadline")
	}
	if d := dl.Sub(start); d < lo || d > hi {
		t.Fatalf("deadline %v after the call's start, want within [%v, %v]", d, lo, hi)
	}
}

// TestContextShared: a context that can never be cancelled gets the shared
// deadline, within timeout − timeout/SlackDiv and timeout of every call's
// start, with a Done that closes at the deadline and the caller's values.
func TestContextShared(t *testing.T) {
	const timeout = 80 * time.Millisecond
	g := guardWithTimeout(timeout)
	vctx := context.WithValue(context.Background(), ctxKey{}, "v")
	var first context.Context
	for i := 0; i < 50; i++ {
		for _, parent := range []context.Context{context.Background(), vctx, context.WithoutCancel(vctx)} {
			start := time.Now()
			ctx, cancel := g.Context(parent)
			// The deadline was set at most timeout/SlackDiv before this
			// call started (and after the previous one began).
			checkBound(t, ctx, start, timeout-timeout/SlackDiv-time.Millisecond, timeout+5*time.Millisecond)
			if ctx.Done() == nil {
				t.Fatal("Done is nil: the pool's wait would not be bounded")
			}
			if parent != context.Background() && ctx.Value(ctxKey{}) != "v" {
				t.Fatalf("Value = %v, want the caller's value", ctx.Value(ctxKey{}))
			}
			cancel()
			if err := ctx.Err(); err != nil {
				t.Fatalf("Err after cancel = %v: cancel must leave a shared deadline alone", err)
			}
			if first == nil {
				first = ctx
			}
		}
		time.Sleep(time.Millisecond)
	}
	// The first shared deadline ends by itself.
	select {
	case <-first.Done():
	case <-time.After(10 * timeout):
		t.Fatal("the shared deadline never closed Done")
	}
	if err := first.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want DeadlineExceeded", err)
	}
	if !Unavailable(first.Err()) {
		t.Fatal("the shared deadline's error does not count as unavailable")
	}
}

// TestContextCancellable: a context that can be cancelled gets a child of
// its own with the full timeout, which its cancellation ends.
func TestContextCancellable(t *testing.T) {
	const timeout = time.Second
	g := guardWithTimeout(timeout)
	parent, cancelParent := context.WithCancel(context.Background())
	start := time.Now()
	ctx, cancel := g.Context(parent)
	defer cancel()
	checkBound(t, ctx, start, timeout-10*time.Millisecond, timeout+10*time.Millisecond)
	cancelParent()
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("cancelling the caller's context did not end the call's")
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("Err = %v, want Canceled", ctx.Err())
	}
}

// TestContextSoonerDeadline: a caller's deadline within the timeout is used
// as it is; a later one is shortened to the timeout.
func TestContextSoonerDeadline(t *testing.T) {
	const timeout = time.Second
	g := guardWithTimeout(timeout)
	soon, cancel := context.WithTimeout(context.Background(), timeout/2)
	defer cancel()
	if ctx, _ := g.Context(soon); ctx != soon {
		t.Fatal("a sooner caller deadline was wrapped")
	}
	late, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	start := time.Now()
	ctx, c := g.Context(late)
	defer c()
	checkBound(t, ctx, start, timeout-10*time.Millisecond, timeout+10*time.Millisecond)
	// WithTimeout(0) is the subject here: it must leave the caller's
	// context as it is.
	if ctx, _ := guardWithTimeout(0).Context(late); ctx != late {
		t.Fatal("WithTimeout(0) wrapped the caller's context")
	}
}

// TestContextAllocs: the healthy path's per-call bound allocates nothing
// for context.Background() and one value for a context with values.
func TestContextAllocs(t *testing.T) {
	g := guardWithTimeout(250 * time.Millisecond)
	vctx := context.WithValue(context.Background(), ctxKey{}, "v")
	for _, tc := range []struct {
		name   string
		parent context.Context
		max    float64
	}{
		{"Background", context.Background(), 0},
		{"WithValue", vctx, 1},
	} {
		got := testing.AllocsPerRun(1000, func() {
			ctx, cancel := g.Context(tc.parent)
			select {
			case <-ctx.Done(): // as go-redis's pool does
			default:
			}
			cancel()
		})
		if got > tc.max {
			t.Errorf("%s: %v allocations per call, want at most %v", tc.name, got, tc.max)
		}
	}
}

// BenchmarkContext measures the per-call bound for each kind of caller
// context.
func BenchmarkContext(b *testing.B) {
	g := guardWithTimeout(250 * time.Millisecond)
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, bc := range []struct {
		name   string
		parent context.Context
	}{
		{"Background", context.Background()},
		{"WithValue", context.WithValue(context.Background(), ctxKey{}, "v")},
		{"Cancellable", cctx},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				ctx, cancel := g.Context(bc.parent)
				select {
				case <-ctx.Done(): // as go-redis's pool does
				default:
				}
				cancel()
			}
		})
	}
}
