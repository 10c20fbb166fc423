package redisprov

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// waiter is a Backend whose Decide does what its decide says instead of
// asking Redis: it stands for the local waits (a key's token, a batch
// slot, a CPU) in front of a call; the probe asks the real miniredis.
type waiter struct {
	b      Base
	decide func(ctx context.Context) error
}

func (w *waiter) Validate(op, k string, rate limiter.Rate, n int64, peek bool) (*Call, error) {
	return NewCall(&w.b, op, k, rate, n, peek)
}

func (w *waiter) Decide(ctx context.Context, k string, rate limiter.Rate, n int64, peek bool) (limiter.Decision, error) {
	return limiter.Decision{}, w.decide(ctx)
}

func (w *waiter) Usage(ctx context.Context, k string) (limiter.Usage, error) {
	return limiter.Usage{}, w.decide(ctx)
}

// newWaiter returns a guard on client with opts, and its backend.
func newWaiter(t *testing.T, client *redis.Client, decide func(ctx context.Context) error, opts ...limiter.Option) (*Guard, *waiter) {
	t.Helper()
	w := &waiter{decide: decide}
	if err := w.b.Init("redisabs", key.Absolute, client, append([]limiter.Option{limiter.WithPrefix(redistest.Prefix(t))}, opts...)); err != nil {
		t.Fatal(err)
	}
	g := &Guard{}
	g.Init(&w.b, nil, writeProbe(w.b.Cfg.Prefix+":probe"))
	t.Cleanup(func() { g.Close(context.Background()) })
	return g, w
}

// writeProbe is a probe that needs a write, as the providers' is: one
// INCR of h. The waiter admits nothing in a fallback, so its guard has
// nothing to write back.
func writeProbe(h string) func(ctx context.Context, client redis.Scripter) error {
	return func(ctx context.Context, client redis.Scripter) error {
		return client.Eval(ctx, "return redis.call('INCR', KEYS[1])", []string{h}).Err()
	}
}

