package window

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// sweepChunk is how many keys the sweep visits before it yields.
const sweepChunk = 128

// entry is one key's state behind its own lock, 128 bytes: two cache
// lines. The sweep or Reset kills an entry under that lock before removing
// it, so a caller that loaded it just before looks again (lock).
type entry struct {
	mu  sync.Mutex
	k   string // set by keymap.loadOrStore before publishing; never changed
	st  State
	buf [1]Bucket // a key's first bucket lives inline
}

// dead reports whether the entry was removed from the map (under e.mu).
func (e *entry) dead() bool { return e.st.ring == nil }

// kill marks the entry removed (under e.mu).
func (e *entry) kill() { e.st = State{} }

// store is the engine both strategies share: the key map (lock-free
// lookups, one lock per key), the clock and the background sweep.
type store struct {
	// What an Inc reads comes first; these copy fields of cfg.
	p                   Params
	m                   *keymap
	windowSec           float64 // W in seconds
	hardF               float64 // WithHardLimitFactor
	obs                 limiter.Observer
	closed              atomic.Bool
	clockSet, randomSet bool
	sup                 bool // the suppressed strategy
	cacheMs             int64

	strategy string
	cfg      Config
	sets     sync.Map // string → *setEntry
	// slackMs is what the sweep adds to a key's span, W + B, before it
	// drops the key: a minute under WithClock, whose clock may step back
	// (the Redis providers give such keys the same minute of TTL).
	slackMs int64

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newStore(strategy string, opts []limiter.Option) (*store, error) {
	cfg, err := ConfigFor(ProviderLocal, strategy, opts...)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	s := &store{
		strategy:  strategy,
		cfg:       cfg,
		p:         Params{W: cfg.WindowMs, B: cfg.BucketMs},
		m:         newKeymap(),
		windowSec: cfg.Window.Seconds(),
		hardF:     cfg.HardLimitFactor,
		clockSet:  cfg.ClockSet,
		randomSet: cfg.RandomSet,
		sup:       strategy == StrategySuppressed,
		cacheMs:   cfg.CacheMs,
		obs:       cfg.Observer,
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	if cfg.ClockSet {
		s.slackMs = 60_000
	}
	// The sweep runs once per window, at least every minute and at most
	// every second.
	every := min(max(cfg.Window, time.Second), time.Minute)
	if cfg.SweepEvery > 0 {
		every = cfg.SweepEvery
	}
	go s.sweepLoop(every)
	return s, nil
}

// check validates what every call shares and reads the clock.
func (s *store) check(op, k string) (now int64, err error) {
	if s.closed.Load() {
		return 0, errorf(op, limiter.ErrClosed)
	}
	if err := key.Validate(k); err != nil {
		return 0, errorf(op, err)
	}
	return s.now(), nil
}

// incArgs validates an Inc and returns the clock and the capacity: one
// combined test, and incError to name the first thing wrong in the order
// every provider uses.
func (s *store) incArgs(k string, rate limiter.Rate, n int64) (now, c int64, err error) {
	c, ok := capacityOf(rate.PerSecondValue() * s.windowSec)
	if !ok || s.closed.Load() || k == "" || len(k) > key.MaxLen || n < 0 {
		return s.incError(k, rate, n)
	}
	return s.now(), c, nil
}

// incError is incArgs' slow path.
func (s *store) incError(k string, rate limiter.Rate, n int64) (now, c int64, err error) {
	if _, err := s.check("inc", k); err != nil {
		return 0, 0, err
	}
	if err := CheckCost(n); err != nil {
		return 0, 0, errorf("inc", err)
	}
	if c, err = limiter.Capacity(rate, s.cfg.Window); err != nil {
		return 0, 0, errorf("inc", err)
	}
	return s.now(), c, nil // not reached while capacityOf agrees with limiter.Capacity
}

// supArgs is incArgs for the suppressed strategy: the soft and hard
// capacities, multiplied in HardCapacity's order.
func (s *store) supArgs(k string, rate limiter.Rate, n int64) (now, soft, hard int64, err error) {
	x := rate.PerSecondValue() * s.windowSec
	soft, ok := capacityOf(x)
	if f := s.hardF; f != 1 {
		x *= f
	}
	hard, okH := capacityOf(x)
	if !ok || !okH || s.closed.Load() || k == "" || len(k) > key.MaxLen || n < 0 {
		if now, soft, err = s.incError(k, rate, n); err != nil {
			return 0, 0, 0, err
		}
		if hard, err = s.hardCapacity(rate); err != nil {
			return 0, 0, 0, err
		}
	}
	return s.now(), soft, hard, nil
}

// hardCapacity is HardCapacity(rate, W, WithHardLimitFactor).
func (s *store) hardCapacity(rate limiter.Rate) (int64, error) {
	h, err := HardCapacity(rate, s.cfg.Window, s.hardF)
	if err != nil {
		return 0, errorf("inc", err)
	}
	return h, nil
}

// capacityOf is the fast path of limiter.Capacity and HardCapacity on x =
// rate × window seconds (× factor): floor(x + 1e-9), ok false when that is
// not a valid capacity (the caller asks limiter for the error).
func capacityOf(x float64) (c int64, ok bool) {
	if v := x + settings.CapacityEpsilon; v >= 1 && v < float64(settings.MaxCapacity)+1 {
		return int64(v), true
	}
	return 0, false
}

// drawPPM is a single-limit Inc's draw in ppm: DrawWhenNeeded with the
// default source, one draw per call with WithRandom's.
func (s *store) drawPPM() int64 {
	if !s.randomSet {
		return DrawWhenNeeded
	}
	return s.drawSet()
}

// drawSet is kept out of line so that drawPPM inlines.
//
//go:noinline
func (s *store) drawSet() int64 { return DrawPPM(s.cfg.Rand()) }

// now reads the clock in ms; the default clock without an indirect call.
func (s *store) now() int64 {
	if !s.clockSet {
		return settings.WallMs()
	}
	return settings.ClampMs(s.cfg.Clock().UnixMilli())
}

// lock finds k's entry and locks it, creating it when create is true. It
// returns nil, holding nothing, when k is unknown and create is false. The
// caller unlocks e.mu.
//
// now is the caller's clock reading, taken before the lock; lock returns
// the time to decide at: now, or a second reading when now is W + B or
// more before the key's newest bucket. A reading is as old as the caller's
// wait for the lock, and the window would take such a bucket for one dated
// by a clock that jumped ahead and start the key afresh (FromFuture); a
// clock that still reads that far back has stepped back, and the rule
// applies.
func (s *store) lock(k string, create bool, now int64) (*entry, int64) {
	h := s.m.hash(k)
	for {
		e := s.m.load(h, k)
		if e == nil {
			if !create {
				return nil, now
			}
			e = &entry{}
			e.st.ring = e.buf[:]
			e = s.m.loadOrStore(h, k, e)
		}
		e.mu.Lock()
		if !e.dead() {
			if e.st.size > 0 && FromFuture(now, e.st.newest().Start, s.p.Span()) {
				now = s.now()
			}
			return e, now
		}
		e.mu.Unlock()
		s.m.compareAndDelete(h, k, e) // removed meanwhile: help, look again
	}
}

// remove kills the locked entry e of k (hash h), unlocks it and takes it
// out of the map.
func (s *store) remove(h uint64, k string, e *entry) {
	e.kill()
	e.mu.Unlock()
	s.m.compareAndDelete(h, k, e)
}

func (s *store) usage(k string) (limiter.Usage, error) {
	now, err := s.check("get", k)
	if err != nil {
		return limiter.Usage{}, err
	}
	e, now := s.lock(k, false, now)
	if e == nil {
		return limiter.Usage{}, nil
	}
	used, declined, c := e.st.Usage(s.p, now)
	e.mu.Unlock()
	return limiter.Usage{Used: used, Declined: declined, Limit: c}, nil
}

func (s *store) reset(k string) error {
	now, err := s.check("reset", k)
	if err != nil {
		return err
	}
	if e, _ := s.lock(k, false, now); e != nil {
		s.remove(s.m.hash(k), k, e)
	}
	return nil
}

func (s *store) sweepLoop(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sweep()
			s.sweepSets()
		}
	}
}

