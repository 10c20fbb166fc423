package sluicerueidis_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/sluicerueidis"
)

// clientContenders are redisabs on each client set-up: go-redis with
// sluice's batching (the default, WithBatching(128)) and without, rueidis
// with sluice's batching and rueidis' automatic pipelining (both
// defaults), with automatic pipelining only (WithBatching(0)), and with
// batching only (DisableAutoPipelining: a pooled connection per call that
// runs alone). Every limiter has WithTimeout(5 s), as in bench/, so that
// a stall of the loaded machine opens no breaker; a degraded decision
// fails the benchmark.
var clientContenders = []struct {
	name string
	new  func(b *testing.B, addr string) (limiter.Limiter, error)
}{
	{"goredis-batched", func(b *testing.B, addr string) (limiter.Limiter, error) {
		return redisabs.New(goRedis(b, addr), benchOpts(b, limiter.WithBatching(128))...)
	}},
	{"goredis-alone", func(b *testing.B, addr string) (limiter.Limiter, error) {
		return redisabs.New(goRedis(b, addr), benchOpts(b, limiter.WithBatching(0))...)
	}},
	{"rueidis-batched", func(b *testing.B, addr string) (limiter.Limiter, error) {
		return redisabs.New(benchRueidis(b, addr, false), benchOpts(b, limiter.WithBatching(128))...)
	}},
	{"rueidis-alone", func(b *testing.B, addr string) (limiter.Limiter, error) {
		return redisabs.New(benchRueidis(b, addr, false), benchOpts(b, limiter.WithBatching(0))...)
	}},
	{"rueidis-batched-nopipe", func(b *testing.B, addr string) (limiter.Limiter, error) {
		return redisabs.New(benchRueidis(b, addr, true), benchOpts(b, limiter.WithBatching(128))...)
	}},
}

func benchOpts(b *testing.B, opts ...limiter.Option) []limiter.Option {
	return append([]limiter.Option{limiter.WithPrefix(redistest.Prefix(b)), limiter.WithTimeout(5 * time.Second)}, opts...)
}

// goRedis is a go-redis client as the package docs build one: the
// context's deadline reaches the socket, and nothing is re-sent.
func goRedis(b *testing.B, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	b.Cleanup(func() { c.Close() })
	return c
}

func benchRueidis(b *testing.B, addr string, noPipe bool) *sluicerueidis.Client {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true,
		DisableAutoPipelining: noPipe})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return sluicerueidis.New(c)
}

// BenchmarkClients: redisabs decisions per second on go-redis and on
// rueidis, against one private redis-server, with 1, 8 and 64 goroutines
// sharing one limiter, on two workloads: 10k (10,000 keys in turn, each
// call most likely the key's first in its bucket) and hot (one key at
// 1,000,000/s, every call joins the newest bucket). The machine is shared
// and its load moves throughput by more than the contenders differ, so
// each benchmark runs the contenders in turns: rounds of roundCalls calls
// each, the order rotated every round, and it reports each contender's
// median decisions per second over the rounds and, per contender, the
// median of its ratio to goredis-batched within a round. Run it with
// -benchtime 1x (b.N is not used). The figures are in docs/benchmarks.md
// (Redis clients: go-redis and rueidis), with the command.
func BenchmarkClients(b *testing.B) {
	srv := redistest.StartServer(b)
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	workloads := []struct {
		name string
		rate limiter.Rate
		key  func(i int64) string
	}{
		{"10k", limiter.PerSecond(1000), func(i int64) string { return keys[i%int64(len(keys))] }},
		{"hot", limiter.PerSecond(1_000_000), func(int64) string { return "hot" }},
	}
	for _, w := range workloads {
		for _, g := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/g=%d", w.name, g), func(b *testing.B) {
				ls := make([]limiter.Limiter, len(clientContenders))
				for i, c := range clientContenders {
					l, err := c.new(b, srv.Addr)
					if err != nil {
						b.Fatal(err)
					}
					defer l.Close(context.Background())
					ls[i] = l
				}
				ops := make([][]float64, len(ls))
				ratios := make([][]float64, len(ls))
				var offset int64
				for r := range rounds {
					got := make([]float64, len(ls))
					for j := range ls {
						i := (j + r) % len(ls)
						got[i] = runDecisions(b, ls[i], g, roundCalls, offset, w.rate, w.key)
						offset += roundCalls
					}
					for i := range ls {
						ops[i] = append(ops[i], got[i])
						ratios[i] = append(ratios[i], got[i]/got[0])
					}
				}
				for i, c := range clientContenders {
					b.ReportMetric(median(ops[i]), c.name+"-ops/s")
					if i > 0 {
						b.ReportMetric(median(ratios[i]), c.name+"/batched")
					}
				}
			})
		}
	}
}

// rounds and roundCalls: each contender makes roundCalls calls in each of
// rounds rounds.
const (
	rounds     = 13
	roundCalls = 4000
)

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// runDecisions makes n Inc calls of l from g goroutines, the i-th on
// key(offset+i), and returns the decisions per second.
func runDecisions(b *testing.B, l limiter.Limiter, g int, n, offset int64, rate limiter.Rate, key func(int64) string) float64 {
	ctx := context.Background()
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				d, err := l.Inc(ctx, key(offset+i), rate, 1)
				if err == nil && (d.Degraded || !d.Allowed) {
					err = fmt.Errorf("decision %+v", d)
				}
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	return float64(n) / elapsed.Seconds()
}
