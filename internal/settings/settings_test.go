package settings

import (
	"errors"
	"testing"
	"time"
)

// The default clock is the wall clock at start plus monotonic progress: it
// must agree with time.Now (the system clock is not stepped during a test)
// and never go backwards.
func TestDefaultClockFollowsWallClock(t *testing.T) {
	c, err := newConfig()
	if err != nil {
		t.Fatal(err)
	}
	prev := c.NowMs()
	for i := 0; i < 1000; i++ {
		before := time.Now().UnixMilli()
		got := c.NowMs()
		after := time.Now().UnixMilli()
		if got < before-1 || got > after+1 {
			t.Fatalf("NowMs = %d, time.Now between %d and %d", got, before, after)
		}
		if got < prev {
			t.Fatalf("NowMs went back from %d to %d", prev, got)
		}
		prev = got
		if w := WallNow().UnixMilli(); w < got || w > got+50 {
			t.Fatalf("WallNow = %d ms, NowMs = %d", w, got)
		}
	}
}

// The tests instantiate Config over stand-ins for package limiter's types.
type (
	config = Config[any, int, struct{}]
	option = func(*config)
)

var errInvalid = errors.New("invalid")

func newConfig(opts ...option) (config, error) { return New(errInvalid, opts...) }

type fixed time.Time

func (f fixed) Now() time.Time { return time.Time(f) }

func TestNowMsUsesAGivenClock(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6_700_000, time.UTC)
	c, err := newConfig(func(c *config) { c.Clock, c.ClockSet = fixed(at).Now, true })
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.NowMs(), at.UnixMilli(); got != want {
		t.Fatalf("NowMs = %d, want %d", got, want)
	}
}

// TestBatchBounds: the batch cap defaults to DefaultBatch and accepts 0 to
// MaxBatch; beyond is errInvalid.
func TestBatchBounds(t *testing.T) {
	c, err := newConfig()
	if err != nil || c.Batch != DefaultBatch {
		t.Fatalf("newConfig() Batch = %d, %v; want %d", c.Batch, err, DefaultBatch)
	}
	for _, n := range []int{0, 1, MaxBatch} {
		if c, err := newConfig(func(c *config) { c.Batch = n }); err != nil || c.Batch != n {
			t.Errorf("Batch %d: %d, %v; want accepted", n, c.Batch, err)
		}
	}
	for _, n := range []int{-1, MaxBatch + 1} {
		if _, err := newConfig(func(c *config) { c.Batch = n }); !errors.Is(err, errInvalid) {
			t.Errorf("Batch %d: %v; want errInvalid", n, err)
		}
	}
}
