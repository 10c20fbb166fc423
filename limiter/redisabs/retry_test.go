package redisabs_test

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// replyHolder is a TCP proxy in front of a Redis server that, when armed,
// holds back the reply to the next EVALSHA for a while: the script ran,
// its answer is late, as when a network drops a packet.
type replyHolder struct {
	ln    net.Listener
	to    string
	hold  time.Duration
	armed atomic.Bool  // the next EVALSHA sent gets a late reply
	held  atomic.Int32 // replies held so far

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newReplyHolder(t *testing.T, to string, hold time.Duration) *replyHolder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &replyHolder{ln: ln, to: to, hold: hold}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *replyHolder) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.to)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		var late atomic.Bool
		go func() { defer p.wg.Done(); p.requests(s, c, &late); s.Close() }()
		go func() { defer p.wg.Done(); p.replies(c, s, &late); c.Close() }()
	}
}

// requests copies client → server. The first EVALSHA written while armed
// marks its connection's next reply late; only an EVALSHA takes the hold,
// so a limiter's background commands (the eviction check at its first
// call, probes) cannot take the hold meant for a decision.
func (p *replyHolder) requests(s, c net.Conn, late *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if bytes.Contains(bytes.ToLower(buf[:n]), []byte("evalsha")) && p.armed.CompareAndSwap(true, false) {
				late.Store(true)
				p.held.Add(1)
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// replies copies server → client, holding the first chunk read after its
// connection's request was marked late.
func (p *replyHolder) replies(c, s net.Conn, late *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if late.CompareAndSwap(true, false) {
				time.Sleep(p.hold)
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *replyHolder) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestGoRedisRetryCountsTwice pins down the go-redis v9.18 behaviour that
// doc.go warns about: with its default MaxRetries, an EVALSHA whose reply
// is late is sent again on a new connection, so one Inc is counted twice;
// with MaxRetries: -1 the call fails and counts once.
func TestGoRedisRetryCountsTwice(t *testing.T) {
	for _, tc := range []struct {
		maxRetries int
		wantUsed   int64
	}{{0, 2}, {-1, 1}} {
		t.Run(fmt.Sprintf("MaxRetries=%d", tc.maxRetries), func(t *testing.T) {
			srv := redistest.Real(t)
			p := newReplyHolder(t, srv.Addr, 300*time.Millisecond)
			opt := srv.Options()
			opt.Addr = p.ln.Addr().String()
			opt.ReadTimeout = 100 * time.Millisecond
			opt.MaxRetries = tc.maxRetries // 0 means go-redis' default: 3 retries
			c := redis.NewClient(opt)
			t.Cleanup(func() { c.Close() })
			prefix := redistest.Prefix(t)
			l, err := redisabs.New(c, limiter.WithPrefix(prefix), limiter.WithFailurePolicy(limiter.FailError))
			if err != nil {
				t.Fatal(err)
			}
			rate := limiter.PerMinute(100)
			mustInc(t, l, "warm", rate, 1) // load the script, open a connection
			p.armed.Store(true)
			d, incErr := l.Inc(ctx, "k", rate, 1)
			reader := newLimiterAt(t, srv.Client(t), prefix)
			u := mustGet(t, reader, "k")
			t.Logf("Inc(k, 1) = %+v, %v; Get(k).Used = %d", d, incErr, u.Used)
			if p.held.Load() != 1 {
				t.Fatalf("%d replies held, want 1", p.held.Load())
			}
			if u.Used != tc.wantUsed {
				t.Errorf("MaxRetries %d: one Inc with a late reply counted %d times, want %d", tc.maxRetries, u.Used, tc.wantUsed)
			}
			if (incErr == nil) != (tc.wantUsed == 2) {
				t.Errorf("MaxRetries %d: Inc error %v", tc.maxRetries, incErr)
			}
		})
	}
}

func newLimiterAt(t *testing.T, c redisabs.Client, prefix string) *redisabs.Limiter {
	t.Helper()
	l, err := redisabs.New(c, limiter.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return l
}
