package cleanup_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// writeLive writes n live keys (W = 1 min) under prefix.
func writeLive(t testing.TB, c redis.UniversalClient, prefix string, n int) {
	t.Helper()
	l := newLimiter(t, key.Absolute, c, limiter.WithPrefix(prefix))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	incAll(t, l, keys)
}

// cleanerGoroutines returns the stacks of goroutines running code of
// package cleanup (the test's own excluded). A goroutine that has closed
// its done channel may still be returning when Stop returns, so it looks
// again for up to a second, as goleak does.
func cleanerGoroutines() []string {
	var out []string
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		out = out[:0]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "sluice/cleanup.(*Cleaner)") {
				out = append(out, g)
			}
		}
		if len(out) == 0 || time.Now().After(deadline) {
			return out
		}
	}
}

// TestStop: Stop during a pass waits for it to finish; Stop with a context
// that ends first cancels the pass and returns the context's error; no
// goroutine of the cleaner remains after either.
func TestStop(t *testing.T) {
	c := redistest.Real(t).Client(t)
	prefix := redistest.Prefix(t)
	const n = 200
	writeLive(t, c, prefix, n)

	for _, tc := range []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		wantErr error
	}{
		{"waits", func() (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }, nil},
		{"cancelled", func() (context.Context, context.CancelFunc) {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			return cctx, cancel
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type result struct {
				r   cleanup.Report
				err error
				at  time.Time
			}
			reports := make(chan result, 10)
			// 500 keys/s: a pass of 200 keys takes about 400 ms.
			cl := newCleaner(t, c, cleanup.WithPrefix(prefix), cleanup.WithRate(500), cleanup.WithLease(time.Second),
				cleanup.WithReports(func(r cleanup.Report, err error) { reports <- result{r, err, time.Now()} }))
			started := make(chan struct{})
			var once sync.Once
			cleanup.SetHooks(cl, nil, func(string) func() {
				once.Do(func() { close(started) })
				return func() {}
			})
			cl.Start()
			<-started
			sctx, cancel := tc.ctx()
			defer cancel()
			err := cl.Stop(sctx)
			stopped := time.Now()
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Stop = %v, want %v", err, tc.wantErr)
			}
			if g := cleanerGoroutines(); len(g) > 0 {
				t.Fatalf("after Stop, %d goroutines of the cleaner remain:\n%s", len(g), strings.Join(g, "\n\n"))
			}
			select {
			case res := <-reports:
				if res.at.After(stopped) {
					t.Errorf("the pass reported at %v, after Stop returned at %v", res.at, stopped)
				}
				if tc.wantErr == nil && (res.err != nil || res.r.Scanned != n) {
					t.Errorf("pass in flight: %v, %v; want all %d keys", res.r, res.err, n)
				}
				if tc.wantErr != nil && (!errors.Is(res.err, context.Canceled) || res.r.Scanned >= n) {
					t.Errorf("cancelled pass: %d keys, %v; want fewer than %d and context.Canceled", res.r.Scanned, res.err, n)
				}
			default:
				t.Fatalf("Stop returned before the pass in flight reported")
			}
			if len(reports) > 0 {
				t.Errorf("%d more passes after Stop", len(reports))
			}
			// The lease was released: another cleaner runs at once.
			if r, err := newCleaner(t, c, cleanup.WithPrefix(prefix), cleanup.WithRate(1e6)).Run(ctx); err != nil || r.Scanned != n {
				t.Errorf("Run after Stop: %v, %v", r, err)
			}
		})
	}
	// Stop without Start, and twice.
	cl := newCleaner(t, c, cleanup.WithPrefix(prefix))
	if err := cl.Stop(ctx); err != nil {
		t.Errorf("Stop without Start = %v", err)
	}
	cl.Start()
	cl.Start()
	if err := cl.Stop(ctx); err != nil {
		t.Errorf("Stop = %v", err)
	}
	if err := cl.Stop(ctx); err != nil {
		t.Errorf("second Stop = %v", err)
	}
}

// TestRunLocked: Run while another cleaner holds the lease returns
// ErrLocked at once and walks nothing.
func TestRunLocked(t *testing.T) {
	c := redistest.Real(t).Client(t)
	prefix := redistest.Prefix(t)
	writeLive(t, c, prefix, 10)
	a := newCleaner(t, c, cleanup.WithPrefix(prefix), cleanup.WithPeriod(time.Hour))
	reported := make(chan struct{}, 1)
	a2 := newCleaner(t, c, cleanup.WithPrefix(prefix), cleanup.WithPeriod(time.Hour),
		cleanup.WithReports(func(cleanup.Report, error) { reported <- struct{}{} }))
	a2.Start()
	<-reported // a2 made its pass and keeps the lease
	r, err := a.Run(ctx)
	if !errors.Is(err, cleanup.ErrLocked) || r.Scanned != 0 {
		t.Fatalf("Run while another holds the lease = %v, %v; want ErrLocked", r, err)
	}
	if err := a2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Run(ctx); err != nil || r.Scanned != 10 {
		t.Fatalf("Run after the holder stopped = %v, %v", r, err)
	}
}

