package clusterit_test

import (
	"context"
	"flag"
	"sort"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// TestMain runs up to 8 tests at once unless -parallel is given: the tests
// spend most of their time waiting for servers, replication and expiry,
// not on the CPU, so the default of GOMAXPROCS would make them wait in turn.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", "8")
	}
	redistest.Main(m)
}

var ctx = context.Background()

// Every go-redis client kind fits the providers' Client interface.
var (
	_ redisabs.Client = (*redis.Client)(nil)
	_ redisabs.Client = (*redis.ClusterClient)(nil)
	_ redisabs.Client = (*redis.Ring)(nil)
	_ redisabs.Client = redis.UniversalClient(nil)
	_ redissup.Client = (*redis.Client)(nil)
	_ redissup.Client = (*redis.ClusterClient)(nil)
	_ redissup.Client = (*redis.Ring)(nil)
	_ redissup.Client = redis.UniversalClient(nil)
)

// strategy builds a provider of one strategy.
type strategy struct {
	name string // key.Absolute or key.Suppressed
	new  func(c redisabs.Client, opts ...limiter.Option) (limiter.Limiter, error)
}

var strategies = []strategy{
	// No per-call timeout: these tests compare decisions on a cluster,
	// and a call shed on a loaded machine would differ.
	{key.Absolute, func(c redisabs.Client, opts ...limiter.Option) (limiter.Limiter, error) {
		return redisabs.New(c, append([]limiter.Option{limiter.WithTimeout(0)}, opts...)...)
	}},
	{key.Suppressed, func(c redisabs.Client, opts ...limiter.Option) (limiter.Limiter, error) {
		// F = 1 (the default): the hard capacity is the soft one.
		return redissup.New(c, append([]limiter.Option{limiter.WithTimeout(0)}, opts...)...)
	}},
}

func (s strategy) limiter(t testing.TB, c redisabs.Client, opts ...limiter.Option) limiter.Limiter {
	t.Helper()
	l, err := s.new(c, opts...)
	if err != nil {
		t.Fatalf("%s: New: %v", s.name, err)
	}
	t.Cleanup(func() { l.Close(ctx) })
	return l
}

// nodes runs fn on every node that holds data: each master of a cluster,
// each shard of a ring. fn may run concurrently.
type nodes func(ctx context.Context, fn func(ctx context.Context, c *redis.Client) error) error

// backend is a sharded Redis set-up: the client the providers use and the
// nodes behind it.
type backend struct {
	name  string
	open  func(t testing.TB) (redisabs.Client, nodes)
	count int // number of nodes
}

var backends = []backend{
	{"Cluster", func(t testing.TB) (redisabs.Client, nodes) {
		c := redistest.Cluster(t)
		return c, c.ForEachMaster
	}, 3},
	{"Ring", func(t testing.TB) (redisabs.Client, nodes) {
		r := redistest.Ring(t)
		return r, r.ForEachShard
	}, 2},
}

// scan returns, for each node address, the keys matching pattern stored
// there, sorted.
func scan(t testing.TB, each nodes, pattern string) map[string][]string {
	t.Helper()
	var mu sync.Mutex
	found := make(map[string][]string)
	err := each(ctx, func(ctx context.Context, c *redis.Client) error {
		var keys []string
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		sort.Strings(keys)
		mu.Lock()
		defer mu.Unlock()
		found[c.Options().Addr] = keys
		return nil
	})
	if err != nil {
		t.Fatalf("SCAN MATCH %q on every node: %v", pattern, err)
	}
	return found
}

// hashName is the Redis key of k's hash under strategy s.
func hashName(t testing.TB, prefix, k, s string) string {
	t.Helper()
	n, err := key.Name(prefix, k, s, key.Hash)
	if err != nil {
		t.Fatalf("key.Name(%q, %q, %q, %q): %v", prefix, k, s, key.Hash, err)
	}
	return n
}
