// Package failover is what the Redis providers do when Redis fails: the
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
// dependency for some sixty lines. More importantly their half-open state
// lets a few user requests through to find out whether the backend is back:
// here every such request would pay a full timeout while Redis is still
// dead, and the answer would arrive on a caller's goroutine. The breaker
// below never lets a user request probe: while it is open, calls go
// straight to the policy (an atomic load, then an in-process decision), and
// one background goroutine, started when the breaker opens and gone when it
// closes, asks Redis every probe interval, one probe at a time, each bounded
// by the timeout. Close stops it and waits for it.
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
package failover

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/config"
	"github.com/sluice-go/sluice/internal/redisx"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
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

// Client is what the guard calls: the Redis providers' client.
type Client interface {
	redis.Scripter
}

// Guard is one limiter's breaker, policy and fallback. Its methods are safe
// for concurrent use. Set it up with Init; the zero value is not usable.
type Guard struct {
	cfg      *config.Config
	opts     []limiter.Option
	pkg      string
	strategy string
	refused  limiter.Outcome
	client   Client
	probe    func(ctx context.Context, client redis.Scripter) error
	// own is the probe's own client for a *redis.Client (dial.go); nil:
	// the probe runs on the client.
	own     *prober
	watch   *dialWatch // the dial hook on the client (dial.go)
	recon   Reconciler
	minRate limiter.Rate // one unit per window: the floor of a scaled fallback

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
func (g *Guard) Init(pkg, strategy string, client Client, cfg *config.Config, opts []limiter.Option,
	probe func(ctx context.Context, client redis.Scripter) error, recon Reconciler) {
	g.cfg, g.opts, g.pkg, g.strategy, g.client = cfg, opts, pkg, strategy, client
	// The fallback's decisions are reported by the guard, as the
	// provider's, not by the fallback as a local limiter's; it drops the
	// options that apply to the provider only (a hybrid's).
	g.opts = append(opts[:len(opts):len(opts)], limiter.WithObserver(nil), config.ForFallback)
	g.probe, g.recon = probe, recon
	g.refused = limiter.Rejected
	if strategy == key.Suppressed {
		g.refused = limiter.Suppressed
	}
	g.minRate = limiter.Every(1, cfg.Window)
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
	g.own = newProber(client)
	g.watchDials(client)
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

// Open reports whether the breaker is open: calls must answer by the
// policy (Answer, Err) without touching Redis. It is one atomic load.
func (g *Guard) Open() bool { return g.open.Load() }

func nop() {}

// SlackDiv sets how much a shared deadline may shorten a call: a call whose
// context can never be cancelled gets a deadline between timeout −
// timeout/SlackDiv and timeout from its start (see Context).
const SlackDiv = 16

// shared is a deadline context that the calls starting before fresh share.
// Nothing cancels it: it ends at its deadline, so that the calls still
// using it keep their bound.
type shared struct {
	ctx    context.Context
	cancel context.CancelFunc // kept for vet; calling it would cut short the calls in flight
	fresh  time.Time
}

// withValues is a shared deadline context whose values are the caller's
// (go-redis hooks, tracing).
type withValues struct {
	context.Context // the shared deadline: Deadline, Done, Err
	values          context.Context
}

func (c *withValues) Value(k any) any { return c.values.Value(k) }

// Context bounds one Redis call by the timeout on top of ctx. The cancel
// function must be called when the call returns.
//
// A context with its own deadline within the timeout is used as it is. A
// context that can be cancelled (Done is not nil) gets a child with the
// timeout, as context.WithTimeout makes it: 5 allocations and a runtime
// timer per call. A context that can never be cancelled, such as
// context.Background(), shares instead one deadline context with the calls
// that start within timeout/SlackDiv of it: no timer and no allocation
// per call (one, for the values, when ctx is not context.Background()), and
// each call is still bounded, by timeout − timeout/SlackDiv at the least
// and timeout at the most. The shared context is what go-redis waits on:
// its Done closes at the deadline (the pool's wait for a connection), and
// its Deadline bounds the socket reads and writes when the client has
// ContextTimeoutEnabled.
func (g *Guard) Context(ctx context.Context) (context.Context, context.CancelFunc) {
	t := g.cfg.Timeout
	if t <= 0 {
		return ctx, nop
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= t {
		return ctx, nop
	}
	if ctx.Done() != nil {
		return context.WithTimeout(ctx, t)
	}
	sh := g.sharedDeadline(t)
	if ctx == context.Background() {
		return sh, nop
	}
	return &withValues{Context: sh, values: ctx}, nop
}

// sharedDeadline returns the deadline context of the calls starting now:
// the current one while it is fresh, else a new one ending t from now.
// Two calls that find it stale at once both make one; the last stored
// wins, and both contexts are valid bounds.
func (g *Guard) sharedDeadline(t time.Duration) context.Context {
	now := time.Now()
	if s := g.deadline.Load(); s != nil && now.Before(s.fresh) {
		return s.ctx
	}
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(t))
	g.deadline.Store(&shared{ctx: ctx, cancel: cancel, fresh: now.Add(t / SlackDiv)})
	return ctx
}

func (g *Guard) causeErr() error {
	if p := g.cause.Load(); p != nil {
		return *p
	}
	return errors.New("unknown cause")
}

// Err is the error of a call made while the breaker is open that has no
// Decision to mark (Get, Reset, and every call under FailError).
func (g *Guard) Err(op string) error { return g.unavailable(op, g.causeErr()) }

// FailedErr handles the error of a Get or Reset made with the caller's
// ctx: the error is returned under every policy; it opens the breaker when
// it is wire evidence, and asks for a confirming probe when it is a
// timeout (see judge).
func (g *Guard) FailedErr(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %s: %w", g.pkg, op, cerr)
	}
	g.observeErr(ctx, op, err)
	g.logFailure(op, err)
	g.failedOther(err)
	var oe *openedErr
	if errors.As(err, &oe) {
		return g.Err(op)
	}
	if Unavailable(err) {
		return g.unavailable(op, err)
	}
	return err
}

// unavailable is the error of an op that Redis could not take because of
// err: ErrUnavailable wrapping err, with the package and op prefix once.
func (g *Guard) unavailable(op string, err error) error {
	return &unavailableErr{prefix: g.pkg + ": " + op + ": ", err: err}
}

// unavailableErr is the error of a call that Redis could not take: "<pkg>: <op>: sluice: redis unavailable: <the wire's error>",
// wrapping limiter.ErrUnavailable and the wire's error (whose own
// "<pkg>: <op>: " prefix, if any, is not repeated).
type unavailableErr struct {
	prefix string
	err    error
}

func (e *unavailableErr) Error() string {
	return e.prefix + limiter.ErrUnavailable.Error() + ": " + strings.TrimPrefix(e.err.Error(), e.prefix)
}

func (e *unavailableErr) Unwrap() []error { return []error{limiter.ErrUnavailable, e.err} }

// Answer decides c by the policy, without Redis. Every Decision it returns
// has Degraded set.
func (g *Guard) Answer(ctx context.Context, c *Call) (limiter.Decision, error) {
	var d limiter.Decision
	switch g.cfg.Policy {
	case limiter.FailError:
		return d, g.Err(c.Op)
	case limiter.FallbackLocal:
		return g.local(ctx, c)
	case limiter.FailOpen:
		if c.Peek || c.N <= c.Hard {
			d = limiter.Decision{Outcome: limiter.Allowed, Allowed: true, Limit: c.C, Remaining: max(c.C-c.N, 0)}
			break
		}
		d = limiter.Decision{Outcome: g.refused, Limit: c.C, Never: true}
	default: // FailClosed
		d = limiter.Decision{Outcome: g.refused, Limit: c.C, Never: !c.Peek && c.N > c.Hard}
		if !d.Never {
			d.RetryAfter = g.cfg.ProbeInterval
		}
	}
	if d.Outcome == limiter.Suppressed && !d.Allowed {
		d.SuppressionFactor = 1
	}
	d.Degraded = true
	return d, nil
}

// local decides with the in-process fallback and remembers what it admits.
func (g *Guard) local(ctx context.Context, c *Call) (limiter.Decision, error) {
	fb, err := g.fallback()
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("%s: %s: fallback: %w", g.pkg, c.Op, err)
	}
	var d limiter.Decision
	if c.Peek {
		d, err = fb.IsAllowed(ctx, c.Key)
	} else {
		d, err = fb.Inc(ctx, c.Key, g.scaled(c.Rate), c.N)
	}
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("%s: %s: fallback: %w", g.pkg, c.Op, err)
	}
	if !c.Peek && d.Allowed && c.N > 0 {
		g.record(c)
	}
	d.Degraded = true
	return d, nil
}

