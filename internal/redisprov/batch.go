package redisprov

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batching of concurrent script calls (docs/operations.md, Batching).
//
// Each Redis node has a lane. While at most Direct calls of the provider
// are inside the lane (running or waiting), a call runs at once on the
// caller's goroutine, exactly as an unbatched call: there is no limit on
// round trips in flight then, so a lone caller, or a few, never wait for a
// timer, another goroutine or each other. Batching starts only above
// Direct callers: then the lane keeps at most Inflight round trips of the
// batched path in flight. A call that finds fewer takes one and runs at
// once; a call that finds Inflight round trips in flight joins the lane's
// queue and waits. When a round trip ends with calls queued, whoever ran
// it hands its place to a flusher goroutine, which sends up to max queued
// calls as one pipeline of EVALSHA, answers each caller, and repeats until
// the queue is empty; then the place is free again. So calls that arrive
// while the node is busy share the next round trip, and the batch size
// follows the load: 1 up to Direct concurrent callers, up to about the
// number of waiting goroutines / Inflight (capped at max) above. A call
// that runs alone below Direct takes no place and never drains the queue:
// a call queues only when all Inflight places are held, and each holder
// hands its place to a flusher when it ends with calls queued, so the
// queue always has someone to send it.
//
// Why both: a few callers are served best by as many round trips in
// flight as callers (the server and the network overlap them), many
// callers by few round trips that carry many calls each (each round trip
// costs system calls on both sides, and with tens of callers that cost,
// not the wait, is what limits throughput). On the benchmark machine two
// round trips for eight callers cost them 17 to 19 % of their throughput
// on a quiet machine, and for 64 or 256 callers gained 1.4 to 2.2 times
// (docs/benchmarks.md, Redis throughput: batching).
//
// A waiting caller leaves as soon as its context is done, with the
// context's error. If its call was not yet taken into a pipeline it is
// never sent; if it was, the pipeline runs on without it. The pipeline has
// a context of its own, without cancellation, carrying the first caller's
// values and the latest deadline of its callers (none when one of them has
// none: the client's socket timeouts bound it then), so that no caller's
// cancellation or early deadline fails the others.
//
// NOSCRIPT replies (after SCRIPT FLUSH or a restart) are answered within
// the batch: the calls that got one are sent again as one pipeline of
// EVAL, which loads the script, as redis.Script.Run does for a single
// call. On a cluster the lanes are the slots' masters, and a pipeline goes
// straight to the node's client: a reply that says the script did not run
// there and needs the cluster client's routing (MOVED or ASK during
// resharding, TRYAGAIN, CLUSTERDOWN) sends that call again alone through
// the cluster client, on its caller's goroutine and within its caller's
// context, which is then exactly the call an unbatched provider makes. A
// connection error is returned as it is: the script may have run.
//
// A client that is not go-redis' but pipelines (a ScriptPipeliner: the
// rueidis adapter, standalone or cluster) has one lane, and its pipelines
// are the client's ScriptPipelined (one rueidis DoMulti, which rueidis
// splits by slot and routes itself); the calls that run alone share
// rueidis' connection through its automatic pipelining.

// Inflight is how many round trips of one provider's scripts the batched
// path keeps in flight to one node before calls wait to be batched. With
// 1, two batched pipelines would take turns; with 2, one is on the wire
// while the next one fills.
const Inflight = 2

// Direct is how many calls may be inside one node's lane before batching
// starts: up to Direct concurrent callers, every call runs alone and at
// once, as without batching. 8 because on the benchmark machine the
// batched path lost to unbatched calls at 8 callers on a quiet machine
// and won from 10 callers up (docs/benchmarks.md, Redis
// throughput: batching). NewBatcher reads it; tests and the benchmark set it (0 batches
// from the third concurrent caller on, the rule before Direct existed).
var Direct = 8

// Batcher batches the script calls of one provider. Build it with
// NewBatcher; the zero value is not usable. Its methods are safe for
// concurrent use.
type Batcher struct {
	client   Client
	max      int
	inflight int                  // Inflight; tests lower it
	direct   int64                // Direct when built; tests change it
	single   *lane                // the lane of a *redis.Client or a ScriptPipeliner
	cluster  *redis.ClusterClient // nil unless the client is one
	lanes    sync.Map             // *redis.Client (a master) → *lane
	// gate returns a channel closed while the circuit breaker is open
	// (SetGate); nil: none.
	gate func() <-chan struct{}

	mu       sync.Mutex // guards what follows
	flushers int
	idle     []chan struct{} // closed when flushers falls to 0
}

