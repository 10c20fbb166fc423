// Package conformance is the one test suite every sluice provider passes:
// step tables on a fake clock (RunAbsolute, RunSuppressed) and a randomized
// differential trace (RunTrace) that feeds two providers the same calls at
// the same times and requires identical decisions.
package conformance

import (
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// Start is the instant every fake clock starts at.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a fake clock that only moves when told. It is safe for
// concurrent use. Hooks let a backend follow it (miniredis SetTime and
// FastForward).
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	hooks []func(now time.Time, d time.Duration)
}

// NewClock returns a clock reading Start.
func NewClock() *Clock { return &Clock{now: Start} }

// Now returns the clock's reading.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and runs the hooks.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now, hooks := c.now, c.hooks
	c.mu.Unlock()
	for _, h := range hooks {
		h(now, d)
	}
}

// A Follower is a server whose clock a Clock can drive: miniredis.
type Follower interface {
	SetTime(time.Time)
	FastForward(time.Duration)
}

// Drive makes mr follow c: its time is c's (SetTime), and its TTLs run
// down as c advances (FastForward).
func (c *Clock) Drive(mr Follower) {
	c.OnAdvance(func(now time.Time, d time.Duration) {
		mr.SetTime(now)
		mr.FastForward(d)
	})
}

// OnAdvance registers f to run after every Advance, and runs it once now
// with d = 0 so the follower starts in step.
func (c *Clock) OnAdvance(f func(now time.Time, d time.Duration)) {
	c.mu.Lock()
	c.hooks = append(c.hooks, f)
	now := c.now
	c.mu.Unlock()
	f(now, 0)
}

// Factory builds a fresh, empty provider of the strategy under test that
// reads time from clk (the Redis providers either follow clk through a
// backend hook or receive limiter.WithClock(clk.Now)). opts come from the suite
// and must all be passed on. The provider is closed by the suite.
type Factory func(t *testing.T, clk *Clock, opts ...limiter.Option) limiter.Limiter

// Seq is a deterministic random source for WithRandom: it replays vals in
// order, cycling, and counts draws.
type Seq struct {
	mu    sync.Mutex
	vals  []float64
	draws int
}

// NewSeq returns a source that replays vals.
func NewSeq(vals ...float64) *Seq { return &Seq{vals: vals} }

// Float64 returns the next value.
func (s *Seq) Float64() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vals[s.draws%len(s.vals)]
	s.draws++
	return v
}

// Draws reports how many values were drawn.
func (s *Seq) Draws() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draws
}
