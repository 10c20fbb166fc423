// What the wire says: the errors that open the breaker, the confirming
// probe of a timeout, and the probe itself.

package redisprov

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

// verdict is what a failed Redis call of a decision leads to.
type verdict int

const (
	vReturn verdict = iota // return the error to the caller
	vPolicy                // the breaker is open: the policy answers
	vShed                  // refuse the call as shed
)

// unavailableReplies are the Redis error codes that mean the server cannot
// serve now, as opposed to a bad command.
var unavailableReplies = [...]string{"LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "OOM"}

// Unavailable reports whether err means Redis could not be asked: a
// connection refused, reset or closed, a timeout, or one of
// unavailableReplies. Bad input, ErrClosed, a cancelled context and other
// replies are not. Check the caller's own context first: Unavailable
// cannot tell its deadline from the timeout's.
func Unavailable(err error) bool {
	switch {
	case notBackend(err), errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE):
		return true
	}
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		for _, code := range unavailableReplies {
			if strings.HasPrefix(msg, code) && (len(msg) == len(code) || msg[len(code)] == ' ') {
				return true
			}
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// notBackend reports whether err is no error of the backend's: nil, a
// closed limiter, bad input, or a call that waited locally.
func notBackend(err error) bool {
	return err == nil ||
		errors.Is(err, ErrOpened) ||
		errors.Is(err, ErrBehindFailure) ||
		errors.Is(err, limiter.ErrClosed) ||
		errors.Is(err, limiter.ErrInvalidRate) ||
		errors.Is(err, limiter.ErrInvalidConfig) ||
		errors.Is(err, limiter.ErrInvalidCost) ||
		errors.Is(err, limiter.ErrCapacityTooSmall) ||
		errors.Is(err, limiter.ErrWindowConflict) ||
		errors.Is(err, limiter.ErrLayout) ||
		errors.Is(err, key.ErrInvalid)
}

// TimedOut reports whether err is a timeout: a deadline passed (the
// call's budget, the caller's), a socket timeout, the pool's wait.
func TimedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrPoolTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// wireEvidence reports whether err proves on its own that Redis cannot
// serve now: an unavailable error that is not a timeout.
func wireEvidence(err error) bool { return Unavailable(err) && !TimedOut(err) }

// judge reads the error of a decision's Redis call made with the caller's
// ctx: the verdict, and the error to return. Only the wire is evidence:
// wire evidence opens the breaker; a timeout proves nothing alone (the
// time may have gone to local waits or a starved CPU), so the call is
// shed and a confirming probe decides.
func (g *Guard) judge(ctx context.Context, op string, err error) (verdict, error) {
	if cerr := ctx.Err(); cerr != nil {
		return vReturn, fmt.Errorf("%s: %s: %w", g.b.pkg, op, cerr)
	}
	g.logFailure(op, err)
	var oe *openedErr
	switch {
	case errors.As(err, &oe), errors.Is(err, ErrOpened):
		return g.policyVerdict(op, nil)
	case errors.Is(err, ErrBehindFailure) || TimedOut(err):
		if g.Open() {
			return g.policyVerdict(op, nil)
		}
		if !errors.Is(err, ErrBehindFailure) { // sent: no local wait
			g.confirm(err)
		}
		return vShed, err
	case wireEvidence(err):
		g.trip(err)
		return g.policyVerdict(op, err)
	}
	return vReturn, err
}

// policyVerdict is the verdict of a call the policy answers: under
// FailError the error (err, the call's own, or else ErrUnavailable).
func (g *Guard) policyVerdict(op string, err error) (verdict, error) {
	if g.cfg.Policy != limiter.FailError {
		return vPolicy, nil
	}
	if err == nil {
		err = g.Err(op)
	}
	return vReturn, err
}

// confirm starts the confirming probe of a call that timed out, unless one
// runs, one succeeded within the probe interval, or the breaker is open.
// It opens the breaker when it fails on the wire, or times out while no
// call got a reply; during a process stall of over a quarter of its
// deadline, or not sent, it is inconclusive.
func (g *Guard) confirm(cause error) {
	if g.Open() || !g.confirming.CompareAndSwap(false, true) {
		return
	}
	if ok := g.lastOK.Load(); ok != 0 && time.Since(time.Unix(0, ok)) < g.cfg.ProbeInterval {
		g.confirming.Store(false)
		return
	}
	started := g.background(func() {
		defer g.confirming.Store(false)
		g.replied.Store(false)
		err, stalled := g.probeWatched()
		switch {
		case g.stopCtx.Err() != nil:
			return
		case wireEvidence(err): // holds however late this process ran
		case stalled > g.probeDeadline()/4, errors.Is(err, errUnanswered):
			return
		case err == nil || !Unavailable(err) || g.replied.Load():
			g.lastOK.Store(time.Now().UnixNano())
			return
		}
		g.confirmed.Add(1)
		g.trip(fmt.Errorf("%w (a probe confirmed it: %v)", cause, err))
	})
	if !started {
		g.confirming.Store(false)
	}
}

// stallTick is how often probeWatched looks at the clock.
const stallTick = 5 * time.Millisecond

// probeWatched runs a confirming probe (half a probe interval beyond the
// usual deadline) and returns its error and the longest stall of this
// process a ticker saw meanwhile.
func (g *Guard) probeWatched() (err error, stalled time.Duration) {
	done := make(chan error, 1)
	go func() { done <- g.probeNow(g.cfg.ProbeInterval / 2) }()
	tk := time.NewTicker(stallTick)
	defer tk.Stop()
	last := time.Now()
	for {
		select {
		case err = <-done:
			return err, max(stalled, time.Since(last)-stallTick, g.stallFloor)
		case <-tk.C:
			now := time.Now()
			stalled = max(stalled, now.Sub(last)-stallTick)
			last = now
		}
	}
}

// Probe returns the probe: one abs_inc.lua call that records one unit on
// ProbeKey(prefix, "abs") at a capacity that never refuses, a write (so
// that a Redis refusing writes, OOM or READONLY, stays down).
func Probe(cfg *window.Config) probeFunc {
	return probeOf(cfg, ProbeKey(cfg.Prefix, key.Absolute))
}

// probeFunc asks Redis one question that needs a write.
type probeFunc = func(ctx context.Context, client redis.Scripter) error

// probeOf is the probe that writes hash h.
func probeOf(cfg *window.Config, h string) probeFunc {
	w, b, ttl := cfg.WindowMs, cfg.BucketMs, TTLMs(cfg)
	return func(ctx context.Context, client redis.Scripter) error {
		return scripts.AbsInc.Run(ctx, client, []string{h},
			NowArg(cfg), w, b, settings.MaxCapacity, 1, ttl).Err()
	}
}

// probeDeadline is a probe's deadline: the timeout, or probeTimeout under
// WithTimeout(0).
func (g *Guard) probeDeadline() time.Duration {
	if g.cfg.Timeout <= 0 {
		return probeTimeout
	}
	return g.cfg.Timeout
}

// probeNow runs one probe with its own deadline, probeDeadline plus extra.
func (g *Guard) probeNow(extra time.Duration) error {
	ctx, cancel := context.WithTimeout(g.stopCtx, g.probeDeadline()+extra)
	defer cancel()
	return g.probeBy(ctx)
}

// probeBy runs one probe that returns by ctx's deadline: on a client that
// ignores context deadlines it runs on a goroutine, and no next probe is
// sent while it is unanswered.
func (g *Guard) probeBy(ctx context.Context) error {
	if !g.bounded || g.own != nil {
		return g.probeOnce(ctx)
	}
	if !g.probeBusy.CompareAndSwap(false, true) {
		return errUnanswered
	}
	ch := make(chan error, 1)
	go func() {
		ch <- g.probeOnce(ctx)
		g.probeBusy.Store(false)
	}()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// probeOnce sends one probe, on the probe's own client when it has one,
// else on the client.
func (g *Guard) probeOnce(ctx context.Context) error {
	if g.own == nil {
		err := g.probe(ctx, g.b.Client)
		if Unavailable(err) {
			g.followTopology()
		}
		return err
	}
	c := g.own.client()
	err := g.probe(ctx, c)
	g.own.failed(c, err)
	return err
}

// answered notes that a call got its reply from Redis: one atomic load
// on the healthy path, a store only while a confirming probe watches.
func (g *Guard) answered() {
	if !g.replied.Load() {
		g.replied.Store(true)
	}
}

// ShedCount is the number of calls shed so far, for tests.
func (g *Guard) ShedCount() int64 { return g.shed.Load() }

// Confirmed is the number of times a confirming probe opened the breaker,
// for tests.
func (g *Guard) Confirmed() int64 { return g.confirmed.Load() }

func (g *Guard) causeErr() error {
	if p := g.cause.Load(); p != nil {
		return *p
	}
	return errors.New("unknown cause")
}

// Err is the error of a call made while the breaker is open that has no
// Decision to mark (Get, Reset, and every call under FailError).
func (g *Guard) Err(op string) error { return g.unavailable(op, g.causeErr()) }

// otherErr is the error of a Get's or Reset's failed Redis call, returned
// under every policy after it is judged as a decision's is.
func (g *Guard) otherErr(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %s: %w", g.b.pkg, op, cerr)
	}
	g.observeErr(ctx, op, err, 0)
	g.judge(ctx, op, err) // the log, the breaker and the confirming probe
	var oe *openedErr
	if errors.As(err, &oe) {
		return g.Err(op)
	}
	if Unavailable(err) {
		return g.unavailable(op, err)
	}
	return err
}

// unavailable is ErrUnavailable for op, wrapping err, the reason.
func (g *Guard) unavailable(op string, err error) error {
	return &unavailableErr{prefix: g.b.pkg + ": " + op + ": ", err: err}
}

// unavailableErr reads "<pkg>: <op>: sluice: redis unavailable: <the
// wire's error>" (its own prefix not repeated), wrapping both errors.
type unavailableErr struct {
	prefix string
	err    error
}

func (e *unavailableErr) Error() string {
	return e.prefix + limiter.ErrUnavailable.Error() + ": " + strings.TrimPrefix(e.err.Error(), e.prefix)
}

func (e *unavailableErr) Unwrap() []error { return []error{limiter.ErrUnavailable, e.err} }