// NewBatcher returns a Batcher for client with batches of at most max
// calls, or nil (every call alone) when max ≤ 1 or client is none of a
// *redis.Client (one lane), a *redis.ClusterClient (one lane per master,
// found from the first key's slot) and a ScriptPipeliner (one lane, its
// ScriptPipelined the pipeline: the rueidis adapter, standalone or
// cluster).
func NewBatcher(client Client, max int) *Batcher {
	if max <= 1 {
		return nil
	}
	b := &Batcher{client: client, max: max, inflight: Inflight, direct: int64(Direct)}
	switch c := client.(type) {
	case *redis.Client:
		b.single = &lane{b: b, node: c}
	case *redis.ClusterClient:
		b.cluster = c
	case ScriptPipeliner:
		// One lane: its pipelines are the client's (rueidis' DoMulti,
		// which a cluster client splits by slot and which follows MOVED
		// and ASK itself).
		b.single = &lane{b: b, node: c}
	default:
		return nil
	}
	return b
}

// lane is one node's queue.
type lane struct {
	b       *Batcher
	node    any          // where pipelines go: a *redis.Client or a ScriptPipeliner
	callers atomic.Int64 // calls inside Run on this lane
	mu      sync.Mutex
	busy    int // round trips in flight or flushers running, ≤ inflight
	q       []*call
}

// call is one queued script call.
type call struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	state  atomic.Int32 // queued, taken, abandoned
	done   chan reply   // capacity 1: the one reply never blocks the flusher
}

const (
	queued int32 = iota
	taken
	abandoned
)

type reply struct {
	v     any
	err   error
	alone bool // send the call again alone, through the cluster client
}

var calls = sync.Pool{New: func() any { return &call{done: make(chan reply, 1)} }}

// Run runs script over keys with args, batched with the calls to the same
// node that wait meanwhile, and returns its reply.
func (b *Batcher) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) (any, error) {
	ln := b.lane(ctx, keys)
	if ln == nil {
		return run(ctx, script, b.client, keys, args)
	}
	if ln.callers.Add(1) <= b.direct {
		v, err := run(ctx, script, b.client, keys, args)
		ln.callers.Add(-1)
		return v, err
	}
	defer ln.callers.Add(-1)
	ln.mu.Lock()
	if ln.busy < ln.b.inflight {
		ln.busy++
		ln.mu.Unlock()
		v, err := run(ctx, script, b.client, keys, args)
		ln.release()
		return v, err
	}
	if err := ctx.Err(); err != nil {
		ln.mu.Unlock()
		return nil, err
	}
	c := calls.Get().(*call)
	c.ctx, c.script, c.keys, c.args = ctx, script, keys, args
	c.state.Store(queued)
	ln.q = append(ln.q, c)
	ln.mu.Unlock()
	var opened <-chan struct{}
	if b.gate != nil {
		opened = b.gate()
	}
	select {
	case r := <-c.done:
		c.ctx, c.script, c.keys, c.args = nil, nil, nil, nil
		calls.Put(c)
		if r.alone {
			return run(ctx, script, b.client, keys, args)
		}
		return r.v, r.err
	case <-ctx.Done():
		// Not put back: a flusher that took it will still reply to it.
		c.state.CompareAndSwap(queued, abandoned)
		return nil, ctx.Err()
	case <-opened:
		// The breaker opened while the call waited: the policy answers
		// it at once (if a flusher took it already, it goes on without
		// its caller).
		c.state.CompareAndSwap(queued, abandoned)
		return nil, ErrOpened
	}
}

// SetGate makes waiting calls watch the circuit breaker: opened returns a
// channel that is closed while the breaker is open. A call waiting in a
// queue then leaves at once with ErrOpened, and a flusher that finds the
// breaker open answers its batch with ErrOpened instead of sending it.
// Call it before the first Run.
func (b *Batcher) SetGate(opened func() <-chan struct{}) {
	if b != nil {
		b.gate = opened
	}
}

// isOpen reports whether the gate says the breaker is open.
func (b *Batcher) isOpen() bool {
	if b.gate == nil {
		return false
	}
	select {
	case <-b.gate():
		return true
	default:
		return false
	}
}

// lane returns the lane of the node that serves keys, or nil when the call
// must run alone.
func (b *Batcher) lane(ctx context.Context, keys []string) *lane {
	if b.single != nil {
		return b.single
	}
	if len(keys) == 0 {
		return nil
	}
	node, err := b.cluster.MasterForKey(ctx, keys[0])
	if err != nil || node == nil {
		return nil // the cluster client's own path reports it
	}
	if ln, ok := b.lanes.Load(node); ok {
		return ln.(*lane)
	}
	ln, _ := b.lanes.LoadOrStore(node, &lane{b: b, node: node})
	return ln.(*lane)
}

// release ends a round trip of ln: its place is freed, or a flusher takes
// it for the calls that queued meanwhile.
func (ln *lane) release() {
	ln.mu.Lock()
	if len(ln.q) == 0 {
		ln.busy--
		ln.mu.Unlock()
		return
	}
	ln.b.started()
	ln.mu.Unlock()
	go ln.flush()
}

