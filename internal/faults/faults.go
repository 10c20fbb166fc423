// Package faults injects Redis failures into tests: a black-holing TCP
// proxy on loopback and helpers that pause, slow down, empty or fill a real
// redis-server started by package redistest. Together with
// redistest.Server's Stop and Restart (same port) they cover the failures a
// rate limiter meets in production. RunMatrix drives a provider through all
// of them under load.
package faults

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
)

// Proxy forwards TCP connections from a loopback port to a target address
// until Blackhole is switched on; from then on it accepts connections and
// reads what they send but never answers nor forwards, the network failure
// that hangs clients in production (no RST, no FIN). Switching it off closes
// the black-holed connections, as a client would find after its timeout,
// and forwards new ones again. Methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	hole  bool
	conns map[net.Conn]bool // value: black-holed
	wg    sync.WaitGroup
	done  bool
}

// NewProxy listens on 127.0.0.1 and forwards to target; closed at
// t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faults.NewProxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]bool)}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Blackhole switches black-holing on or off.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hole = on
	if on {
		for c := range p.conns {
			p.conns[c] = true
		}
		return
	}
	for c, holed := range p.conns {
		if holed {
			c.Close()
		}
	}
}

func (p *Proxy) holed(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hole || p.conns[c]
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns[c] = p.hole
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c)
	}
}

// serve forwards one connection, dropping bytes both ways while it is
// black-holed.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	if p.holed(c) {
		io.Copy(io.Discard, c) // until Blackhole(false) or Close closes c
		return
	}
	s, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		return
	}
	defer s.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.pump(s, c, c)
		s.Close()
	}()
	p.pump(c, s, c)
	c.Close()
	wg.Wait()
}

// pump copies src to dst, dropping what arrives while conn is black-holed.
func (p *Proxy) pump(dst, src, conn net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.holed(conn) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.done = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// Admin returns a client of srv for injecting faults, closed at t.Cleanup.
// Its read timeout is long enough for DEBUG SLEEP.
func Admin(t testing.TB, srv *redistest.Server) *redis.Client {
	t.Helper()
	opt := srv.Options()
	opt.ReadTimeout = 10 * time.Second
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// ClientPause runs CLIENT PAUSE d (all commands of every other client wait
// until it ends).
func ClientPause(ctx context.Context, admin *redis.Client, d time.Duration) error {
	return admin.ClientPause(ctx, d).Err()
}

// DebugSleep runs DEBUG SLEEP d, which blocks the whole server for d, and
// returns when it is over. The server must allow DEBUG from loopback
// (redistest starts it with --enable-debug-command local).
func DebugSleep(ctx context.Context, admin *redis.Client, d time.Duration) error {
	return admin.Do(ctx, "DEBUG", "SLEEP", d.Seconds()).Err()
}

// ScriptFlush empties the server's script cache (clients then get NOSCRIPT).
func ScriptFlush(ctx context.Context, admin *redis.Client) error {
	return admin.ScriptFlush(ctx).Err()
}

// OOM sets maxmemory to one byte with the noeviction policy, so that every
// write is refused with an OOM reply; the returned function restores no
// limit.
func OOM(ctx context.Context, admin *redis.Client) (restore func() error, err error) {
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		return nil, err
	}
	if err := admin.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		return nil, err
	}
	return func() error { return admin.ConfigSet(context.Background(), "maxmemory", "0").Err() }, nil
}