// scaled divides r by the fleet size, keeping at least one unit per window.
func (g *Guard) scaled(r limiter.Rate) limiter.Rate {
	n := g.cfg.FallbackInstances
	if n <= 1 {
		return r
	}
	s := limiter.PerSecond(r.PerSecondValue() / float64(n))
	if c, err := limiter.Capacity(s, g.cfg.Window); err != nil || c < 1 {
		return g.minRate
	}
	return s
}

func (g *Guard) record(c *Call) {
	now := g.cfg.NowMs()
	g.pmu.Lock()
	if p := g.pendingFor(c.Key, c.Key, c.N); p != nil {
		p.Hash, p.Rate, p.LastMs, p.span = c.Hash, c.Rate, now, g.cfg.WindowMs+g.cfg.BucketMs
		p.Units += c.N
	}
	g.pmu.Unlock()
}

// drop counts n units of id as not remembered, and id once (while fewer
// than MaxPending keys were dropped; each call beyond). g.pmu must be
// held.
func (g *Guard) drop(id string, n int64) {
	g.droppedUnits += n
	switch {
	case g.droppedIDs[id]:
	case len(g.droppedIDs) < MaxPending:
		if g.droppedIDs == nil {
			g.droppedIDs = make(map[string]bool)
		}
		g.droppedIDs[id] = true
	default:
		g.dropped++
	}
}

