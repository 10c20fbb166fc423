package redisprov

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// dialWatch is the dial hook the guard adds to the client (and to each
// later node client of a cluster or ring): go-redis retries a failed dial
// until the call's deadline, which would make a dead Redis look slow, so
// a dial that fails on the wire opens the breaker at once. go-redis
// cannot remove a hook: after Close it stays and does nothing.
type dialWatch struct{ g atomic.Pointer[Guard] }

func (w *dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if g := w.g.Load(); err != nil && g != nil && wireEvidence(err) {
			err := fmt.Errorf("%s: dial %s: %w", g.b.pkg, addr, err)
			if !g.tripNode(addr, err) {
				g.trip(err)
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
	case interface{ OnNewNode(func(*redis.Client)) }: // a cluster or ring
		c.OnNewNode(func(n *redis.Client) { n.AddHook(g.watch) })
	}
}

// prober is the probe's own client of a *redis.Client: one connection, so
// a probe never queues behind the callers whose timeouts it judges. It
// has the user's options but for one dial per probe, deadlines on its
// sockets, none of the user's hooks, and no maintenance or push
// notifications (sharing those makes go-redis log or panic).
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
	o.ContextTimeoutEnabled = true // a frozen Redis's probe ends at its deadline
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

// maxGone is how many replaced clients stay open, as probes may overlap
// (a Ping beside the breaker's).
const maxGone = 4

// failed replaces c, the client of a probe that failed with err, when err
// is a connection's, not a reply: go-redis' pool repeats a failed dial's
// error for a second.
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
		p.gone = p.gone[1:]
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
