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
	"github.com/sluice-go/sluice/limiter/redissup"
)

// TestCloseCommits: three instances admit concurrently on 50 keys, some of
// them saturated, then close; a Get on Redis (through redisabs) then
// reports for every key exactly the units the instances admitted: every
// unused leased unit was given back.
func TestCloseCommits(t *testing.T) {
	srv := redistest.Real(t)
	prefix := redistest.Prefix(t)
	opts := []limiter.Option{limiter.WithPrefix(prefix)}
	const keys = 50
	admitted := make([]atomic.Int64, keys)
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		// No per-call timeout (newAbsolute): the test certifies exact
		// accounting, and a call shed on a loaded machine may have
		// been counted by Redis.
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

// TestSuppressedCloseCommits: three suppressed instances offer units
// concurrently on 50 keys, some of them beyond H, then close; a Get on
// Redis (through redissup) then reports for every key exactly the units
// the instances accepted, and exactly those they declined: every unused
// leased unit was given back and every decline made in memory was sent.
func TestSuppressedCloseCommits(t *testing.T) {
	srv := redistest.Real(t)
	prefix := redistest.Prefix(t)
	opts := []limiter.Option{limiter.WithPrefix(prefix), limiter.WithHardLimitFactor(1.5)}
	const keys = 50
	accepted := make([]atomic.Int64, keys)
	declined := make([]atomic.Int64, keys)
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		// No per-call timeout (newSuppressed): the test certifies
		// exact accounting, and a call shed on a loaded machine may
		// have been counted by Redis.
		l := newSuppressed(t, srv.Client(t), opts...)
		var iwg sync.WaitGroup
		for g := 0; g < 16; g++ {
			iwg.Add(1)
			go func(g int) {
				defer iwg.Done()
				end := time.Now().Add(time.Second)
				for j := g; time.Now().Before(end); j++ {
					k := j % keys
					// keys below 10 go beyond S = 100 and H = 150 per minute
					rate := limiter.PerMinute(100)
					if k >= 10 {
						rate = limiter.PerMinute(1e6)
					}
					n := int64(1 + j%3)
					d, err := l.Inc(context.Background(), "k"+strconv.Itoa(k), rate, n)
					if err != nil {
						t.Error(err)
						return
					}
					switch {
					case d.Allowed:
						accepted[k].Add(n)
					case !d.Shed: // a shed call is refused without Redis
						declined[k].Add(n)
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
			f, r, rel, ref := l.Calls()
			t.Logf("instance: %d lease requests, %d renewals, %d releases, %d refreshes, %d failed tick calls", f, r, rel, ref, l.SyncErrors())
		}()
	}
	wg.Wait()
	r, err := redissup.New(srv.Client(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < keys; k++ {
		u, err := r.Get(context.Background(), "k"+strconv.Itoa(k))
		if err != nil {
			t.Fatal(err)
		}
		if a, d := accepted[k].Load(), declined[k].Load(); u.Used != a || u.Declined != d {
			t.Errorf("after Close: Get(k%d) = %d accepted, %d declined; want the %d accepted and %d declined", k, u.Used, u.Declined, a, d)
		}
	}
	if a := accepted[0].Load(); a < 100 || a > 150 {
		t.Errorf("key k0, offered beyond H, accepted %d, want between S = 100 and H = 150", a)
	}
}
