package sluicerueidis_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/sluicerueidis"
)

// The suites below are the core's (internal/conformance, internal/faults),
// run on rueidis: each factory receives the go-redis client the suite made
// for its server (a shared one, a private one behind a fault proxy, the
// cluster) and builds a rueidis client of the same addresses instead.
func TestMain(m *testing.M) { redistest.Main(m) }

// dialTimeout bounds a rueidis dial as the harness bounds go-redis'.
const dialTimeout = 2 * time.Second

// newRueidis returns a rueidis client of addrs, closed when t ends, with
// client-side caching off (the providers do not read through it).
func newRueidis(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  addrs,
		DisableCache: true,
		Dialer:       netDialer(),
	})
	if err != nil {
		t.Fatalf("rueidis.NewClient(%v): %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

// adapt returns the adapter of a rueidis client of the server (or the
// cluster) that c, a go-redis client made by the harness, talks to.
func adapt(t testing.TB, c redis.UniversalClient) *sluicerueidis.Client {
	t.Helper()
	switch c := c.(type) {
	case *redis.Client:
		return sluicerueidis.New(newRueidis(t, c.Options().Addr))
	case *redis.ClusterClient:
		return sluicerueidis.New(newRueidis(t, c.Options().Addrs...))
	}
	t.Fatalf("adapt: a %T", c)
	return nil
}

func realAdapter(t testing.TB) *sluicerueidis.Client    { return adapt(t, redistest.Real(t).Client(t)) }
func clusterAdapter(t testing.TB) *sluicerueidis.Client { return adapt(t, redistest.Cluster(t)) }

// closeAtEnd closes l when t ends.
func closeAtEnd(t testing.TB, l limiter.Limiter) {
	t.Cleanup(func() { l.Close(context.Background()) })
}