// pendingFor returns the Pending of id (the key, or the key and the set),
// made for key k when new, or nil when MaxPending keys are pending already
// (the n units are then counted as dropped). g.pmu must be held.
func (g *Guard) pendingFor(id, k string, n int64) *Pending {
	p := g.pending[id]
	if p == nil {
		if len(g.pending) >= MaxPending {
			g.drop(id, n)
			return nil
		}
		p = &Pending{Key: k}
		g.pending[id] = p
	}
	return p
}

// fallback returns the local limiter, built on first use.
func (g *Guard) fallback() (limiter.Limiter, error) {
	if p := g.fb.Load(); p != nil {
		return *p, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.fb.Load(); p != nil {
		return *p, nil
	}
	if g.closed {
		return nil, limiter.ErrClosed
	}
	var l limiter.Limiter
	var err error
	if g.strategy == key.Suppressed {
		l, err = local.NewSuppressed(g.opts...)
	} else {
		l, err = local.NewAbsolute(g.opts...)
	}
	if err != nil {
		return nil, err
	}
	g.fb.Store(&l)
	return l, nil
}

// Forget drops what the fallback holds for k, after Reset succeeded on
// Redis, so that reconciliation does not bring back units the caller reset.
func (g *Guard) Forget(ctx context.Context, k string) {
	if p := g.fb.Load(); p != nil {
		(*p).Reset(ctx, k)
		g.pmu.Lock()
		delete(g.pending, k)
		g.pmu.Unlock()
	}
}

// trip opens the breaker and starts the probe if none is running.
func (g *Guard) trip(err error) {
	if !g.open.CompareAndSwap(false, true) {
		return
	}
	// The cause before the channel: a call that leaves when it closes
	// returns the cause (bounded).
	g.cause.Store(&err)
	close(*g.openCh.Load())
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.since = time.Now()
	if g.running {
		return // the probe goroutine, reconciling, sees the breaker open again
	}
	g.running = true
	g.wg.Add(1)
	go g.run()
}

// run is the probe goroutine: it reports the outage, probes until Redis
// answers or Close, closes the breaker, reconciles and reports recovery.
func (g *Guard) run() {
	defer g.wg.Done()
	t := time.NewTimer(g.cfg.ProbeInterval)
	defer t.Stop()
	for {
		g.notify(limiter.StateChange{Degraded: true, Cause: g.causeErr()})
		if !g.probeUntilUp(t) {
			g.closedDegraded()
			return
		}
		g.mu.Lock()
		since := g.since
		g.mu.Unlock()
		// The fallback's units reach Redis before Redis decides again:
		// one pass while the breaker is still open (the fallback goes on
		// answering), then, once it is closed, a pass for what the
		// fallback admitted during the first. (Closing first let Redis
		// admit, during the whole write-back, into a window that did not
		// yet hold those units.)
		r := newTally()
		for i := 0; g.reconcile(false, &r) && i < 2; i++ {
			// Redis failed again during the write-back: the units wait,
			// the breaker stays open, and the probe goes on, twice at
			// most (a Redis too slow for the write-back's pipelines
			// must not keep the limiter degraded); then the second
			// pass takes what is left.
			t.Reset(g.cfg.ProbeInterval)
			if !g.probeUntilUp(t) {
				break
			}
		}
		if g.stopCtx.Err() != nil {
			g.closedDegraded()
			return
		}
		// The grace starts before the breaker closes: an admission Redis
		// grants during the second pass is charged to the fallback too.
		g.startGrace()
		g.rearm()
		g.open.Store(false)
		// A write of this pass that found Redis unavailable is tried
		// again twice, a probe interval apart, while the breaker stays
		// closed (a stale pooled connection is no outage); the units of
		// a breaker opened again wait for the next recovery.
		for i := 0; g.reconcile(true, &r) && !g.open.Load(); i++ {
			if i == 2 || !g.sleep(g.cfg.ProbeInterval) {
				g.dropPending(&r)
				break
			}
		}
		done, lost, units := r.counts()
		g.notify(limiter.StateChange{Duration: time.Since(since), Reconciled: done, Unreconciled: lost,
			UnreconciledUnits: units})
		g.mu.Lock()
		if !g.open.Load() || g.closed {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock() // opened again while reconciling: probe again
		t.Reset(g.cfg.ProbeInterval)
	}
}

// sleep waits d; false when Close came first.
func (g *Guard) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-g.stopCtx.Done():
		return false
	case <-t.C:
		return true
	}
}