// gone reports whether a key whose newest bucket opened at newest (ok
// false: none) is past its keep time at now.
func gone(now, newest int64, ok bool, keepMs int64) bool {
	return !ok || now-newest >= keepMs || FromFuture(now, newest, keepMs)
}

// sweep drops every key past its keep time, as Redis expires them (never
// some buckets of a live key), holding one key's lock at a time and
// yielding every sweepChunk keys.
func (s *store) sweep() int {
	dropped, seen := 0, 0
	for i := uint64(0); i < mapShards; i++ {
		t := s.m.snapshot(i)
		if t == nil {
			continue
		}
		for j := range t.slots {
			k, h, e, ok := t.slotEntry(j)
			if !ok {
				continue
			}
			e.mu.Lock()
			if st, ok := e.st.Newest(); !e.dead() && gone(s.now(), st, ok, s.p.Span()+s.slackMs) {
				s.remove(h, k, e)
				dropped++
			} else {
				e.mu.Unlock()
			}
			if seen++; seen%sweepChunk == 0 {
				runtime.Gosched()
			}
		}
		s.m.shrink(i)
	}
	return dropped
}

func (s *store) close(ctx context.Context) error {
	s.once.Do(func() {
		s.closed.Store(true)
		close(s.stop)
	})
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return errorf("close", ctx.Err())
	}
}

// HardCapacity returns H = floor(rate × window in seconds × factor + 1e-9),
// the suppressed strategy's ceiling (limiter.WithHardLimitFactor): with
// factor 1, limiter.Capacity. Its errors are Capacity's, then a bad
// factor's ErrInvalidConfig.
func HardCapacity(r limiter.Rate, window time.Duration, factor float64) (int64, error) {
	// The fast path, as Capacity's: every invalid input fails one of its
	// tests and takes the slow path, which names the error.
	p := r.PerSecondValue()
	if x := p * window.Seconds(); factor >= 1 && window > 0 {
		if factor != 1 {
			x *= factor
		}
		if h, ok := capacityOf(x); ok {
			return h, nil
		}
	}
	if math.IsNaN(p) || math.IsInf(p, 0) || p <= 0 || window <= 0 || factor == 1 {
		return limiter.Capacity(r, window) // the rate's or the window's error
	}
	if math.IsNaN(factor) || math.IsInf(factor, 0) || factor < 1 {
		return 0, fmt.Errorf("%w: hard limit factor %v", limiter.ErrInvalidConfig, factor)
	}
	x := p * window.Seconds() * factor
	if x+settings.CapacityEpsilon < 1 {
		return 0, fmt.Errorf("%w: %v over %v is %.6g units", limiter.ErrCapacityTooSmall, r, window, x)
	}
	return 0, fmt.Errorf("%w: %v over %v with hard limit factor %v is %.6g units, more than 2^50", limiter.ErrInvalidRate, r, window, factor, x)
}
