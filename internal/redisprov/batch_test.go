package redisprov

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// incr adds ARGV[1] to KEYS[1] and returns the new value: each call's
// effect can be counted.
var incr = redis.NewScript("return redis.call('INCRBY', KEYS[1], ARGV[1])")

// gate is a go-redis hook that can hold the next single command or the
// next pipeline until released, and records every pipeline's commands.
type gate struct {
	holdCall, holdPipe atomic.Bool
	held               chan struct{} // one value per held command or pipeline
	release            chan struct{} // closed to let them go

	mu     sync.Mutex
	pipes  [][]string // the command names of each pipeline
	onPipe func(cmds []redis.Cmder)
}

func newGate() *gate {
	return &gate{held: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) && g.holdCall.CompareAndSwap(true, false) {
			g.held <- struct{}{}
			<-g.release
		}
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || !isScript(cmds[0]) { // a connection's handshake
			return next(ctx, cmds)
		}
		names := make([]string, len(cmds))
		for i, c := range cmds {
			names[i] = c.Name()
		}
		g.mu.Lock()
		g.pipes = append(g.pipes, names)
		fn := g.onPipe
		g.mu.Unlock()
		if fn != nil {
			fn(cmds)
		}
		if g.holdPipe.CompareAndSwap(true, false) {
			g.held <- struct{}{}
			<-g.release
		}
		return next(ctx, cmds)
	}
}

func isScript(cmd redis.Cmder) bool { return cmd.Name() == "evalsha" || cmd.Name() == "eval" }

func (g *gate) pipelines() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([][]string(nil), g.pipes...)
}

// waitHeld waits for the gate to hold a command or a pipeline.
func waitHeld(t *testing.T, g *gate) {
	t.Helper()
	select {
	case <-g.held:
	case <-time.After(10 * time.Second):
		t.Fatal("no call reached the gate")
	}
}

