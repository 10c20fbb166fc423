package sluicerueidis_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redisprov"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/sluicerueidis"
	"github.com/sluice-go/sluice/sluicerueidis/sluicevalkey"
)

// The suites below are the core's (internal/conformance, internal/faults),
// run on rueidis and on valkey-go: each factory receives the go-redis
// client the suite made for its server (a shared one, a private one
// behind a fault proxy, the cluster) and builds a client of the driver's
// library of the same addresses instead.
func TestMain(m *testing.M) { redistest.Main(m) }

// dialTimeout bounds a dial as the harness bounds go-redis'.
const dialTimeout = 2 * time.Second

// client is an adapter as the tests use it, on either library: what the
// providers, the cleaner and the batches take.
type client interface {
	redisabs.Client
	hybrid.Client
	cleanup.Client
	cleanup.Nodes
	redisprov.ScriptPipeliner
}

// A driver is one client library the adapter runs on. open returns the
// adapter of a client of addrs, with client-side caching off (the
// providers do not read through it), and the func that closes the
// client; libErr reports whether err is the library's reply error.
type driver struct {
	name   string
	open   func(t testing.TB, addrs []string) (client, func())
	libErr func(err error) bool
}

var (
	rueidisDriver = driver{"rueidis",
		opener(rueidis.NewClient, func(addrs []string) rueidis.ClientOption {
			return rueidis.ClientOption{InitAddress: addrs, DisableCache: true, Dialer: netDialer()}
		}, func(c rueidis.Client) client { return sluicerueidis.New(c) }),
		func(err error) bool { _, ok := rueidis.IsRedisErr(err); return ok }}
	valkeyDriver = driver{"valkey",
		opener(valkey.NewClient, func(addrs []string) valkey.ClientOption {
			return valkey.ClientOption{InitAddress: addrs, DisableCache: true, Dialer: netDialer()}
		}, func(c valkey.Client) client { return sluicevalkey.New(c) }),
		func(err error) bool { _, ok := valkey.IsValkeyErr(err); return ok }}
	drivers = []driver{rueidisDriver, valkeyDriver}
)

// opener is a driver's open: a client of the options of addrs, closed
// when t ends, and its adapter.
func opener[C interface{ Close() }, O any](newClient func(O) (C, error), options func([]string) O,
	wrap func(C) client) func(testing.TB, []string) (client, func()) {
	return func(t testing.TB, addrs []string) (client, func()) {
		t.Helper()
		c, err := newClient(options(addrs))
		if err != nil {
			t.Fatalf("NewClient(%v): %v", addrs, err)
		}
		t.Cleanup(c.Close)
		return wrap(c), c.Close
	}
}

// adapt returns d's adapter of a client of the server (or the cluster)
// that c, a go-redis client made by the harness, talks to, and the func
// that closes it.
func (d driver) adapt(t testing.TB, c redis.UniversalClient) (client, func()) {
	t.Helper()
	switch c := c.(type) {
	case *redis.Client:
		return d.open(t, []string{c.Options().Addr})
	case *redis.ClusterClient:
		return d.open(t, c.Options().Addrs)
	}
	t.Fatalf("adapt: a %T", c)
	return nil, nil
}

// A server is one the suites run against, as the harness's go-redis
// client of it, and the number of its masters.
type server struct {
	name    string
	conn    func(testing.TB) redis.UniversalClient
	masters int
}

var servers = []server{
	{"Real", func(t testing.TB) redis.UniversalClient { return redistest.Real(t).Client(t) }, 1},
	{"Cluster", func(t testing.TB) redis.UniversalClient { return redistest.Cluster(t) }, 3},
}

// client returns d's adapter of s.
func (s server) client(d driver) func(testing.TB) client {
	return func(t testing.TB) client {
		c, _ := d.adapt(t, s.conn(t))
		return c
	}
}

// closeAtEnd closes l when t ends.
func closeAtEnd(t testing.TB, l limiter.Limiter) {
	t.Cleanup(func() { l.Close(context.Background()) })
}
