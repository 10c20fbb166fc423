package redistest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

const ringShards = 2

var sharedRing lazy[map[string]*Server]

func getRing(t testing.TB, fn string) map[string]*Server {
	t.Helper()
	shared(t, fn, "redis-server")
	shards, err := sharedRing.get(startRing)
	if err != nil {
		t.Fatalf("redistest.%s: %v", fn, err)
	}
	return shards
}

func startRing() (map[string]*Server, error) {
	servers := make([]*Server, ringShards)
	errs := make([]error, ringShards)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			servers[i], errs[i] = newServer(true, false, nil)
		}(i)
	}
	wg.Wait()
	shards := make(map[string]*Server)
	var firstErr error
	for i, s := range servers {
		if errs[i] != nil && firstErr == nil {
			firstErr = fmt.Errorf("starting a ring shard: %w", errs[i])
		}
		if s != nil {
			shards[fmt.Sprintf("shard%d", i)] = s
		}
	}
	if firstErr != nil {
		for _, s := range shards {
			s.destroy()
		}
		return nil, firstErr
	}
	return shards, nil
}

// Ring returns a new client, closed at t.Cleanup, for a Ring over the two
// real redis-servers ("shard0", "shard1") shared by this test binary,
// starting them on first use; Main stops them. They are never flushed:
// isolate keys with Prefix. Ring skips or fails t like Real.
func Ring(t testing.TB) *redis.Ring {
	t.Helper()
	r := redis.NewRing(RingOptions(t))
	t.Cleanup(func() { r.Close() })
	return r
}

// RingOptions returns client options for the shared ring with the
// harness's timeouts, for a test that wants to adjust them. It starts the
// shards like Ring.
func RingOptions(t testing.TB) *redis.RingOptions {
	t.Helper()
	addrs := RingShards(t)
	return &redis.RingOptions{
		Addrs:        addrs,
		DialTimeout:  dialTimeout,
		ReadTimeout:  ioTimeout,
		WriteTimeout: ioTimeout,
		PoolTimeout:  poolTimeout,
	}
}

// RingShards returns the shared ring's shard names and addresses, starting
// the shards like Ring.
func RingShards(t testing.TB) map[string]string {
	t.Helper()
	m := make(map[string]string)
	for name, s := range getRing(t, "RingShards") {
		m[name] = s.Addr
	}
	return m
}
