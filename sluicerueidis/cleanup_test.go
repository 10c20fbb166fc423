package sluicerueidis_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// TestCleanup: a cleaner on each library walks every master (one node, or the
// cluster's three), keeps live keys, deletes the keys whose buckets are
// all dead by its clock, and takes its lease: a second cleaner of the
// prefix is refused while the first holds it.
func TestCleanup(t *testing.T) {
	for _, d := range drivers {
		for _, s := range servers {
			t.Run(d.name+"/"+s.name, func(t *testing.T) { testCleanup(t, s.client(d)(t), s.masters) })
		}
	}
}

func testCleanup(t *testing.T, c client, masters int) {
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	clk := &fixedClock{t: time.Now()}
	opts := []limiter.Option{limiter.WithPrefix(prefix), limiter.WithWindow(time.Minute), limiter.WithClock(clk.Now)}
	abs, err := redisabs.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, abs)
	sup, err := redissup.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, sup)
	const keys = 40
	for i := range keys {
		l := limiter.Limiter(abs)
		if i%2 == 1 {
			l = sup
		}
		if _, err := l.Inc(ctx, fmt.Sprintf("user:%d", i), limiter.PerMinute(100), 1); err != nil {
			t.Fatalf("Inc: %v", err)
		}
	}

	// Now: every key is live.
	cl := newCleaner(t, c, cleanup.WithPrefix(prefix), cleanup.WithClock(clk.Now))
	r, err := cl.Run(ctx)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Nodes != masters || r.Scanned != keys || r.Live != keys || r.Deleted != 0 {
		t.Fatalf("Run now: %d nodes, scanned %d, live %d, deleted %d; want %d, %d, %d, 0\n%v",
			r.Nodes, r.Scanned, r.Live, r.Deleted, masters, keys, keys, r)
	}

	// The lease: a second cleaner is refused while the first
	// runs its background loop.
	cl.Start()
	other := newCleaner(t, c, cleanup.WithPrefix(prefix), cleanup.WithClock(clk.Now))
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := other.Run(ctx)
		if errors.Is(err, cleanup.ErrLocked) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("second cleaner's Run: %v, want ErrLocked", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cl.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	// Two windows later by the cleaner's clock, every bucket is
	// dead: the keys are deleted.
	clk.t = clk.t.Add(2 * time.Minute)
	r, err = other.Run(ctx)
	if err != nil {
		t.Fatalf("Run later: %v", err)
	}
	if r.Scanned != keys || r.Deleted != keys {
		t.Fatalf("Run later: scanned %d, deleted %d; want %d, %d\n%v", r.Scanned, r.Deleted, keys, keys, r)
	}
	if u, err := abs.Get(ctx, "user:0"); err != nil || u.Used != 0 {
		t.Fatalf("Get after the cleanup = %+v, %v; want nothing used", u, err)
	}
}

func newCleaner(t *testing.T, c client, opts ...cleanup.Option) *cleanup.Cleaner {
	t.Helper()
	cl, err := cleanup.New(c, opts...)
	if err != nil {
		t.Fatalf("cleanup.New: %v", err)
	}
	if err := cl.Ping(context.Background()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	t.Cleanup(func() { cl.Stop(context.Background()) })
	return cl
}

// fixedClock is a clock that moves only when the test moves it.
type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time { return c.t }