// waitQueued waits until ln's queue holds n calls.
func waitQueued(t *testing.T, ln *lane, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ln.mu.Lock()
		q := len(ln.q)
		ln.mu.Unlock()
		if q == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lane queue holds %d calls, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

type result struct {
	v   any
	err error
}

// goRun runs b.Run(ctx, incr, {k}, 1) on a goroutine of its own.
func goRun(ctx context.Context, b *Batcher, k string) <-chan result {
	out := make(chan result, 1)
	go func() {
		v, err := b.Run(ctx, incr, []string{k}, 1)
		out <- result{v, err}
	}()
	return out
}

func gatedClient(t *testing.T) (*redis.Client, *gate) {
	t.Helper()
	c := redistest.Real(t).Client(t)
	g := newGate()
	c.AddHook(g)
	return c, g
}

// holdFirst lets b batch from the first concurrent call on and keep one
// round trip in flight, starts a call on k that the gate holds, and
// returns once it is held: the calls that follow queue behind it.
func holdFirst(ctx context.Context, t *testing.T, b *Batcher, g *gate, k string) <-chan result {
	t.Helper()
	b.direct, b.inflight = 0, 1
	g.holdCall.Store(true)
	first := goRun(ctx, b, k)
	waitHeld(t, g)
	return first
}

// wantCanceled checks that the call of out, whose context was cancelled,
// returns context.Canceled at once, without waiting for what.
func wantCanceled(t *testing.T, out <-chan result, what string) {
	t.Helper()
	select {
	case r := <-out:
		if !errors.Is(r.err, context.Canceled) {
			t.Errorf("the cancelled call = %v, %v; want context.Canceled", r.v, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the cancelled call waits for %s", what)
	}
}

// TestBatchLoneCaller: calls one after the other never wait for a batch
// and are never pipelined: each is a call of its own, as without batching.
func TestBatchLoneCaller(t *testing.T) {
	c, g := gatedClient(t)
	b := NewBatcher(c, 8)
	k := redistest.Prefix(t) + ":k"
	for i := 1; i <= 100; i++ {
		v, err := b.Run(context.Background(), incr, []string{k}, 1)
		if err != nil || v != int64(i) {
			t.Fatalf("Run #%d = %v, %v; want %d", i, v, err, i)
		}
	}
	if p := g.pipelines(); len(p) != 0 {
		t.Errorf("a lone caller sent %d pipelines, want none: %v", len(p), p)
	}
	if err := b.Wait(context.Background()); err != nil {
		t.Errorf("Wait = %v", err)
	}
}

// TestBatchCollectsWaitingCalls: the calls that arrive while a round trip
// is in flight go out together in pipelines of at most max calls, and each
// gets its own reply.
func TestBatchCollectsWaitingCalls(t *testing.T) {
	c, g := gatedClient(t)
	b := NewBatcher(c, 4)
	p := redistest.Prefix(t)
	first := holdFirst(context.Background(), t, b, g, p+":first")
	const n = 10
	outs := make([]<-chan result, n)
	for i := range outs {
		outs[i] = goRun(context.Background(), b, fmt.Sprintf("%s:%d", p, i))
	}
	waitQueued(t, b.single, n)
	close(g.release)
	if r := <-first; r.err != nil || r.v != int64(1) {
		t.Fatalf("the first call = %v, %v; want 1", r.v, r.err)
	}
	for i, out := range outs {
		if r := <-out; r.err != nil || r.v != int64(1) {
			t.Errorf("call %d = %v, %v; want 1", i, r.v, r.err)
		}
	}
	if err := b.Wait(context.Background()); err != nil {
		t.Fatalf("Wait = %v", err)
	}
	var sizes []int
	for _, pl := range g.pipelines() {
		sizes = append(sizes, len(pl))
	}
	if fmt.Sprint(sizes) != "[4 4 2]" {
		t.Errorf("pipeline sizes %v, want [4 4 2]: the 10 waiting calls in batches of at most 4", sizes)
	}
}

// TestBatchTwoInFlight: once batching has started (here from the first
// concurrent call, Direct 0), with the default Inflight two calls run at
// once, each alone, and only a third one waits.
func TestBatchTwoInFlight(t *testing.T) {
	c, g := gatedClient(t)
	b := NewBatcher(c, 8)
	if b.inflight != 2 {
		t.Fatalf("inflight = %d, want Inflight = 2", b.inflight)
	}
	b.direct = 0
	p := redistest.Prefix(t)
	var outs []<-chan result
	for i := 0; i < 2; i++ {
		g.holdCall.Store(true)
		outs = append(outs, goRun(context.Background(), b, p+":k"))
		waitHeld(t, g) // held on the wire, not queued
	}
	waitQueued(t, b.single, 0)
	outs = append(outs, goRun(context.Background(), b, p+":k"))
	waitQueued(t, b.single, 1)
	close(g.release)
	for i, out := range outs {
		if r := <-out; r.err != nil {
			t.Errorf("call %d = %v, %v", i, r.v, r.err)
		}
	}
	if v, err := c.Get(context.Background(), p+":k").Int64(); err != nil || v != 3 {
		t.Errorf("the key counts %d, %v; want 3", v, err)
	}
}

// TestBatchDirect: up to Direct concurrent callers every call goes out at
// once and alone, as without batching: Direct calls are on the wire
// together and none waits. Above Direct the batched path takes over: two
// more calls are in flight alone (Inflight), the ones after them wait and
// go out as one pipeline. Once the callers are gone, calls go out alone
// again.
func TestBatchDirect(t *testing.T) {
	c, g := gatedClient(t)
	b := NewBatcher(c, 64)
	d := int(b.direct)
	if d != Direct || d <= Inflight {
		t.Fatalf("direct = %d, want Direct = %d, more than Inflight = %d", d, Direct, Inflight)
	}
	g.held = make(chan struct{}, d+Inflight)
	p := redistest.Prefix(t)
	var outs []<-chan result
	for i := 0; i < d+Inflight; i++ {
		g.holdCall.Store(true)
		outs = append(outs, goRun(context.Background(), b, p+":k"))
		waitHeld(t, g) // on the wire, alone: not queued
		if i == d-1 {
			waitQueued(t, b.single, 0)
			b.single.mu.Lock()
			busy := b.single.busy
			b.single.mu.Unlock()
			if busy != 0 {
				t.Errorf("%d callers took %d places of the batched path, want none: they run as unbatched calls", d, busy)
			}
		}
	}
	if n := b.single.callers.Load(); n != int64(d+Inflight) {
		t.Errorf("the lane counts %d callers, want %d", n, d+Inflight)
	}
	const n = 5
	for i := 0; i < n; i++ {
		outs = append(outs, goRun(context.Background(), b, p+":k"))
	}
	waitQueued(t, b.single, n)
	close(g.release)
	for i, out := range outs {
		if r := <-out; r.err != nil {
			t.Errorf("call %d = %v, %v", i, r.v, r.err)
		}
	}
	if err := b.Wait(context.Background()); err != nil {
		t.Fatalf("Wait = %v", err)
	}
	if v, err := c.Get(context.Background(), p+":k").Int64(); err != nil || v != int64(d+Inflight+n) {
		t.Errorf("the key counts %d, %v; want %d", v, err, d+Inflight+n)
	}
	var sizes []int
	for _, pl := range g.pipelines() {
		sizes = append(sizes, len(pl))
	}
	if fmt.Sprint(sizes) != fmt.Sprint([]int{n}) {
		t.Errorf("pipeline sizes %v, want [%d]: the calls above Direct + Inflight wait and go out together", sizes, n)
	}
	if k := b.single.callers.Load(); k != 0 {
		t.Fatalf("the lane counts %d callers after all returned, want 0", k)
	}
	for i := 0; i < 10; i++ {
		if _, err := b.Run(context.Background(), incr, []string{p + ":k"}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(g.pipelines()); got != 1 {
		t.Errorf("%d pipelines after a lone caller's calls, want still 1", got)
	}
}

// TestBatchNoScript: a SCRIPT FLUSH between the calls' queueing and their
// pipeline makes every EVALSHA of the batch fail with NOSCRIPT; the batch
// sends them again as EVAL, and each call runs exactly once.
func TestBatchNoScript(t *testing.T) {
	c, g := gatedClient(t)
	admin := redistest.Real(t).Client(t)
	b := NewBatcher(c, 16)
	p := redistest.Prefix(t)
	if err := incr.Load(context.Background(), c).Err(); err != nil {
		t.Fatal(err)
	}
	var flushed atomic.Bool
	g.onPipe = func(cmds []redis.Cmder) {
		if len(cmds) > 1 && flushed.CompareAndSwap(false, true) {
			if err := admin.ScriptFlush(context.Background()).Err(); err != nil {
				t.Errorf("SCRIPT FLUSH: %v", err)
			}
		}
	}
	first := holdFirst(context.Background(), t, b, g, p+":first")
	const n = 8
	outs := make([]<-chan result, n)
	for i := range outs {
		outs[i] = goRun(context.Background(), b, p+":shared")
	}
	waitQueued(t, b.single, n)
	close(g.release)
	<-first
	seen := map[int64]bool{}
	for i, out := range outs {
		r := <-out
		v, ok := r.v.(int64)
		if r.err != nil || !ok || v < 1 || v > n || seen[v] {
			t.Errorf("call %d = %v, %v; want a distinct count in [1, %d]", i, r.v, r.err, n)
		}
		seen[v] = true
	}
	if got, err := c.Get(context.Background(), p+":shared").Int64(); err != nil || got != n {
		t.Errorf("the key counts %d (%v) after %d calls, want %d: each call runs exactly once", got, err, n, n)
	}
	pipes := g.pipelines()
	if len(pipes) != 2 || len(pipes[0]) != n || pipes[0][0] != "evalsha" || len(pipes[1]) != n || pipes[1][0] != "eval" {
		t.Errorf("pipelines %v, want one of %d EVALSHA, then one of %d EVAL", pipes, n, n)
	}
}

// TestBatchCancelledWhileQueued: a caller whose context ends while its call
// waits returns the context's error at once, its call is never sent, and
// the batch goes on without it.
func TestBatchCancelledWhileQueued(t *testing.T) {
	c, g := gatedClient(t)
	b := NewBatcher(c, 16)
	p := redistest.Prefix(t)
	first := holdFirst(context.Background(), t, b, g, p+":first")
	ctx, cancel := context.WithCancel(context.Background())
	gone := goRun(ctx, b, p+":cancelled")
	waitQueued(t, b.single, 1)
	kept := []<-chan result{goRun(context.Background(), b, p+":kept"), goRun(context.Background(), b, p+":kept")}
	waitQueued(t, b.single, 3)
	cancel()
	wantCanceled(t, gone, "the round trip in flight")
	close(g.release)
	<-first
	for i, out := range kept {
		if r := <-out; r.err != nil {
			t.Errorf("kept call %d = %v, %v", i, r.v, r.err)
		}
	}
	if n, err := c.Exists(context.Background(), p+":cancelled").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS of the cancelled call's key = %d, %v; want 0: a call cancelled while queued is never sent", n, err)
	}
	if got, err := c.Get(context.Background(), p+":kept").Int64(); err != nil || got != 2 {
		t.Errorf("the kept key counts %d, %v; want 2", got, err)
	}
	if n := b.single.callers.Load(); n != 0 {
		t.Errorf("the lane counts %d callers after all returned, want 0: a cancelled caller must leave it", n)
	}
}

// TestBatchCancelledInFlight: a caller whose context ends while its
// pipeline is in flight returns at once; the others of the batch get their
// replies.
func TestBatchCancelledInFlight(t *testing.T) {
	c, g := gatedClient(t)
	b := NewBatcher(c, 16)
	p := redistest.Prefix(t)
	first := holdFirst(context.Background(), t, b, g, p+":first")
	ctx, cancel := context.WithCancel(context.Background())
	gone := goRun(ctx, b, p+":k")
	waitQueued(t, b.single, 1)
	kept := goRun(context.Background(), b, p+":k")
	waitQueued(t, b.single, 2)
	g.holdPipe.Store(true)
	g.release <- struct{}{} // let the first call go; the gate holds the pipeline next
	waitHeld(t, g)
	cancel()
	wantCanceled(t, gone, "its pipeline")
	close(g.release)
	<-first
	if r := <-kept; r.err != nil {
		t.Errorf("the other call of the batch = %v, %v", r.v, r.err)
	}
	if err := b.Wait(context.Background()); err != nil {
		t.Fatalf("Wait = %v", err)
	}
}

// TestBatchServerFails: with a batch's pipeline about to be sent, the
// server is paused (nothing answers) or killed: every caller of the batch
// gets an error by its own deadline, and the flusher ends.
func TestBatchServerFails(t *testing.T) {
	for _, kill := range []bool{false, true} {
		name := "paused"
		if kill {
			name = "killed"
		}
		t.Run(name, func(t *testing.T) { testBatchServerFails(t, kill) })
	}
}

func testBatchServerFails(t *testing.T, kill bool) {
	s := redistest.StartServer(t)
	opt := s.Options()
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	g := newGate()
	c.AddHook(g)
	b := NewBatcher(c, 16)
	first := holdFirst(context.Background(), t, b, g, "first")
	const timeout = 300 * time.Millisecond
	const n = 12
	outs := make([]<-chan result, n)
	deadlines := make([]time.Time, n)
	for i := range outs {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		deadlines[i], _ = ctx.Deadline()
		outs[i] = goRun(ctx, b, fmt.Sprint("k", i))
	}
	waitQueued(t, b.single, n)
	g.holdPipe.Store(true)
	g.release <- struct{}{}
	if r := <-first; r.err != nil {
		t.Fatalf("the first call = %v, %v", r.v, r.err)
	}
	waitHeld(t, g) // the batch's pipeline is about to be sent
	if kill {
		s.Stop()
	} else if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	const slack = 2 * time.Second // a loaded machine's scheduling, not the bound
	for i, out := range outs {
		select {
		case r := <-out:
			if r.err == nil {
				t.Errorf("call %d = %v, want an error", i, r.v)
			}
			if late := time.Since(deadlines[i]); late > slack {
				t.Errorf("call %d answered %v after its deadline", i, late)
			}
		case <-time.After(time.Until(deadlines[i]) + slack):
			t.Fatalf("call %d has no answer %v after its deadline", i, slack)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Wait(ctx); err != nil {
		t.Errorf("Wait = %v: the flusher did not end", err)
	}
	s.Stop()
}

// TestBatchConcurrent: many goroutines on one key and on many keys, on
// real Redis, miniredis and the cluster: every call runs exactly once.
func TestBatchConcurrent(t *testing.T) {
	_, mini := redistest.Mini(t)
	clients := map[string]Client{
		"real":    redistest.Real(t).Client(t),
		"mini":    mini,
		"cluster": redistest.Cluster(t),
	}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			b := NewBatcher(c, 32)
			if b == nil {
				t.Fatalf("NewBatcher(%T) = nil, want batching", c)
			}
			p := redistest.Prefix(t)
			const goroutines, calls, keys = 64, 50, 16
			var wg sync.WaitGroup
			var failed atomic.Int64
			for i := 0; i < goroutines; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := 0; j < calls; j++ {
						k := fmt.Sprintf("%s:{%d}", p, (i+j)%keys)
						if _, err := b.Run(context.Background(), incr, []string{k}, 1); err != nil {
							failed.Add(1)
							t.Errorf("Run(%s) = %v", k, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if failed.Load() > 0 {
				return
			}
			total := int64(0)
			for i := 0; i < keys; i++ {
				v, err := incr.Run(context.Background(), c, []string{fmt.Sprintf("%s:{%d}", p, i)}, 0).Int64()
				if err != nil {
					t.Fatal(err)
				}
				total += v
			}
			if total != goroutines*calls {
				t.Errorf("the keys count %d, want %d: every call exactly once", total, goroutines*calls)
			}
			if err := b.Wait(context.Background()); err != nil {
				t.Errorf("Wait = %v", err)
			}
		})
	}
}

// TestBatchClusterLanes: on a cluster, each master has its own lane, and
// keys of one master share it.
func TestBatchClusterLanes(t *testing.T) {
	c := redistest.Cluster(t)
	b := NewBatcher(c, 8)
	ctx := context.Background()
	byNode := map[*lane]map[string]bool{}
	for i := 0; i < 64; i++ {
		k := fmt.Sprint("lane", i)
		ln := b.lane(ctx, []string{k})
		node, err := c.MasterForKey(ctx, k)
		if ln == nil || err != nil || ln.node != node {
			t.Fatalf("lane(%q) = %v, want the lane of master %v (%v)", k, ln, node, err)
		}
		if byNode[ln] == nil {
			byNode[ln] = map[string]bool{}
		}
		byNode[ln][node.Options().Addr] = true
	}
	if len(byNode) != len(redistest.ClusterMasters(t)) {
		t.Errorf("%d lanes for 64 keys, want one per master (%d)", len(byNode), len(redistest.ClusterMasters(t)))
	}
	for ln, addrs := range byNode {
		if len(addrs) != 1 {
			t.Errorf("lane %p serves masters %v, want one", ln, addrs)
		}
	}
}

// TestBatchUnbatchedClients: clients that are neither a Client nor a
// ClusterClient, and a cap of 1 or less, run every call alone.
func TestBatchUnbatchedClients(t *testing.T) {
	c := redistest.Real(t).Client(t)
	for _, max := range []int{-1, 0, 1} {
		if b := NewBatcher(c, max); b != nil {
			t.Errorf("NewBatcher(client, %d) = %v, want nil", max, b)
		}
	}
	if b := NewBatcher(redistest.Ring(t), 8); b != nil {
		t.Errorf("NewBatcher(ring, 8) = %v, want nil", b)
	}
}

// TestNeedsCluster: which pipeline errors send a call again through the
// cluster client.
func TestNeedsCluster(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{redisErr("MOVED 3999 127.0.0.1:6381"), true},
		{redisErr("ASK 3999 127.0.0.1:6381"), true},
		{redisErr("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{redisErr("CLUSTERDOWN The cluster is down"), true},
		{redisErr("ERR Error running script"), false},
		{redisErr("NOSCRIPT No matching script"), false},
		{context.DeadlineExceeded, false},
		{redis.ErrClosed, false},
		{io.EOF, false}, // the script may have run: never sent again
	} {
		if got := needsCluster(c.err); got != c.want {
			t.Errorf("needsCluster(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestReplyChecksAllocateNothing: reading a healthy reply (no error) for
// NOSCRIPT and for the cluster's redirections allocates nothing.
// redis.HasErrorPrefix allocates even for a nil error, and a batched call
// on a cluster asked it five times (docs/benchmarks.md, Redis throughput:
// batching).
func TestReplyChecksAllocateNothing(t *testing.T) {
	var err error
	if n := testing.AllocsPerRun(100, func() {
		if NoScript(err) || needsCluster(err) {
			t.Fatal("a nil error read as NOSCRIPT or a redirection")
		}
	}); n != 0 {
		t.Errorf("NoScript(nil) and needsCluster(nil): %v allocations, want 0", n)
	}
	if !NoScript(redisErr("NOSCRIPT No matching script. Please use EVAL.")) {
		t.Error("NoScript(NOSCRIPT …) = false")
	}
	if NoScript(redisErr("ERR Error running script")) {
		t.Error("NoScript(ERR …) = true")
	}
}

type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

// TestBatchMovedSlot: a slot moves to another master while the cluster
// client still routes it to the old one. The batch sends its calls to the
// old master, which answers MOVED; each is sent again alone through the
// cluster client, which follows the redirection, and runs exactly once.
func TestBatchMovedSlot(t *testing.T) {
	c := redistest.Cluster(t)
	ctx := context.Background()
	p := redistest.Prefix(t)
	moved := p + ":{moved}"
	src, err := c.MasterForKey(ctx, moved)
	if err != nil {
		t.Fatal(err)
	}
	slot, err := c.ClusterKeySlot(ctx, moved).Result()
	if err != nil {
		t.Fatal(err)
	}
	var stay string // a key of the same master in another slot
	for i := 0; stay == ""; i++ {
		k := fmt.Sprintf("%s:{stay%d}", p, i)
		n, err := c.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if s, _ := c.ClusterKeySlot(ctx, k).Result(); n == src && s != slot {
			stay = k
		}
	}
	admins := map[string]*redis.Client{}
	var dst string
	for _, addr := range redistest.ClusterMasters(t) {
		a := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { a.Close() })
		admins[addr] = a
		if addr != src.Options().Addr && dst == "" {
			dst = addr
		}
	}
	if v, err := incr.Run(ctx, c, []string{moved}, 100).Int64(); err != nil || v != 100 {
		t.Fatalf("INCRBY %s = %d, %v", moved, v, err)
	}
	moveSlot(t, admins, slot, src.Options().Addr, dst)
	t.Cleanup(func() { moveSlot(t, admins, slot, dst, src.Options().Addr) })

	var movedReplies atomic.Int64
	src.AddHook(movedCounter{&movedReplies})
	g := newGate()
	c.AddHook(g)
	b := NewBatcher(c, 16)
	ln := b.lane(ctx, []string{moved})
	if ln == nil || ln.node != src {
		t.Fatalf("lane(%q) = %v, want the old master's: the cluster client must not know of the move yet", moved, ln)
	}
	first := holdFirst(ctx, t, b, g, stay)
	const n = 6
	outs := make([]<-chan result, n)
	for i := range outs {
		outs[i] = goRun(ctx, b, moved)
	}
	waitQueued(t, ln, n)
	close(g.release)
	if r := <-first; r.err != nil {
		t.Fatalf("the first call = %v, %v", r.v, r.err)
	}
	seen := map[int64]bool{}
	for i, out := range outs {
		r := <-out
		v, ok := r.v.(int64)
		if r.err != nil || !ok || v <= 100 || v > 100+n || seen[v] {
			t.Errorf("call %d = %v, %v; want a distinct count in [101, %d]", i, r.v, r.err, 100+n)
		}
		seen[v] = true
	}
	if v, err := admins[dst].Get(ctx, moved).Int64(); err != nil || v != 100+n {
		t.Errorf("GET %s on the new master = %d, %v; want %d: each call exactly once", moved, v, err, 100+n)
	}
	if movedReplies.Load() == 0 {
		t.Error("the old master answered no MOVED: the batch did not go through the stale lane")
	}
}

// movedCounter counts the MOVED replies of a node's pipelines.
type movedCounter struct{ n *atomic.Int64 }

func (m movedCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (m movedCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (m movedCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if redis.HasErrorPrefix(c.Err(), "MOVED") {
				m.n.Add(1)
			}
		}
		return err
	}
}

// moveSlot moves slot and its keys from master from to master to, as
// redis-cli --cluster reshard does: IMPORTING, MIGRATING, MIGRATE of each
// key, then SETSLOT NODE on every master.
func moveSlot(t *testing.T, admins map[string]*redis.Client, slot int64, from, to string) {
	t.Helper()
	ctx := context.Background()
	id := func(addr string) string {
		s, err := admins[addr].Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatalf("CLUSTER MYID on %s: %v", addr, err)
		}
		return s
	}
	fromID, toID := id(from), id(to)
	must := func(addr string, args ...any) {
		if err := admins[addr].Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", args, addr, err)
		}
	}
	must(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID)
	must(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID)
	host, port, _ := strings.Cut(to, ":")
	for {
		keys, err := admins[from].ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			break
		}
		for _, k := range keys {
			if err := admins[from].Migrate(ctx, host, port, k, 0, 5*time.Second).Err(); err != nil {
				t.Fatalf("MIGRATE %s: %v", k, err)
			}
		}
	}
	must(to, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	must(from, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	for addr := range admins {
		if addr != to && addr != from {
			must(addr, "CLUSTER", "SETSLOT", slot, "NODE", toID)
		}
	}
}
