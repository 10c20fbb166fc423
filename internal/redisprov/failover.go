package redisprov

import (
	"cmp"
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

// MaxPending bounds the keys (and key and set pairs) whose fallback
// admissions one outage remembers for the write-back; keys beyond it are
// decided as usual but not written back (StateChange.Unreconciled and
// UnreconciledUnits count them).
const MaxPending = 10_000

// probeTimeout bounds a probe and a write-back under WithTimeout(0): they
// have no caller.
const probeTimeout = time.Second

// Call is a validated Inc or IsAllowed, as the policy needs it.
type Call struct {
	Hash string // the key's Redis hash
	Rate limiter.Rate
	C    int64 // capacity (soft for suppressed); 0 for IsAllowed
	Hard int64 // largest admissible n: C for absolute, H for suppressed
}

// NewCall validates an Inc (or, with peek, an IsAllowed) of a provider
// whose calls carry b's configuration, as its Backend's Validate.
func NewCall(b *Base, op, k string, rate limiter.Rate, n int64, peek bool) (*Call, error) {
	h, err := b.Check(op, k)
	if err != nil {
		return nil, err
	}
	if peek {
		return &Call{Hash: h}, nil
	}
	c, err := limiter.Capacity(rate, b.Cfg.Window)
	hard := c
	if cerr := window.CheckCost(n); cerr != nil {
		err = cerr
	} else if err == nil && b.sup {
		hard, err = window.HardCapacity(rate, b.Cfg.Window, b.Cfg.HardLimitFactor)
	}
	if err != nil {
		return nil, b.Errorf(op, err)
	}
	return &Call{Hash: h, Rate: rate, C: c, Hard: hard}, nil
}

// Pending is one key's units admitted by the fallback during an outage,
// on one limit (Set nil) or on a set of limits.
type Pending struct {
	Key, Hash string
	Rate      limiter.Rate // of the key's latest fallback Inc
	Set       *limiter.Set // the IncSet's set, as the caller gave it; nil for Inc
	Units     int64        // admitted since the outage began
	LastMs    int64        // time of the latest admission (the limiter's clock)
	span      int64        // how long an admission may count (ms): W + B, a set's largest
	id        string       // its entry in the pending map, during a write-back
}

// Guard is one limiter's breaker, policy and fallback. Its methods are safe
// for concurrent use. Set it up with Init; the zero value is not usable.
type Guard struct {
	b     *Base // the store: client, package, strategy, the write-back's arguments
	cfg   *window.Config
	opts  []limiter.Option // the fallback's
	probe probeFunc
	own   *prober    // the probe's own client (dial.go); nil: the probe uses client
	watch *dialWatch // the dial hook on the client (dial.go)
	// nodes routes calls to the guards of a cluster's masters (nodes.go);
	// a node guard has node, its master's address, and parent, the router.
	nodes  *nodes
	node   string
	parent *Guard

	open     atomic.Bool
	openCh   atomic.Pointer[chan struct{}] // closed when the breaker opens (Opened)
	cause    atomic.Pointer[error]
	fb       atomic.Pointer[limiter.Limiter]
	deadline atomic.Pointer[shared] // see Context

	stopCtx context.Context // done once Close began
	stop    context.CancelFunc
	mu      sync.Mutex // guards what follows, the fallback's building and the lifecycle
	closed  bool
	running bool      // the probe goroutine is alive
	since   time.Time // when the breaker last opened
	wg      sync.WaitGroup

	scaledSets sync.Map     // *limiter.Set → its share (fallback.go), up to maxScaledSets
	nScaled    atomic.Int64 // sets scaled
	graceEnd   atomic.Int64 // the grace's end (ms, the limiter's clock); 0: none
	setSpan    atomic.Int64 // the longest W + B of a set the fallback decided (ms)

	pmu          sync.Mutex
	pending      map[string]*Pending
	droppedIDs   map[string]bool // entries not remembered (MaxPending), up to MaxPending
	dropped      int             // and those beyond
	droppedUnits int64           // and their units

	// What the wire says (evidence.go). bounded: the client ignores context
	// deadlines on its sockets, so calls run through bounded.
	bounded      bool
	maxAbandoned int64
	abandoned    atomic.Int64   // calls past their deadline still running
	calls        sync.WaitGroup // every call run by bounded
	work         chan func()    // a call for an idle worker
	workers      sync.WaitGroup
	released     chan struct{} // a token when an abandoned call ends
	probeBusy    atomic.Bool   // a bounded probe is still unanswered
	confirming   atomic.Bool   // a confirming probe runs
	replied      atomic.Bool   // a call got a reply since the confirming probe began
	lastOK       atomic.Int64  // unix ns of the latest confirming probe that succeeded
	confirmed    atomic.Int64  // breaker openings by a confirming probe
	stallFloor   time.Duration // tests only: the least stall a confirming probe reports
	shed         atomic.Int64  // calls shed
	shedLogAt    atomic.Int64  // unix ns of the latest log of shed calls
	shedLogged   atomic.Int64  // shed when last logged

	log                     logState // observe.go
	evictAsked, evictWarned atomic.Bool
}

// Init sets g up for the calls of store b, which must outlive g: opts are
// the provider's options, given to the local fallback; probe asks Redis
// one question that needs a write. Init starts no goroutine.
func (g *Guard) Init(b *Base, opts []limiter.Option, probe probeFunc) {
	// The guard reports the fallback's decisions as the provider's, and
	// ForFallback keeps the local provider from refusing the options it
	// does not read (WithPrefix, WithTimeout, a hybrid's own).
	opts = append(opts[:len(opts):len(opts)], limiter.WithObserver(nil), window.ForFallback)
	g.init(b, opts, probe)
	g.own = newProber(b.Client)
	g.watchDials(b.Client)
}

// init is Init but for the probe's own client and the dial hook, which a
// cluster master's guard (nodes.go) does not have.
func (g *Guard) init(b *Base, opts []limiter.Option, probe probeFunc) {
	g.b, g.cfg, g.opts, g.probe = b, &b.Cfg, opts, probe
	g.stopCtx, g.stop = context.WithCancel(context.Background())
	g.pending = make(map[string]*Pending)
	g.rearm()
	// A client that ignores context deadlines on its sockets would hold a
	// call for its ReadTimeout: the guard bounds such calls itself, with
	// at most a pool's worth left running in the background.
	pool, ctxTimeouts := 0, true
	switch c := b.Client.(type) {
	case interface{ ContextTimeouts() bool }: // the rueidis adapter
		ctxTimeouts = c.ContextTimeouts()
	case *redis.Client:
		pool, ctxTimeouts = c.Options().PoolSize, c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		pool, ctxTimeouts = c.Options().PoolSize, c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		pool, ctxTimeouts = c.Options().PoolSize, c.Options().ContextTimeoutEnabled
	}
	if pool <= 0 {
		pool = 10 * runtime.GOMAXPROCS(0) // go-redis's default
	}
	g.bounded = b.Cfg.Timeout > 0 && !ctxTimeouts
	g.maxAbandoned = int64(pool)
	g.released = make(chan struct{}, 1)
	g.work = make(chan func())
	g.replied.Store(true)
}

// Key is the strategy's part of the Redis keys: key.Absolute or
// key.Suppressed.
func (s Strategy) Key() string { return s.key }

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
		err = cmp.Or(err, (*p).Close(ctx))
	}
	err = cmp.Or(err, g.closeNodes(ctx))
	if g.watch != nil {
		g.watch.g.Store(nil)
	}
	if g.own != nil {
		g.own.close()
	}
	return err
}
