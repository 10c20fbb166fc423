package redissup_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// pipelines counts the pipelines of more than one script call a client
// sends.
type pipelines struct{ n atomic.Int64 }

func (p *pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 1 && (cmds[0].Name() == "evalsha" || cmds[0].Name() == "eval") {
			p.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// TestBatchingExact: 64 goroutines on one key and on eight, with batching
// and without (the default), on real Redis, miniredis and the cluster: Get
// counts exactly the units the decisions admitted (suppressed admissions
// included), never more than the capacity (F = 1), and on real Redis the
// batched limiter did send pipelines.
func TestBatchingExact(t *testing.T) {
	clients := map[string]func(t testing.TB) (redissup.Client, *pipelines){
		"Real": func(t testing.TB) (redissup.Client, *pipelines) {
			c := redistest.Real(t).Client(t)
			p := &pipelines{}
			c.AddHook(p)
			return c, p
		},
		"Mini":    func(t testing.TB) (redissup.Client, *pipelines) { _, c := redistest.Mini(t); return c, nil },
		"Cluster": func(t testing.TB) (redissup.Client, *pipelines) { return redistest.Cluster(t), nil },
	}
	for name, client := range clients {
		for _, batch := range []int{0, 128} {
			t.Run(fmt.Sprintf("%s/batch=%d", name, batch), func(t *testing.T) {
				c, pipes := client(t)
				l := newLimiter(t, c, limiter.WithBatching(batch), limiter.WithPrefix(redistest.Prefix(t)))
				const goroutines, calls, capacity = 64, 40, 300
				rate := limiter.PerMinute(capacity)
				for _, keys := range []int{1, 8} {
					var admitted [8]atomic.Int64
					var wg sync.WaitGroup
					for g := 0; g < goroutines; g++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := 0; i < calls; i++ {
								k := (g + i) % keys
								d, err := l.Inc(ctx, fmt.Sprintf("keys%d:%d", keys, k), rate, 1)
								if err != nil || d.Degraded {
									t.Errorf("Inc = %+v, %v", d, err)
									return
								}
								if d.Allowed {
									admitted[k].Add(1)
								}
							}
						}()
					}
					wg.Wait()
					for k := 0; k < keys; k++ {
						u := mustGet(t, l, fmt.Sprintf("keys%d:%d", keys, k))
						if got := admitted[k].Load(); got == 0 || got > capacity || u.Used != got {
							t.Errorf("%d keys, key %d: admitted %d, Get = %+v; want Used = admitted, in [1, %d]", keys, k, got, u, capacity)
						}
					}
				}
				if pipes != nil && batch > 1 && pipes.n.Load() == 0 {
					t.Error("64 goroutines sent no pipeline: nothing was batched")
				}
				if pipes != nil && batch == 0 && pipes.n.Load() != 0 {
					t.Errorf("WithBatching(0) sent %d pipelines, want none", pipes.n.Load())
				}
			})
		}
	}
}
