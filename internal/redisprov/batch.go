package redisprov

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batching of concurrent script calls (docs/operations.md, Batching).
//
// Each Redis node has a lane. Up to Direct calls inside a lane run at once
// on their callers' goroutines. Above that, the lane keeps at most
// Inflight round trips in flight; a call that finds them all taken
// queues, and whoever ends a round trip with calls queued hands its place
// to a flusher goroutine, which sends the queue in pipelines of at most
// max EVALSHA until it is empty. A call queues only while every place is
// held, so the queue always has someone to send it.
//
// A waiting caller leaves when its context is done; a call already taken
// runs on without it. A pipeline's context has the first caller's values,
// the latest of the callers' deadlines (none if one has none) and no
// cancellation, so that no caller's cancellation fails the others.
// NOSCRIPT replies are sent again as one pipeline of EVAL. On a cluster,
// lanes are the masters; a reply that needs the cluster client's routing
// (needsCluster) is sent again alone through it. A connection error is
// returned as it is: the script may have run.

// Inflight is how many batched round trips a lane keeps in flight: one is
// on the wire while the next fills.
const Inflight = 2

// Direct is how many calls may be inside a lane before batching starts,
// where batching starts to win (docs/benchmarks.md, Redis throughput:
// batching). NewBatcher reads it; tests and the benchmark set it.
var Direct = 8

// Batcher batches the script calls of one provider. Build it with
// NewBatcher. Its methods are safe for concurrent use.
type Batcher struct {
	client   Client
	max      int
	inflight int                    // Inflight; tests lower it
	direct   int64                  // Direct when built; tests change it
	single   *lane                  // the lane of a *redis.Client or a ScriptPipeliner
	cluster  *redis.ClusterClient   // nil unless the client is one
	lanes    sync.Map               // *redis.Client (a master) → *lane
	gate     func() <-chan struct{} // closed while the breaker is open (SetGate); nil: none

	mu       sync.Mutex
	flushers int
	idle     chan struct{} // closed when flushers falls to 0
}

// NewBatcher returns a Batcher for client with batches of at most max
// calls, or nil (every call alone) when max ≤ 1 or client is not a
// *redis.Client, a *redis.ClusterClient (a lane per master) or a
// ScriptPipeliner.
func NewBatcher(client Client, max int) *Batcher {
	if max <= 1 {
		return nil
	}
	b := &Batcher{client: client, max: max, inflight: Inflight, direct: int64(Direct)}
	switch c := client.(type) {
	case *redis.Client, ScriptPipeliner: // a ScriptPipeliner routes by slot itself
		b.single = &lane{b: b, node: c}
	case *redis.ClusterClient:
		b.cluster = c
	default:
		return nil
	}
	return b
}

type lane struct {
	b       *Batcher
	node    any          // where pipelines go: a *redis.Client or a ScriptPipeliner
	callers atomic.Int64 // calls inside Run on this lane
	mu      sync.Mutex
	busy    int // round trips in flight or flushers running, ≤ inflight
	q       []*call
}

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
	case <-opened: // the policy answers at once
		c.state.CompareAndSwap(queued, abandoned)
		return nil, ErrOpened
	}
}

// SetGate makes queued calls watch the breaker: opened returns a channel
// closed while it is open, and then queued calls and unsent batches get
// ErrOpened. Call it before the first Run.
func (b *Batcher) SetGate(opened func() <-chan struct{}) {
	if b != nil {
		b.gate = opened
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
	ln.b.mu.Lock()
	ln.b.flushers++
	ln.b.mu.Unlock()
	ln.mu.Unlock()
	go ln.flush()
}

// flush sends the queue, max calls per pipeline, until it is empty.
func (ln *lane) flush() {
	defer ln.b.ended()
	opened := ln.b.gate
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
		if len(batch) == 0 {
			continue
		}
		if opened != nil && closed(opened()) {
			for _, c := range batch {
				c.done <- reply{err: ErrOpened}
			}
			continue
		}
		ln.send(batch)
	}
}

// send runs batch as one round trip and replies to every call in it.
func (ln *lane) send(batch []*call) {
	if len(batch) == 1 { // a plain call, in its caller's context
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
			// Never answered: go-redis leaves the command without its
			// error; Exec returned it.
			err = failed
			if err == nil {
				err = errNoReply
			}
		}
		c.done <- reply{v: v, err: err, alone: ln.b.cluster != nil && needsCluster(err)}
	}
}

// run is redis.Script.Run (EVALSHA, then EVAL on NOSCRIPT) without its
// allocation on a nil error.
func run(ctx context.Context, script *redis.Script, c redis.Scripter, keys []string, args []any) (any, error) {
	v, err := script.EvalSha(ctx, c, keys, args...).Result()
	if NoScript(err) {
		return script.Eval(ctx, c, keys, args...).Result()
	}
	return v, err
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// NoScript reports whether err is a NOSCRIPT reply.
func NoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

// batchContext is a pipeline's context (see the top of this file).
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

// needsCluster reports whether a call failed in a pipeline to a cluster
// node without running (MOVED, ASK, TRYAGAIN, CLUSTERDOWN) and must go
// again through the cluster client. Nothing that may have counted is
// re-sent.
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

// ended counts a flusher out, and closes idle after the last.
func (b *Batcher) ended() {
	b.mu.Lock()
	if b.flushers--; b.flushers == 0 && b.idle != nil {
		close(b.idle)
		b.idle = nil
	}
	b.mu.Unlock()
}

// Wait waits until no flusher runs, or returns ctx's error. A provider
// calls it from Close, after new calls are refused.
func (b *Batcher) Wait(ctx context.Context) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	if b.flushers == 0 {
		b.mu.Unlock()
		return nil
	}
	if b.idle == nil {
		b.idle = make(chan struct{})
	}
	ch := b.idle
	b.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
