package clusterit_test

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// lateReplies is a go-redis Dialer whose connections, when armed, deliver
// the reply to the next EVALSHA late: the script ran on the server, the
// client's read times out, as when a network drops a packet.
type lateReplies struct {
	hold  time.Duration
	armed atomic.Bool  // the next EVALSHA written gets a late reply
	held  atomic.Int32 // replies held so far
}

func (r *lateReplies) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &lateConn{Conn: c, r: r}, nil
}

type lateConn struct {
	net.Conn
	r    *lateReplies
	late atomic.Bool
}

var evalsha = []byte("evalsha")

func (c *lateConn) Write(p []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(p), evalsha) && c.r.armed.CompareAndSwap(true, false) {
		c.late.Store(true)
	}
	return c.Conn.Write(p)
}

// Read sleeps past the read deadline go-redis set, so the read that
// follows times out with the reply still unread.
func (c *lateConn) Read(p []byte) (int, error) {
	if c.late.CompareAndSwap(true, false) {
		c.r.held.Add(1)
		time.Sleep(c.r.hold)
	}
	return c.Conn.Read(p)
}

// TestGoRedisResendsLateIncrements pins what go-redis v9.18 does with an
// EVALSHA whose reply comes after the read timeout: with its default
// settings a ClusterClient (MaxRedirects 3) and a Ring (MaxRetries 3) send
// it again, so one Inc counts twice and returns no error; with
// MaxRedirects: -1 or MaxRetries: -1 the Inc fails and counts once. This is
// why docs/operations.md recommends turning retries off.
func TestGoRedisResendsLateIncrements(t *testing.T) {
	t.Parallel()
	const (
		timeout = 100 * time.Millisecond
		hold    = 3 * timeout
	)
	type client struct {
		name string
		open func(t *testing.T, d *lateReplies, noRetries bool) redisabs.Client
		// plain opens a client with the harness's settings, for reading
		// what Redis counted: the short read timeout of open's clients
		// would make that read flaky on a loaded machine.
		plain func(t *testing.T) redisabs.Client
	}
	clients := []client{
		{"ClusterClient", func(t *testing.T, d *lateReplies, noRetries bool) redisabs.Client {
			opt := redistest.ClusterOptions(t)
			opt.Dialer, opt.ReadTimeout = d.dial, timeout
			if noRetries {
				opt.MaxRedirects = -1
			}
			c := redis.NewClusterClient(opt)
			t.Cleanup(func() { c.Close() })
			return c
		}, func(t *testing.T) redisabs.Client {
			c := redis.NewClusterClient(redistest.ClusterOptions(t))
			t.Cleanup(func() { c.Close() })
			return c
		}},
		{"Ring", func(t *testing.T, d *lateReplies, noRetries bool) redisabs.Client {
			opt := redistest.RingOptions(t)
			opt.Dialer, opt.ReadTimeout = d.dial, timeout
			if noRetries {
				opt.MaxRetries = -1
			}
			r := redis.NewRing(opt)
			t.Cleanup(func() { r.Close() })
			return r
		}, func(t *testing.T) redisabs.Client {
			r := redis.NewRing(redistest.RingOptions(t))
			t.Cleanup(func() { r.Close() })
			return r
		}},
	}
	for _, cl := range clients {
		for _, noRetries := range []bool{false, true} {
			name := cl.name + "/default"
			if noRetries {
				name = cl.name + "/retries-off"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				d := &lateReplies{hold: hold}
				// FailError and no per-call timeout: this test is about go-redis's
				// retries, not the failure policy.
				client, prefix := cl.open(t, d, noRetries), redistest.Prefix(t)
				l, err := redisabs.New(client, limiter.WithPrefix(prefix),
					limiter.WithTimeout(0), limiter.WithFailurePolicy(limiter.FailError))
				if err != nil {
					t.Fatal(err)
				}
				rate := limiter.PerMinute(100)
				// Load the script and open a connection to the key's node.
				if _, err := l.Inc(ctx, "k", rate, 0); err != nil {
					t.Fatalf("Inc(k, 0): %v", err)
				}
				d.armed.Store(true)
				dec, incErr := l.Inc(ctx, "k", rate, 1)
				// A fresh limiter reads what Redis counted: l's breaker may
				// have opened on the late reply. No timeout: the read must
				// not be shed on a loaded machine.
				reader, err := redisabs.New(cl.plain(t), limiter.WithPrefix(prefix), limiter.WithTimeout(0))
				if err != nil {
					t.Fatal(err)
				}
				u, err := reader.Get(ctx, "k")
				if err != nil {
					t.Fatalf("Get(k): %v", err)
				}
				t.Logf("Inc(k, 1) = %+v, %v; Get(k).Used = %d", dec, incErr, u.Used)
				if d.held.Load() != 1 {
					t.Fatalf("%d replies held, want 1", d.held.Load())
				}
				want := int64(2)
				if noRetries {
					want = 1
				}
				if u.Used != want {
					t.Errorf("one Inc(k, 1) with a late reply counted %d times, want %d", u.Used, want)
				}
				if (incErr != nil) != noRetries {
					t.Errorf("Inc(k, 1) with a late reply: error %v, want an error iff retries are off", incErr)
				}
			})
		}
	}
}
