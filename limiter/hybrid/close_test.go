package hybrid_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// TestCloseCommits: three instances admit concurrently on 50 keys, some of
// them saturated, then close; a Get on Redis (through redisabs) then
// reports for every key exactly the units the instances admitted: every
// unused leased unit was given back.
func TestCloseCommits(t *testing.T) {
	srv := redistest.Real(t)
	prefix := redistest.Prefix(t)
	opts := []limiter.Option{limiter.WithPrefix(prefix), limiter.WithTimeout(0)}
	const keys = 50
	admitted := make([]atomic.Int64, keys)
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		l := newAbsolute(t, srv.Client(t), opts...)
		var iwg sync.WaitGroup
		for g := 0; g < 16; g++ {
			iwg.Add(1)
			go func(g int) {
				defer iwg.Done()
				end := time.Now().Add(time.Second)
				for j := g; time.Now().Before(end); j++ {
					k := j % keys
					// keys below 10 saturate (capacity 100 per minute)
					rate := limiter.PerMinute(100)
					if k >= 10 {
						rate = limiter.PerMinute(1e6)
					}
					d, err := l.Inc(context.Background(), "k"+strconv.Itoa(k), rate, int64(1+j%3))
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						admitted[k].Add(int64(1 + j%3))
					}
				}
			}(g)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			iwg.Wait()
			if err := l.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
			f, r, rel := l.Calls()
			t.Logf("instance: %d lease requests, %d renewals, %d releases, %d failed tick calls", f, r, rel, l.SyncErrors())
		}()
	}
	wg.Wait()
	r, err := redisabs.New(srv.Client(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < keys; k++ {
		u, err := r.Get(context.Background(), "k"+strconv.Itoa(k))
		if err != nil {
			t.Fatal(err)
		}
		if want := admitted[k].Load(); u.Used != want {
			t.Errorf("after Close: Get(k%d).Used = %d, want the %d units admitted", k, u.Used, want)
		}
	}
	if admitted[0].Load() != 100 {
		t.Errorf("saturated key k0 admitted %d, want its capacity 100", admitted[0].Load())
	}
}