// dropPending counts every pending entry as not written.
func (g *Guard) dropPending(t *tally) {
	g.pmu.Lock()
	pend := g.pending
	g.pending = make(map[string]*Pending)
	g.pmu.Unlock()
	for id, p := range pend {
		t.missed(id, p.Units)
	}
}

// closedDegraded ends the probe goroutine of a limiter closed while
// degraded: the limiter leaves degraded mode with it, so that what counts
// degraded limiters (a gauge) stops counting this one. Nothing more is
// reconciled.
func (g *Guard) closedDegraded() {
	g.mu.Lock()
	since := g.since
	g.running = false
	g.mu.Unlock()
	g.notify(limiter.StateChange{Cause: limiter.ErrClosed, Duration: time.Since(since)})
}

// probeUntilUp probes every interval, one probe at a time; false when
// stopped by Close.
func (g *Guard) probeUntilUp(t *time.Timer) bool {
	for {
		select {
		case <-g.stopCtx.Done():
			return false
		case <-t.C:
		}
		err := g.probeNow(0)
		if g.stopCtx.Err() != nil {
			return false
		}
		if err == nil || !Unavailable(err) {
			return true // Redis answered, if only with an error of another kind
		}
		g.cause.Store(&err)
		t.Reset(g.cfg.ProbeInterval)
	}
}

