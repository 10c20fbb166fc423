package window

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// staleClock returns the times queued in once, one per read, and then
// its current time: a queued time is a reading taken by a caller that
// then waited before it locked the key.
type staleClock struct {
	mu   sync.Mutex
	now  time.Time
	once []time.Time
}

func (c *staleClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.once) > 0 {
		t := c.once[0]
		c.once = c.once[1:]
		return t
	}
	return c.now
}

func (c *staleClock) queue(ts ...time.Time) {
	c.mu.Lock()
	c.once = append(c.once, ts...)
	c.mu.Unlock()
}

// TestStaleReadingKeepsKey: a caller whose clock reading is W + B or more
// older than the key's newest bucket (it read the clock, then was
// descheduled or waited for the key's lock for a whole window) reads the
// clock again under the lock; only a clock that still reads that far back
// (it stepped back: docs/algorithms.md, Clocks that jump) starts the key
// afresh. Before the second reading, a starved goroutine wiped a full key,
// and a 2-core machine running 192 goroutines on one suppressed key
// admitted 3 to 17 × the hard capacity in one window.
func TestStaleReadingKeepsKey(t *testing.T) {
	ctx := context.Background()
	const w, b = time.Second, 10 * time.Millisecond
	rate := limiter.PerSecond(10) // C = 10, H = 20
	for _, tc := range []struct {
		name string
		new  func(clock func() time.Time) (limiter.Limiter, error)
	}{
		{"Absolute", func(clock func() time.Time) (limiter.Limiter, error) {
			return NewLocalAbsolute(limiter.WithClock(clock), limiter.WithWindow(w), limiter.WithBucket(b))
		}},
		{"Suppressed", func(clock func() time.Time) (limiter.Limiter, error) {
			return NewLocalSuppressed(limiter.WithClock(clock), limiter.WithWindow(w), limiter.WithBucket(b),
				limiter.WithHardLimitFactor(2), limiter.WithRandom(func() float64 { return 0.999999 }))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &staleClock{now: time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)}
			l, err := tc.new(clk.Now)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close(ctx)
			for i := 0; i < 10; i++ {
				if d, err := l.Inc(ctx, "k", rate, 1); err != nil || !d.Allowed {
					t.Fatalf("Inc %d = %+v, %v; want admitted below C", i, d, err)
				}
			}
			stale := clk.now.Add(-(w + b))
			clk.queue(stale) // the first reading only: the clock has moved on
			if _, err := l.Inc(ctx, "k", rate, 1); err != nil {
				t.Fatal(err)
			}
			u, err := l.Get(ctx, "k")
			if err != nil || u.Used < 10 {
				t.Errorf("after a stale reading, Get = %+v, %v; want the key's 10 units kept", u, err)
			}
			if tc.name == "Absolute" && u.Used != 10 {
				t.Errorf("after a stale reading, Used = %d; want 10 (the full key refuses)", u.Used)
			}

			// A clock that really stepped back reads the same both times:
			// the key starts afresh, as every provider's rule says.
			clk.mu.Lock()
			clk.now = stale
			clk.mu.Unlock()
			if d, err := l.Inc(ctx, "k", rate, 1); err != nil || !d.Allowed {
				t.Fatalf("Inc after a step back of W + B = %+v, %v; want admitted on a fresh key", d, err)
			}
			if u, err := l.Get(ctx, "k"); err != nil || u.Used != 1 {
				t.Errorf("after a step back of W + B, Get = %+v, %v; want Used 1", u, err)
			}
		})
	}
}

// TestStaleReadingKeepsSet: a set call with a reading W + B older than a
// limit's newest bucket keeps the key too (the set path decides on the
// stale reading without starting the key afresh).
func TestStaleReadingKeepsSet(t *testing.T) {
	ctx := context.Background()
	clk := &staleClock{now: time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)}
	l, err := NewLocalAbsolute(limiter.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	set, err := limiter.NewSet(
		limiter.Limit{Name: "second", Rate: limiter.PerSecond(10), Window: time.Second, Bucket: 10 * time.Millisecond},
		limiter.Limit{Name: "minute", Rate: limiter.PerMinute(600), Window: time.Minute, Bucket: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.IncSet(ctx, "k", set, 10); err != nil || !d.Allowed {
		t.Fatalf("IncSet(10) = %+v, %v; want admitted", d, err)
	}
	clk.queue(clk.now.Add(-(time.Second + 10*time.Millisecond)))
	if d, err := l.IncSet(ctx, "k", set, 1); err != nil || d.Allowed {
		t.Errorf("IncSet(1) with a stale reading = %+v, %v; want refused by the full second limit", d, err)
	}
	us, err := l.GetSet(ctx, "k", set)
	if err != nil || us[0].Used != 10 || us[1].Used != 10 {
		t.Errorf("GetSet after a stale reading = %+v, %v; want 10 units in each limit", us, err)
	}
}