// localWait waits until the call's budget ends, as a caller queued
// behind others does.
func localWait(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// idle waits until no confirming probe runs.
func idle(t *testing.T, g *Guard) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); g.confirming.Load(); {
		if time.Now().After(deadline) {
			t.Fatal("the confirming probe did not end")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLocalWaitIsShed: a call whose budget runs out waiting locally, on a
// healthy Redis, is shed under every policy (ErrShed under FailError),
// and the confirming probe keeps the breaker closed.
func TestLocalWaitIsShed(t *testing.T) {
	_, client := redistest.Mini(t)
	for _, pp := range redistest.Policies {
		p := pp.P
		t.Run(pp.Name, func(t *testing.T) {
			// A probe interval of 1 s gives the probe (which dials, and
			// loads the script into miniredis's Lua under the race
			// detector) a deadline that a healthy Redis always meets.
			g, w := newWaiter(t, client, localWait, limiter.WithTimeout(20*time.Millisecond), limiter.WithFailurePolicy(p),
				limiter.WithProbeInterval(time.Second))
			d, err := g.Decide(context.Background(), w, "inc", "k", limiter.PerSecond(10), 1, false)
			if p == limiter.FailError {
				if !errors.Is(err, limiter.ErrShed) {
					t.Fatalf("Inc = %+v, %v; want ErrShed", d, err)
				}
			} else if err != nil || d.Allowed || !d.Shed || d.Degraded || d.RetryAfter <= 0 || d.Suppressed {
				t.Fatalf("Inc = %+v, %v; want a shed refusal with a RetryAfter", d, err)
			}
			idle(t, g)
			if g.Open() || g.Confirmed() != 0 {
				t.Fatalf("breaker open %v after a local wait on a healthy Redis (confirmed %d)", g.Open(), g.Confirmed())
			}
			if g.ShedCount() != 1 {
				t.Fatalf("ShedCount = %d, want 1", g.ShedCount())
			}
		})
	}
}

// TestConfirmedTimeoutOpens: a timeout whose confirming probe fails opens
// the breaker; later calls are answered by the policy, marked Degraded.
func TestConfirmedTimeoutOpens(t *testing.T) {
	mr, client := redistest.Mini(t)
	// 200 ms: a probe during a stall of a quarter of the timeout is
	// inconclusive, and the race detector stalls for a few ms.
	g, w := newWaiter(t, client, localWait, limiter.WithTimeout(200*time.Millisecond))
	mr.Close() // the probe finds nobody
	d, err := g.Decide(context.Background(), w, "inc", "k", limiter.PerSecond(10), 1, false)
	if err != nil || !d.Shed {
		t.Fatalf("Inc = %+v, %v; want shed", d, err)
	}
	idle(t, g)
	if !g.Open() || g.Confirmed() != 1 {
		t.Fatalf("breaker open %v, confirmed %d; want opened by the probe", g.Open(), g.Confirmed())
	}
	if d, err := g.Decide(context.Background(), w, "inc", "k", limiter.PerSecond(10), 1, false); err != nil || !d.Degraded || !d.Allowed {
		t.Fatalf("Inc with the breaker open = %+v, %v; want admitted by the fallback", d, err)
	}
}

// TestStalledProbeRefused: a confirming probe whose dial is refused opens
// the breaker even when the process stalled while it ran. A stall makes a
// probe's timeout inconclusive, not the wire's own answer; before this
// rule a loaded CI machine left a dead Redis undetected (the test waiting
// for the state change hung).
func TestStalledProbeRefused(t *testing.T) {
	mr, client := redistest.Mini(t)
	g, w := newWaiter(t, client, localWait, limiter.WithTimeout(50*time.Millisecond))
	g.stallFloor = time.Hour // every probe ran during a stall
	mr.Close()
	if d, err := g.Decide(context.Background(), w, "inc", "k", limiter.PerSecond(10), 1, false); err != nil || !d.Shed {
		t.Fatalf("Inc = %+v, %v; want shed", d, err)
	}
	idle(t, g)
	if !g.Open() || g.Confirmed() != 1 {
		t.Fatalf("breaker open %v, confirmed %d; want opened by the refused probe", g.Open(), g.Confirmed())
	}
}

// TestStalledProbeTimeoutInconclusive: a confirming probe that times out
// while the process stalled opens nothing.
func TestStalledProbeTimeoutInconclusive(t *testing.T) {
	_, client := redistest.Mini(t)
	g, w := newWaiter(t, client, localWait, limiter.WithTimeout(50*time.Millisecond))
	g.stallFloor = time.Hour
	g.probe = func(ctx context.Context, _ redis.Scripter) error { <-ctx.Done(); return ctx.Err() }
	if d, err := g.Decide(context.Background(), w, "inc", "k", limiter.PerSecond(10), 1, false); err != nil || !d.Shed {
		t.Fatalf("Inc = %+v, %v; want shed", d, err)
	}
	idle(t, g)
	if g.Open() || g.Confirmed() != 0 {
		t.Fatalf("breaker open %v, confirmed %d; want closed (a stalled probe's timeout is inconclusive)", g.Open(), g.Confirmed())
	}
}

// TestWireEvidenceOpens: a refused connection opens the breaker at once,
// without a probe, and the call is answered by the policy.
func TestWireEvidenceOpens(t *testing.T) {
	_, client := redistest.Mini(t)
	refused := func(context.Context) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	g, w := newWaiter(t, client, refused)
	d, err := g.Decide(context.Background(), w, "inc", "k", limiter.PerSecond(10), 1, false)
	if err != nil || !d.Degraded || d.Shed {
		t.Fatalf("Inc = %+v, %v; want answered by the fallback", d, err)
	}
	if !g.Open() || g.Confirmed() != 0 {
		t.Fatalf("breaker open %v, confirmed %d; want opened by the error itself", g.Open(), g.Confirmed())
	}
}

// TestBoundOnAnyClient: on a client without ContextTimeoutEnabled, a call
// that ignores its context (a socket read without a deadline) returns at
// the budget; it finishes in the background and leaves no count behind.
func TestBoundOnAnyClient(t *testing.T) {
	_, client := redistest.Mini(t)
	if client.Options().ContextTimeoutEnabled {
		t.Fatal("the test needs a client that ignores context deadlines")
	}
	release := make(chan struct{})
	stuck := func(context.Context) error { <-release; return nil }
	g, w := newWaiter(t, client, stuck, limiter.WithTimeout(30*time.Millisecond))
	start := time.Now()
	d, err := g.Decide(context.Background(), w, "inc", "k", limiter.PerSecond(10), 1, false)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Inc took %v with a timeout of 30ms", took)
	}
	if err != nil || !d.Shed {
		t.Fatalf("Inc = %+v, %v; want shed", d, err)
	}
	if n := g.Abandoned(); n != 1 {
		t.Fatalf("Abandoned = %d, want 1", n)
	}
	close(release)
	for deadline := time.Now().Add(5 * time.Second); g.Abandoned() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Abandoned = %d after the call ended, want 0", g.Abandoned())
		}
	}
}

// TestOpenedWakesWaiters: Opened is closed when the breaker opens, and a
// fresh one is open again after it closes.
func TestOpenedWakesWaiters(t *testing.T) {
	_, client := redistest.Mini(t)
	g, _ := newWaiter(t, client, localWait)
	ch := g.Opened()
	g.trip(errors.New("test"))
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("Opened not closed when the breaker opened")
	}
	for deadline := time.Now().Add(5 * time.Second); g.Open(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the breaker did not close on a healthy Redis")
		}
	}
	select {
	case <-g.Opened():
		t.Fatal("Opened closed while the breaker is closed")
	default:
	}
}