func (g *Guard) notify(sc limiter.StateChange) {
	sc.Provider, sc.Policy = g.pkg, g.cfg.Policy
	g.logStateChange(sc)
	if obs := g.observer(); obs != nil {
		obs.ObserveEvent(context.Background(), limiter.Event{Kind: limiter.EventStateChange, Provider: sc.Provider, State: sc})
	}
	if fn := g.cfg.OnStateChange; fn != nil {
		fn(sc)
	}
}

// tally is what the passes of one recovery did: the pending entries
// (keys, or key and set pairs) whose units Redis recorded, those whose
// units it did not, with the units, and the entries never remembered
// (MaxPending). An entry written by one pass and lost by the next is lost.
type tally struct {
	done      map[string]bool
	lost      map[string]int64
	dropped   int
	droppedUn int64
	again     []*Pending // written when Redis answers again (see reconcile)
}

func newTally() tally { return tally{done: make(map[string]bool), lost: make(map[string]int64)} }

func (t *tally) wrote(id string)           { t.done[id] = true }
func (t *tally) missed(id string, n int64) { t.lost[id] += n }

// counts returns StateChange's Reconciled, Unreconciled and
// UnreconciledUnits.
func (t *tally) counts() (done, lost int, units int64) {
	units = t.droppedUn
	for _, n := range t.lost {
		units += n
	}
	for id := range t.done {
		if _, ok := t.lost[id]; !ok {
			done++
		}
	}
	return done, len(t.lost) + t.dropped, units
}

// reconcile writes the units the fallback admitted for keys whose window
// is still live (since the last pass), in one pass of pipelines of
// reconcileBatch keys, each recorded as admitted whatever Redis holds.
// closed says the breaker was closed for the pass: one that finds it open
// again stops. Keys whose write found Redis unavailable, and those left
// when the breaker opened again, go back to the pending keys, to be written
// when Redis answers again; reconcile then returns true.
func (g *Guard) reconcile(closed bool, t *tally) bool {
	g.pmu.Lock()
	pend := g.pending
	t.dropped += g.dropped + len(g.droppedIDs)
	g.droppedIDs = nil
	t.droppedUn += g.droppedUnits
	g.pending, g.dropped, g.droppedUnits = make(map[string]*Pending), 0, 0
	g.pmu.Unlock()
	fbp := g.fb.Load()
	if len(pend) == 0 || fbp == nil || g.recon.Queue == nil {
		return false
	}
	fb := *fbp
	now := g.cfg.NowMs()
	items := make([]*Pending, 0, len(pend))
	for id, p := range pend {
		p.id = id
		if now-p.LastMs >= p.span {
			continue // dead in the window: nothing to count
		}
		// Units still live in the fallback's window, and admitted during
		// this outage (a key's local state may hold an earlier outage's
		// units, already written back then).
		live, err := g.liveUnits(fb, p)
		if err != nil {
			t.missed(id, p.Units)
			continue
		}
		if p.Units = min(p.Units, live); p.Units > 0 {
			items = append(items, p)
		}
	}
	if len(items) == 0 {
		return false
	}
	to := g.cfg.Timeout
	if to <= 0 {
		to = probeTimeout
	}
	for _, sc := range g.recon.Scripts {
		ctx, cancel := context.WithTimeout(g.stopCtx, to)
		sc.Load(ctx, g.client)
		cancel()
	}
	for len(items) > 0 {
		n := min(len(items), reconcileBatch)
		g.writeBatch(items[:n], to, t)
		items = items[n:]
		if g.stopCtx.Err() != nil {
			for _, p := range items {
				t.missed(p.id, p.Units)
			}
			break
		}
		if closed && g.open.Load() {
			t.again = append(t.again, items...)
			break
		}
	}
	if len(t.again) == 0 {
		return false
	}
	g.requeue(t.again)
	t.again = t.again[:0]
	return true
}

