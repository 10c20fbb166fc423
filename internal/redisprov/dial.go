package redisprov

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// The wire's first word (docs/operations.md, What counts as an outage).
//
// go-redis retries a failed dial inside its pool (DialerRetries, 5 by
// default, 100 ms apart) until the call's deadline, and the call then
// returns the deadline, not the refused connection: to the guard a dead
// Redis would look like a slow one, and its first calls would be shed
// while a confirming probe finds out. So the guard watches the client's
// dials itself, with a go-redis dial hook: a dial that fails on the wire
// (refused, reset, unreachable; not a dial that timed out, which is a
// black hole's or a busy machine's) opens the breaker at once, and the
// calls waiting on that client (bounded ones at once, the others at
// their deadline) are answered by the policy. A dial that timed out
// proves nothing, as any timeout, and the confirming probe decides.

// dialWatch is the dial hook the guard adds to the client (and, for a
// cluster or a ring, to each node client made after New). It holds the
// guard until Close, then does nothing: go-redis has no way to remove a
// hook, so each limiter built on a client leaves one on it, which costs a
// function call per dial and nothing per command.
type dialWatch struct{ g atomic.Pointer[Guard] }

func (w *dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			if g := w.g.Load(); g != nil && wireEvidence(err) {
				err := fmt.Errorf("%s: dial %s: %w", g.pkg, addr, err)
				if !g.tripNode(addr, err) {
					g.trip(err)
				}
			}
		}
		return c, err
	}
}

func (w *dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (w *dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// watchDials adds g's dial hook to client.
func (g *Guard) watchDials(client Client) {
	g.watch = new(dialWatch)
	g.watch.g.Store(g)
	switch c := client.(type) {
	case *redis.Client:
		c.AddHook(g.watch)
	case *redis.ClusterClient:
		c.OnNewNode(func(n *redis.Client) { n.AddHook(g.watch) })
	case *redis.Ring:
		c.OnNewNode(func(n *redis.Client) { n.AddHook(g.watch) })
	}
}

// prober is the probe's own client of a *redis.Client: one connection,
// so that a probe never waits for a pooled connection behind the callers
// whose timeouts it judges. It is built from the user's options but dials
// once per probe (DialerRetries 1: a refused dial is the probe's answer,
// not a deadline), with no maintenance notifications and no push
// notification processor of the user's client (sharing them made go-redis
// log, and under MaintNotificationsConfig Mode enabled panic), and none
// of the user's hooks; its calls' deadlines bound its sockets
// (ContextTimeoutEnabled). go-redis' pool, after a failed dial, answers with
// that dial's error until its own redial once a second succeeds: so a
// probe that fails on the connection (not with a reply) replaces the
// client, and the next probe dials afresh.
type prober struct {
	base *redis.Options
	mu   sync.Mutex
	cur  *redis.Client
	gone []*redis.Client // replaced, closed by close
}

// newProber returns the prober of client: its own client for a
// *redis.Client, else nil.
func newProber(client Client) *prober {
	rc, ok := client.(*redis.Client)
	if !ok {
		return nil
	}
	o := *rc.Options()
	o.PoolSize, o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns = 1, 0, 1, 1
	o.DialerRetries = 1
	// The probe's deadline bounds its socket reads and writes too: a
	// probe of a frozen Redis ends at its deadline, never at the user's
	// ReadTimeout (3 s by default), so that the next probe may go.
	o.ContextTimeoutEnabled = true
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	o.PushNotificationProcessor = nil
	p := &prober{base: &o}
	p.cur = p.build()
	return p
}

func (p *prober) build() *redis.Client {
	o := *p.base
	return redis.NewClient(&o)
}

// client returns the client a probe runs on.
func (p *prober) client() *redis.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// maxGone bounds the replaced clients kept open: the oldest is closed
// beyond it (probes run one at a time, so by then none uses it).
const maxGone = 4

// failed replaces c, the client of a probe that failed with err, when err
// is a connection's (a dial refused, a connection reset), not a reply: the
// next probe dials afresh. A replaced client stays open a few
// replacements more: probes may overlap (a Ping beside the breaker's
// probe), and one still on a closed client would read its error as an
// answer.
func (p *prober) failed(c *redis.Client, err error) {
	var re redis.Error
	if !wireEvidence(err) || errors.As(err, &re) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != c {
		return
	}
	p.gone = append(p.gone, p.cur)
	if len(p.gone) > maxGone {
		p.gone[0].Close()
		p.gone = slices.Delete(p.gone, 0, 1)
	}
	p.cur = p.build()
}

// close closes the prober's clients.
func (p *prober) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur.Close()
	for _, c := range p.gone {
		c.Close()
	}
	p.gone = nil
}