// flush sends the queue, max calls per pipeline, until it is empty.
func (ln *lane) flush() {
	defer ln.b.ended()
	batch := make([]*call, 0, ln.b.max)
	for {
		batch = batch[:0]
		ln.mu.Lock()
		n := 0
		for _, c := range ln.q {
			if len(batch) == ln.b.max {
				break
			}
			n++
			if c.state.CompareAndSwap(queued, taken) {
				batch = append(batch, c)
			}
		}
		rest := copy(ln.q, ln.q[n:])
		clear(ln.q[rest:])
		ln.q = ln.q[:rest]
		if len(batch) == 0 && rest == 0 {
			ln.busy--
			ln.mu.Unlock()
			return
		}
		ln.mu.Unlock()
		switch {
		case len(batch) == 0:
		case ln.b.isOpen():
			// Re-checked after the wait: while the breaker is open the
			// queued calls go to the policy, not to Redis.
			for _, c := range batch {
				c.done <- reply{err: ErrOpened}
			}
		default:
			ln.send(batch)
		}
	}
}

// send runs batch as one round trip and replies to every call in it.
func (ln *lane) send(batch []*call) {
	if len(batch) == 1 {
		// A pipeline of one is a call: send it as one, with its caller's
		// context and through the provider's client.
		c := batch[0]
		v, err := run(c.ctx, c.script, ln.b.client, c.keys, c.args)
		c.done <- reply{v: v, err: err}
		return
	}
	ctx, cancel := batchContext(batch)
	defer cancel()
	cmds := make([]*redis.Cmd, len(batch))
	_, failed := Pipelined(ctx, ln.node, func(pipe redis.Scripter) {
		for i, c := range batch {
			cmds[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
	})
	var again []int
	for i := range batch {
		if NoScript(cmds[i].Err()) {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		_, err := Pipelined(ctx, ln.node, func(pipe redis.Scripter) {
			for _, i := range again {
				c := batch[i]
				cmds[i] = c.script.Eval(ctx, pipe, c.keys, c.args...)
			}
		})
		if err != nil {
			failed = err
		}
	}
	for i, c := range batch {
		v, err := cmds[i].Result()
		if err == nil && v == nil {
			// Never sent or never answered: go-redis leaves such a
			// command without its error when the connection fails and
			// it has no retry left; Exec returned it.
			err = failed
			if err == nil {
				err = errNoReply
			}
		}
		c.done <- reply{v: v, err: err, alone: ln.b.cluster != nil && needsCluster(err)}
	}
}

var errNoReply = errors.New("redis: no reply in the pipeline")

// run is redis.Script.Run: EVALSHA, and EVAL (which loads the script) when
// the server answers NOSCRIPT. Unlike it, it asks redis.HasErrorPrefix
// only about an error: that call allocates, nil error or not, and a
// healthy call has none.
func run(ctx context.Context, script *redis.Script, c redis.Scripter, keys []string, args []any) (any, error) {
	v, err := script.EvalSha(ctx, c, keys, args...).Result()
	if NoScript(err) {
		return script.Eval(ctx, c, keys, args...).Result()
	}
	return v, err
}

// NoScript reports whether err is a NOSCRIPT reply.
func NoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

// batchContext is the context of a pipeline: without cancellation, with
// the first call's values and the latest deadline of the calls (none when
// one of them has none).
func batchContext(batch []*call) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, c := range batch {
		dl, ok := c.ctx.Deadline()
		if !ok {
			return context.WithoutCancel(batch[0].ctx), func() {}
		}
		if dl.After(last) {
			last = dl
		}
	}
	return context.WithDeadline(context.WithoutCancel(batch[0].ctx), last)
}

// needsCluster reports whether a call that failed in a pipeline to a
// cluster node must be sent again through the cluster client: the reply
// says the script did not run on this node and the cluster client's
// routing would send it elsewhere or again (MOVED and ASK during
// resharding, TRYAGAIN and CLUSTERDOWN while the slot map changes). A
// connection error is not sent again: the script may have run, and this
// package never re-sends a call that may have counted.
func needsCluster(err error) bool {
	if err == nil {
		return false
	}
	for _, p := range [...]string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

func (b *Batcher) started() {
	b.mu.Lock()
	b.flushers++
	b.mu.Unlock()
}

func (b *Batcher) ended() {
	b.mu.Lock()
	if b.flushers--; b.flushers == 0 {
		for _, ch := range b.idle {
			close(ch)
		}
		b.idle = nil
	}
	b.mu.Unlock()
}

// Wait waits until no flusher runs, or ctx is done (then it returns ctx's
// error). Flushers end by themselves once their queue is empty; a provider
// calls Wait from Close, after new calls are refused.
func (b *Batcher) Wait(ctx context.Context) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	if b.flushers == 0 {
		b.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	b.idle = append(b.idle, ch)
	b.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