// requeue puts back entries whose write must wait for Redis, adding to
// what the fallback admitted for them since.
func (g *Guard) requeue(ps []*Pending) {
	g.pmu.Lock()
	defer g.pmu.Unlock()
	for _, p := range ps {
		q := g.pending[p.id]
		switch {
		case q != nil:
			q.Units += p.Units
			q.LastMs = max(q.LastMs, p.LastMs)
		case len(g.pending) < MaxPending:
			g.pending[p.id] = p
		default:
			g.drop(p.id, p.Units)
		}
	}
}

// liveUnits returns the units the fallback still counts for p: on a set,
// the most any of its limits counts (each limit is written as many).
func (g *Guard) liveUnits(fb limiter.Limiter, p *Pending) (int64, error) {
	if p.Set == nil {
		u, err := fb.Get(g.stopCtx, p.Key)
		return u.Used, err
	}
	us, err := fb.(limiter.SetLimiter).GetSet(g.stopCtx, p.Key, g.scaledSet(p.Set))
	live := int64(0)
	for _, u := range us {
		live = max(live, u.Used)
	}
	return live, err
}

// writeBatch writes one batch, as one pipeline where the client has them,
// and counts a key done when its command returned no error: the scripts
// record the write-back whatever the key holds.
func (g *Guard) writeBatch(batch []*Pending, to time.Duration, t *tally) {
	ctx, cancel := context.WithTimeout(g.stopCtx, to)
	defer cancel()
	cmds := make([]*redis.Cmd, len(batch))
	queue := func(sc redis.Scripter) {
		for i, p := range batch {
			cmds[i] = g.recon.Queue(ctx, sc, p, p.Units)
		}
	}
	if ok, _ := redisx.Pipelined(ctx, g.client, queue); !ok {
		queue(g.client)
	}
	for i, cmd := range cmds {
		switch err := cmd.Err(); {
		case err == nil:
			t.wrote(batch[i].id)
		case (Unavailable(err) || redisx.NoScript(err)) && g.stopCtx.Err() == nil:
			// NOSCRIPT: the server lost its scripts after the load above
			// (a restart); the next pass loads them again.
			t.again = append(t.again, batch[i])
		default:
			t.missed(batch[i].id, batch[i].Units)
		}
	}
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
	g.watch.g.Store(nil)
	if g.own != nil {
		g.own.close()
	}
	return err
}

// NewCall validates an Inc (or, with peek, an IsAllowed) of a provider
// whose calls carry b's configuration, and describes it for the policy:
// the Validate of its Backend. The call's Hard is the hard capacity at
// factor (1 for an absolute provider: the capacity).
func NewCall(b *redisx.Base, op, k string, rate limiter.Rate, n int64, peek bool, factor float64) (*Call, error) {
	h, err := b.Check(op, k)
	if err != nil {
		return nil, err
	}
	if peek {
		return &Call{Op: op, Key: k, Hash: h, Peek: true}, nil
	}
	if err := config.CheckCost(n); err != nil {
		return nil, b.Errorf(op, err)
	}
	c, err := limiter.Capacity(rate, b.Cfg.Window)
	if err != nil {
		return nil, b.Errorf(op, err)
	}
	hard := c
	if factor != 1 {
		if hard, err = limiter.HardCapacity(rate, b.Cfg.Window, factor); err != nil {
			return nil, b.Errorf(op, err)
		}
	}
	return &Call{Op: op, Key: k, Hash: h, Rate: rate, N: n, C: c, Hard: hard}, nil
}

// notBackend reports whether err is no error of the backend's: nil, a
// closed limiter or bad input.
func notBackend(err error) bool {
	return err == nil ||
		errors.Is(err, redisx.ErrOpened) ||
		errors.Is(err, redisx.ErrBehindFailure) ||
		errors.Is(err, limiter.ErrClosed) ||
		errors.Is(err, limiter.ErrInvalidRate) ||
		errors.Is(err, limiter.ErrInvalidConfig) ||
		errors.Is(err, limiter.ErrInvalidCost) ||
		errors.Is(err, limiter.ErrCapacityTooSmall) ||
		errors.Is(err, limiter.ErrWindowConflict) ||
		errors.Is(err, limiter.ErrLayout) ||
		errors.Is(err, key.ErrInvalid)
}