// TestTwoCleaners: two cleaners started together on one prefix: only one
// ever handles keys at a time (counted key by key); when it stops, the
// other takes over within a tenth of a lease (plus scheduling); when it is
// frozen (a hook stalls it between two keys), the other takes over within
// a lease of the freeze (it wakes when the lease expires), and the frozen one, thawed, stops at
// its next key and reports the lease lost.
func TestTwoCleaners(t *testing.T) {
	c := redistest.Real(t).Client(t)
	prefix := redistest.Prefix(t)
	writeLive(t, c, prefix, 300)
	const lease = 400 * time.Millisecond
	const slack = 150 * time.Millisecond // scheduling on a loaded machine

	var mu sync.Mutex
	var inKey [2]int
	var handled [2]int64
	var lastKey [2]time.Time
	overlaps := 0
	var frozen [2]atomic.Bool
	thaw := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	freezing := make(chan time.Time, 2)
	lost := make(chan int, 10)
	cls := make([]*cleanup.Cleaner, 2)
	for i := range cls {
		i := i
		cls[i] = newCleaner(t, c, cleanup.WithPrefix(prefix), cleanup.WithRate(3000), cleanup.WithPeriod(0),
			cleanup.WithLease(lease), cleanup.WithReports(func(r cleanup.Report, err error) {
				if r.LeaseLost {
					if !errors.Is(err, cleanup.ErrLeaseLost) {
						t.Errorf("cleaner %d lost its lease, err = %v", i, err)
					}
					lost <- i
				} else if err != nil {
					t.Errorf("cleaner %d: %v", i, err)
				}
			}))
		cleanup.SetHooks(cls[i], func() {
			if frozen[i].Load() {
				freezing <- time.Now()
				<-thaw[i]
			}
		}, func(string) func() {
			mu.Lock()
			if inKey[1-i] > 0 {
				overlaps++
			}
			inKey[i]++
			handled[i]++
			lastKey[i] = time.Now()
			mu.Unlock()
			return func() {
				mu.Lock()
				inKey[i]--
				mu.Unlock()
			}
		})
	}
	counts := func() ([2]int64, [2]time.Time, int) {
		mu.Lock()
		defer mu.Unlock()
		return handled, lastKey, overlaps
	}
	// waitFor polls until cleaner i handles a key after since.
	waitFor := func(i int, since time.Time, within time.Duration) time.Time {
		t.Helper()
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			_, last, _ := counts()
			if last[i].After(since) {
				return last[i]
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("cleaner %d handled no key within %v", i, within)
		return time.Time{}
	}

	var wg sync.WaitGroup
	for _, cl := range cls {
		wg.Add(1)
		go func(cl *cleanup.Cleaner) { defer wg.Done(); cl.Start() }(cl)
	}
	wg.Wait()
	time.Sleep(3 * lease)
	h, _, _ := counts()
	first := 0
	if h[1] > 0 {
		first = 1
	}
	other := 1 - first
	if h[first] < 300 || h[other] != 0 {
		t.Fatalf("after %v, keys handled %v: want one cleaner at work, the other waiting", 3*lease, h)
	}

	// The holder stops: the other takes over within a tenth of a lease.
	if err := cls[first].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	took := waitFor(other, stopped, 2*lease).Sub(stopped)
	t.Logf("takeover after Stop: %v", took)
	if took > lease/10+slack {
		t.Errorf("takeover after Stop took %v, want at most %v", took, lease/10+slack)
	}

	// The new holder freezes between two keys; the first one, started
	// again, takes over once the frozen lease expires.
	frozen[other].Store(true)
	froze := <-freezing
	cls[first].Start()
	took = waitFor(first, froze, 3*lease).Sub(froze)
	t.Logf("takeover after a freeze: %v", took)
	if took > lease+slack {
		t.Errorf("takeover after a freeze took %v, want at most %v", took, lease+slack)
	}
	frozen[other].Store(false)
	close(thaw[other])
	select {
	case i := <-lost:
		if i != other {
			t.Errorf("cleaner %d reported its lease lost, want %d", i, other)
		}
	case <-time.After(5 * lease):
		t.Fatalf("the thawed cleaner did not report its lease lost")
	}
	time.Sleep(2 * lease)
	h, _, ov := counts()
	if ov != 0 {
		t.Errorf("%d keys handled while the other cleaner was handling one", ov)
	}
	for _, cl := range cls {
		if err := cl.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("keys handled: %v", h)
}
