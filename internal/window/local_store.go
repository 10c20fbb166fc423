package window

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// sweepChunk is how many keys the sweep visits before it yields the
// processor to callers.
const sweepChunk = 128

// entry is one key's state behind its own lock, 128 bytes: two cache
// lines. The sweep or Reset marks an entry dead under that lock (its
// state dropped) before removing it, so a caller that loaded it just
// before looks again instead of writing to state nobody reads.
type entry struct {
	mu  sync.Mutex
	k   string // set by keymap.loadOrStore before publishing; never changed
	st  State
	buf [1]Bucket // a key's first bucket lives inline
}

// dead reports whether the entry was removed from the map; the caller holds
// e.mu.
func (e *entry) dead() bool { return e.st.Dropped() }

// kill marks the entry removed; the caller holds e.mu.
func (e *entry) kill() { e.st.Drop() }

// store is the engine both strategies share: the key map, the clock and the
// background sweep. Lookups are lock-free (keymap); a call on a known key
// takes only its own key's lock.
type store struct {
	// What an Inc reads comes first, in one or two cache lines; these copy
	// fields of cfg.
	p                   Params
	m                   *keymap
	windowSec           float64 // W in seconds
	hardF               float64 // WithHardLimitFactor
	obs                 limiter.Observer
	closed              atomic.Bool
	clockSet, randomSet bool
	cacheMs             int64

	strategy string // the strategy's name, for the observer
	cfg      Config
	// sets holds the states of sets' limits: string → *setEntry.
	sets sync.Map
	// keepMs is how long after its newest bucket opened the sweep keeps a
	// key: W + B, plus clockSlackMs under WithClock, whose clock may step
	// back (the Redis providers give such keys the same minute of TTL).
	keepMs int64

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// clockSlackMs is the minute the sweep adds under WithClock.
const clockSlackMs = 60_000

func newStore(strategy string, opts []limiter.Option) (*store, error) {
	cfg, err := ConfigFor(ProviderLocal, strategy, opts...)
	if err != nil {
		return nil, err
	}
	s := &store{
		strategy:  strategy,
		cfg:       cfg,
		p:         Params{W: cfg.WindowMs, B: cfg.BucketMs},
		m:         newKeymap(),
		keepMs:    cfg.WindowMs + cfg.BucketMs,
		windowSec: cfg.Window.Seconds(),
		hardF:     cfg.HardLimitFactor,
		clockSet:  cfg.ClockSet,
		randomSet: cfg.RandomSet,
		cacheMs:   cfg.CacheMs,
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	s.obs = cfg.Observer
	if cfg.ClockSet {
		s.keepMs += clockSlackMs
	}
	every := sweepInterval(cfg.Window)
	if cfg.SweepEvery > 0 {
		every = cfg.SweepEvery
	}
	go s.sweepLoop(every)
	return s, nil
}

// sweepInterval is how often idle keys are dropped: once per window, but at
// least every minute and at most every second.
func sweepInterval(w time.Duration) time.Duration {
	return min(max(w, time.Second), time.Minute)
}

// check validates what every call shares and reads the clock.
func (s *store) check(op, k string) (now int64, err error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("local: %s: %w", op, limiter.ErrClosed)
	}
	if err := key.Validate(k); err != nil {
		return 0, fmt.Errorf("local: %s: %w", op, err)
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
	if err := checkCost(n); err != nil {
		return 0, 0, err
	}
	c, err = limiter.Capacity(rate, s.cfg.Window)
	if err != nil {
		return 0, 0, fmt.Errorf("local: inc: %w", err)
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
		return s.supError(k, rate, n)
	}
	return s.now(), soft, hard, nil
}

// supError is supArgs' slow path: incArgs' errors first, then the hard
// capacity's.
func (s *store) supError(k string, rate limiter.Rate, n int64) (now, soft, hard int64, err error) {
	if now, soft, err = s.incError(k, rate, n); err != nil {
		return 0, 0, 0, err
	}
	if hard, err = s.hardCapacity(rate); err != nil {
		return 0, 0, 0, err
	}
	return now, soft, hard, nil
}

// hardX is rate × W in seconds × WithHardLimitFactor, multiplied in
// HardCapacity's order, for capacityOf.
func (s *store) hardX(rate limiter.Rate) float64 {
	x := rate.PerSecondValue() * s.windowSec
	if f := s.hardF; f != 1 {
		x *= f
	}
	return x
}

// hardCapacity is HardCapacity(rate, W, WithHardLimitFactor): the
// fast path, else HardCapacity's error.
func (s *store) hardCapacity(rate limiter.Rate) (int64, error) {
	if h, ok := capacityOf(s.hardX(rate)); ok {
		return h, nil
	}
	h, err := HardCapacity(rate, s.cfg.Window, s.cfg.HardLimitFactor)
	if err != nil {
		return 0, fmt.Errorf("local: inc: %w", err)
	}
	return h, nil
}

// capacityEpsilon is limiter's: it absorbs binary rounding in rate × window.
const capacityEpsilon = settings.CapacityEpsilon

// capacityOf is the fast path of limiter.Capacity and HardCapacity on x =
// rate × window seconds (× factor): floor(x + 1e-9), ok false when that is
// not a valid capacity (the caller asks limiter for the error).
// TestCapacityMatchesLimiter checks it against limiter's.
func capacityOf(x float64) (c int64, ok bool) {
	if v := x + capacityEpsilon; v >= 1 && v < float64(settings.MaxCapacity)+1 {
		return int64(v), true
	}
	return 0, false
}

// draw is the suppressed strategy's one draw per call: the source of
// WithRandom, or math/rand/v2's Float64 called directly.
func (s *store) draw() float64 {
	if !s.randomSet {
		return rand.Float64()
	}
	return s.cfg.Rand()
}

// drawPPM is a single-limit Inc's draw in ppm: DrawWhenNeeded with the
// default source, one draw per call with WithRandom's.
func (s *store) drawPPM() int64 {
	if !s.randomSet {
		return DrawWhenNeeded
	}
	return s.drawSet()
}

// drawSet draws from the source of WithRandom, kept out of line so that
// drawPPM inlines.
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

func checkCost(n int64) error {
	if err := CheckCost(n); err != nil {
		return fmt.Errorf("local: inc: %w", err)
	}
	return nil
}

// lock finds k's entry and locks it, creating it when create is true. It
// returns nil, holding nothing, when k is unknown and create is false. The
// caller unlocks e.mu.
func (s *store) lock(k string, create bool) *entry {
	h := s.m.hash(k)
	for {
		e := s.m.load(h, k)
		if e == nil {
			if !create {
				return nil
			}
			e = &entry{}
			e.st.UseBuffer(e.buf[:])
			e = s.m.loadOrStore(h, k, e)
		}
		e.mu.Lock()
		if !e.dead() {
			return e
		}
		e.mu.Unlock()
		s.m.compareAndDelete(h, k, e) // removed meanwhile: help, look again
	}
}

// remove takes the locked entry e of k (hash h) out of the map and unlocks
// it.
func (s *store) remove(h uint64, k string, e *entry) {
	e.kill()
	e.mu.Unlock()
	s.m.compareAndDelete(h, k, e)
}

// usage reads k's state under its lock.
func (s *store) usage(k string) (limiter.Usage, error) {
	now, err := s.check("get", k)
	if err != nil {
		return limiter.Usage{}, err
	}
	e := s.lock(k, false)
	if e == nil {
		return limiter.Usage{}, nil
	}
	used, declined, c := e.st.Usage(s.p, now)
	e.mu.Unlock()
	return limiter.Usage{Used: used, Declined: declined, Limit: c}, nil
}

func (s *store) reset(k string) error {
	if _, err := s.check("reset", k); err != nil {
		return err
	}
	if e := s.lock(k, false); e != nil {
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

// sweep drops every key without a live bucket, holding one key's lock at
// a time and yielding every sweepChunk keys. It drops whole keys only, as
// Redis expires them, never some buckets of a live key.
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
			if e.dead() {
				e.mu.Unlock()
			} else if st, ok := e.st.Newest(); ok && s.now()-st < s.keepMs && !FromFuture(s.now(), st, s.keepMs) {
				e.mu.Unlock()
			} else {
				s.remove(h, k, e)
				dropped++
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
		return fmt.Errorf("local: close: %w", ctx.Err())
	}
}
