// failover.go and its neighbours are what the providers do when Redis fails: the
// per-call timeout, the classification of errors, the circuit breaker with
// its background probe, the failure policies (FallbackLocal, FailOpen,
// FailClosed, FailError) and the reconciliation of the units the local
// fallback admitted. redisabs and redissup (and the hybrid provider) each
// hold one Guard.
//
// # Why a hand-written breaker
//
// The module depends on go-redis, miniredis and golang.org/x/time/rate only,
// and a breaker library (sony/gobreaker and the like) would be a fourth
// dependency for the breaker proper (breaker.go, which reads alone). More
// importantly their half-open state lets a few user requests through to find
// out whether the backend is back: here every such request would pay a full
// timeout while Redis is still dead, and the answer would arrive on a
// caller's goroutine. The breaker below never lets a user request probe:
// while it is open, calls go straight to the policy (an atomic load, then an
// in-process decision), and one background goroutine, started when the
// breaker opens and gone when it closes, asks Redis every probe interval,
// one probe at a time, each bounded by the timeout. Close stops it and waits
// for it.
//
// # States
//
// Closed: calls go to Redis, each bounded by the timeout (on any client:
// see bounded). Only the wire is evidence against Redis (evidence.go): the
// first call that gets a connection error or a "cannot serve now" reply
// opens the breaker; a call that times out is shed (refused, marked Shed,
// never admitted) and opens it only when a confirming probe with its own
// deadline fails too: one timeout or two per outage, not one per request,
// and a busy client never opens it. Open: calls answer by the
// policy and are marked Degraded. The probe writes one unit to a key of its
// own (so an OOM or read-only Redis does not look healthy); when it
// succeeds the breaker closes, the units the fallback admitted are written
// to Redis (Reconcile), and the state-change hook is told.

package redisprov

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-go/sluice/internal/window"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// MaxPending bounds the keys (and key and set pairs) whose fallback
// admissions are remembered for reconciliation during one outage; keys
// beyond it are decided as usual but not written back
// (StateChange.Unreconciled and UnreconciledUnits count them).
const MaxPending = 10_000

// reconcileBatch is how many keys one pipeline of reconciliation carries.
const reconcileBatch = 256

// probeTimeout bounds a probe when WithTimeout(0) leaves calls to the
// caller's context: the probe has no caller.
const probeTimeout = time.Second

