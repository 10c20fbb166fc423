package clusterit_test

import (
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// TestExactUnderConcurrency sends 32 goroutines × 50 Inc(1) at one key of
// capacity 500, for both strategies (suppressed with F = 1) through a
// cluster and a ring: exactly 500 are admitted, each admitted call sees a
// different Remaining (the script calls were serialised), and Get agrees.
func TestExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	const (
		workers  = 32
		calls    = 50
		capacity = 500
		hot      = "hot{key}"
	)
	rate := limiter.PerMinute(capacity)
	for _, b := range backends {
		for _, s := range strategies {
			t.Run(b.name+"/"+s.name, func(t *testing.T) {
				t.Parallel()
				c, _ := b.open(t)
				l := s.limiter(t, c, limiter.WithPrefix(redistest.Prefix(t)), limiter.WithWindow(time.Minute))

				var (
					mu        sync.Mutex
					remaining = make(map[int64]int) // Remaining of admitted calls → how many
					refused   int
					wg        sync.WaitGroup
				)
				for w := 0; w < workers; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; i < calls; i++ {
							d, err := l.Inc(ctx, hot, rate, 1)
							if err != nil {
								t.Errorf("Inc(%q, 1): %v", hot, err)
								return
							}
							mu.Lock()
							if d.Allowed {
								remaining[d.Remaining]++
							} else {
								refused++
								sup := s.name == key.Suppressed
								if d.Suppressed != sup || d.Remaining != 0 || d.RetryAfter <= 0 || d.Never {
									t.Errorf("Inc(%q, 1) = %+v, want a refusal (Suppressed %v) with Remaining 0 and RetryAfter > 0", hot, d, sup)
								}
							}
							mu.Unlock()
						}
					}()
				}
				wg.Wait()

				admitted := 0
				for _, n := range remaining {
					admitted += n
				}
				if admitted != capacity || refused != workers*calls-capacity {
					t.Errorf("%d × %d Inc(%q, 1) at capacity %d: %d admitted, %d refused, want %d and %d",
						workers, calls, hot, capacity, admitted, refused, capacity, workers*calls-capacity)
				}
				for r := int64(0); r < capacity; r++ {
					if remaining[r] != 1 {
						t.Errorf("%d admitted calls saw Remaining %d, want exactly 1", remaining[r], r)
					}
				}

				u, err := l.Get(ctx, hot)
				want := limiter.Usage{Used: capacity, Limit: capacity}
				if s.name == key.Suppressed {
					want.Declined = workers*calls - capacity
				}
				if err != nil || u != want {
					t.Errorf("Get(%q) = %+v, %v, want %+v", hot, u, err, want)
				}
			})
		}
	}
}