// unavailableReplies are the Redis error codes that mean the server cannot
// serve now, as opposed to a bad command.
var unavailableReplies = [...]string{"LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "OOM"}

// Unavailable reports whether err means Redis could not be asked: a
// connection refused, reset or closed, a timeout (the per-call deadline,
// the client's socket timeouts, the pool's wait), or a reply LOADING, BUSY,
// MASTERDOWN, CLUSTERDOWN, TRYAGAIN, READONLY or OOM. Bad input, ErrClosed,
// a cancelled context, a malformed reply and every other Redis error reply
// are not. The caller's own context must be checked first: its deadline is
// not Redis's fault, and Unavailable cannot tell it from the timeout's. A
// timeout alone does not open the breaker (see judge): it needs a probe
// that fails too.
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

// Call describes one Inc or IsAllowed for the policy.
type Call struct {
	Op   string // "inc", "is allowed"
	Key  string // the caller's key
	Hash string // the key's Redis hash
	Rate limiter.Rate
	N    int64
	C    int64 // capacity (soft for suppressed)
	Hard int64 // largest admissible n: C for absolute, H for suppressed
	Peek bool  // IsAllowed: no rate, no n
}

// Pending is one key's units admitted by the fallback during an outage,
// on one limit (Set nil) or on a set of limits.
type Pending struct {
	Key, Hash string
	Rate      limiter.Rate // of the key's latest fallback Inc
	Set       *limiter.Set // the set of the IncSet calls, as the caller gave it; nil for Inc
	Units     int64        // admitted since the outage began
	LastMs    int64        // time of the latest admission (the limiter's clock)
	span      int64        // how long, in ms, an admission may count: W + B, the largest of a set
	id        string       // its entry in the pending map, during a reconciliation
}

// Reconciler writes fallback units of one strategy to Redis.
type Reconciler struct {
	// Scripts are the scripts Queue runs with EvalSha; they are loaded
	// once before the pipelines.
	Scripts []*redis.Script
	// Queue adds to pipe the write of n units of p's key (in every limit
	// of p.Set when it is not nil), recorded as admitted whatever Redis
	// holds, and returns the command, whose error is read after the
	// pipeline runs: no error means Redis recorded them.
	Queue func(ctx context.Context, pipe redis.Scripter, p *Pending, n int64) *redis.Cmd
}

// Guard is one limiter's breaker, policy and fallback. Its methods are safe
// for concurrent use. Set it up with Init; the zero value is not usable.
type Guard struct {
	cfg      *window.Config
	opts     []limiter.Option
	pkg      string
	strategy string
	sup      bool // the suppressed strategy: the guard's refusals are Suppressed, factor 1
	client   Client
	probe    func(ctx context.Context, client redis.Scripter) error
	// own is the probe's own client for a *redis.Client (dial.go); nil:
	// the probe runs on the client.
	own   *prober
	watch *dialWatch // the dial hook on the client (dial.go)
	// nodes routes calls to the guards of a cluster's masters (ByNode,
	// nodes.go); nil: this guard decides every call. A node guard has
	// node, its master's address, and parent, the router.
	nodes  *nodes
	node   string
	parent *Guard
	recon  Reconciler

	open     atomic.Bool
	openCh   atomic.Pointer[chan struct{}] // closed when the breaker opens (Opened)
	cause    atomic.Pointer[error]
	fb       atomic.Pointer[limiter.Limiter]
	deadline atomic.Pointer[shared] // see Context

	stopCtx context.Context
	stop    context.CancelFunc

	mu      sync.Mutex // guards what follows and the lifecycle
	closed  bool
	running bool // the probe goroutine is alive
	since   time.Time
	wg      sync.WaitGroup

	// scaledSets caches the fallback's scaled copy of each set
	// (*limiter.Set → *limiter.Set), up to maxScaledSets of them.
	scaledSets sync.Map
	nScaled    atomic.Int64

	log logState

	evictAsked, evictWarned atomic.Bool // evict.go

	graceEnd atomic.Int64 // see startGrace: the grace's end (ms, the limiter's clock); 0: none
	setSpan  atomic.Int64 // the longest W + B of a set the fallback decided (ms)

	pmu          sync.Mutex
	pending      map[string]*Pending
	dropped      int             // keys not remembered (MaxPending), beyond those in droppedIDs
	droppedIDs   map[string]bool // up to MaxPending of them, counted once each
	droppedUnits int64           // and their units

	// Evidence (evidence.go): bounded is set when the client ignores
	// context deadlines on its sockets, so that calls run through bounded.
	bounded      bool
	maxAbandoned int64
	abandoned    atomic.Int64   // calls past their deadline still running
	calls        sync.WaitGroup // every call run by bounded
	work         chan func()    // a call for an idle worker (workers.go)
	workers      sync.WaitGroup // the workers
	released     chan struct{}  // a token when an abandoned call ends
	probeBusy    atomic.Bool    // a bounded probe is still unanswered
	confirming   atomic.Bool    // a confirming probe runs
	replied      atomic.Bool    // some call got a reply since the confirming probe began
	lastOK       atomic.Int64   // unix ns of the latest confirming probe that succeeded
	confirmed    atomic.Int64   // breaker openings by a confirming probe
	stallFloor   time.Duration  // tests only: the least stall a confirming probe reports
	shed         atomic.Int64   // calls shed
	shedLogAt    atomic.Int64   // unix ns of the latest log of shed calls
	shedLogged   atomic.Int64   // shed when last logged
}

// Init sets g up for a provider. cfg must outlive g (it is the provider's
// resolved configuration); opts are the provider's options, given to the
// local fallback. probe asks Redis one question that needs a write; recon
// writes fallback units back. Init starts nothing: the probe goroutine
// exists only while the breaker is open.
func (g *Guard) Init(pkg, strategy string, client Client, cfg *window.Config, opts []limiter.Option,
	probe func(ctx context.Context, client redis.Scripter) error, recon Reconciler) {
	g.initCore(pkg, strategy, client, cfg, opts, probe, recon)
	g.own = newProber(client)
	g.watchDials(client)
}

// initCore is Init but for the probe's own client and the dial hook.
func (g *Guard) initCore(pkg, strategy string, client Client, cfg *window.Config, opts []limiter.Option,
	probe func(ctx context.Context, client redis.Scripter) error, recon Reconciler) {
	g.cfg, g.opts, g.pkg, g.strategy, g.client = cfg, opts, pkg, strategy, client
	// The fallback's decisions are reported by the guard, as the
	// provider's, not by the fallback as a local limiter's; ForFallback
	// keeps the options the provider reads and the local provider does
	// not (WithPrefix, WithTimeout, a hybrid's own) from refusing it.
	g.opts = append(opts[:len(opts):len(opts)], limiter.WithObserver(nil), window.ForFallback)
	g.probe, g.recon = probe, recon
	g.sup = strategy == key.Suppressed
	g.stopCtx, g.stop = context.WithCancel(context.Background())
	g.pending = make(map[string]*Pending)
	g.rearm()
	// A client that ignores context deadlines on its sockets would hold a
	// call for its ReadTimeout: the guard bounds such calls itself.
	g.bounded = cfg.Timeout > 0 && !contextTimeouts(client)
	g.maxAbandoned = maxAbandonedFor(client)
	g.released = make(chan struct{}, 1)
	g.work = make(chan func())
	g.replied.Store(true)
}

// contextTimeouts reports whether a client honours context deadlines on
// its sockets: a go-redis client's ContextTimeoutEnabled, or what a
// client's ContextTimeouts method says (the rueidis adapter's: false);
// true for clients it cannot inspect.
func contextTimeouts(c Client) bool {
	switch c := c.(type) {
	case interface{ ContextTimeouts() bool }:
		return c.ContextTimeouts()
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// Close stops the probe and waits for it until ctx is done, then closes the
// fallback. It returns ctx's error if it could not wait. Closing twice is
// harmless.
func (g *Guard) Close(ctx context.Context) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.stop()
	g.mu.Unlock()
	idle := make(chan struct{})
	go func() { g.wg.Wait(); g.calls.Wait(); g.workers.Wait(); close(idle) }()
	var err error
	select {
	case <-idle:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if p := g.fb.Load(); p != nil {
		if ferr := (*p).Close(ctx); err == nil {
			err = ferr
		}
	}
	if nerr := g.closeNodes(ctx); err == nil {
		err = nerr
	}
	if g.watch != nil {
		g.watch.g.Store(nil)
	}
	if g.own != nil {
		g.own.close()
	}
	return err
}

// NewCall validates an Inc (or, with peek, an IsAllowed) of a provider
// whose calls carry b's configuration, and describes it for the policy:
// the Validate of its Backend. The call's Hard is the hard capacity at
// factor (1 for an absolute provider: the capacity).
func NewCall(b *Base, op, k string, rate limiter.Rate, n int64, peek bool, factor float64) (*Call, error) {
	h, err := b.Check(op, k)
	if err != nil {
		return nil, err
	}
	if peek {
		return &Call{Op: op, Key: k, Hash: h, Peek: true}, nil
	}
	if err := window.CheckCost(n); err != nil {
		return nil, b.Errorf(op, err)
	}
	c, err := limiter.Capacity(rate, b.Cfg.Window)
	if err != nil {
		return nil, b.Errorf(op, err)
	}
	hard := c
	if factor != 1 {
		if hard, err = window.HardCapacity(rate, b.Cfg.Window, factor); err != nil {
			return nil, b.Errorf(op, err)
		}
	}
	return &Call{Op: op, Key: k, Hash: h, Rate: rate, N: n, C: c, Hard: hard}, nil
}

// notBackend reports whether err is no error of the backend's: nil, a
// closed limiter or bad input.
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
