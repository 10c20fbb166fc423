package local

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/internal/config"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// sweepChunk is how many keys the sweep visits before it yields the
// processor to callers.
const sweepChunk = 128

// entry is one key's state behind its own lock. An entry the sweep or Reset
// has removed from the map is marked dead under that lock first, so a caller
// that loaded it just before the removal sees the mark and looks again
// instead of writing to state nobody will read.
type entry struct {
	mu   sync.Mutex
	st   window.State
	buf  [1]window.Bucket // a key's first bucket lives inline
	dead bool
}

// store is the engine both strategies share: the key map, the clock and the
// background sweep. Lookups are lock-free (sync.Map); the only lock a call
// takes is its own key's, so calls on different keys never write to a
// shared cache line.
type store struct {
	cfg config.Config
	p   window.Params
	m   sync.Map // string → *entry
	// sets holds the keys' states in the limits of sets: string →
	// *setEntry, apart from m (a set's limits are not the single limit).
	sets sync.Map
	// keepMs is how long after its newest bucket opened the sweep keeps a
	// key: W + B, plus a minute under WithClock, whose reading may step
	// back and bring the key's buckets to life again (the Redis providers
	// give such keys the same minute of TTL).
	keepMs int64

	// obs is the observer of WithObserver, nil for none; strategy names
	// the provider's strategy to it.
	obs      limiter.Observer
	strategy string

	closed atomic.Bool
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// clockSlackMs is the minute the sweep adds under WithClock (see keepMs).
const clockSlackMs = 60_000

func newStore(opts []limiter.Option) (*store, error) {
	cfg, err := config.New(opts...)
	if err != nil {
		return nil, err
	}
	s := &store{
		cfg:    cfg,
		p:      window.Params{W: cfg.WindowMs, B: cfg.BucketMs},
		keepMs: cfg.WindowMs + cfg.BucketMs,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	s.obs, _ = cfg.Observer.(limiter.Observer)
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

// incArgs is Inc's preamble: it validates the call and returns the clock
// and the capacity. Valid calls pass one combined test; the rest go to
// check, checkCost and limiter's capacity functions, which name the first
// thing wrong in the order every provider uses.
func (s *store) incArgs(k string, rate limiter.Rate, n int64) (now, c int64, err error) {
	c, cerr := limiter.Capacity(rate, s.cfg.Window)
	if s.closed.Load() || k == "" || len(k) > key.MaxLen || n < 0 || cerr != nil {
		if _, err := s.check("inc", k); err != nil {
			return 0, 0, err
		}
		if err := checkCost(n); err != nil {
			return 0, 0, err
		}
		return 0, 0, fmt.Errorf("local: inc: %w", cerr)
	}
	return s.now(), c, nil
}

// now reads the clock in ms; the default clock without an interface call.
func (s *store) now() int64 {
	if !s.cfg.ClockSet {
		return config.WallMs()
	}
	return config.ClampMs(s.cfg.Clock.Now().UnixMilli())
}

func checkCost(n int64) error {
	if err := config.CheckCost(n); err != nil {
		return fmt.Errorf("local: inc: %w", err)
	}
	return nil
}

// lock finds k's entry and locks it, creating it when create is true. It
// returns nil, holding nothing, when k is unknown and create is false. The
// caller unlocks e.mu.
func (s *store) lock(k string, create bool) *entry {
	for {
		v, ok := s.m.Load(k)
		if !ok {
			if !create {
				return nil
			}
			e := &entry{}
			e.st.UseBuffer(e.buf[:])
			v, _ = s.m.LoadOrStore(k, e)
		}
		e := v.(*entry)
		e.mu.Lock()
		if !e.dead {
			return e
		}
		e.mu.Unlock()
		// Removed between our load and our lock: make sure the map no longer
		// holds it (its remover may not have got there yet) and look again.
		s.m.CompareAndDelete(k, e)
	}
}

// remove takes the locked entry e of k out of the map and unlocks it.
func (s *store) remove(k string, e *entry) {
	e.dead = true
	e.mu.Unlock()
	s.m.CompareAndDelete(k, e)
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
		s.remove(k, e)
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

// sweep drops every key without a live bucket. It holds one key's lock at a
// time, and yields the processor every sweepChunk keys, so callers never
// wait on it for more than one key. It drops whole keys only, never some
// buckets of a live key: like a read, it leaves a key's buckets to its
// next write, so a clock that steps back finds the same buckets here as in
// Redis (whose keys expire whole).
func (s *store) sweep() int {
	dropped, seen := 0, 0
	s.m.Range(func(k, v any) bool {
		e := v.(*entry)
		e.mu.Lock()
		if e.dead {
			e.mu.Unlock()
		} else if st, ok := e.st.Newest(); ok && s.now()-st < s.keepMs && !window.FromFuture(s.now(), st, s.keepMs) {
			e.mu.Unlock()
		} else {
			s.remove(k.(string), e)
			dropped++
		}
		if seen++; seen%sweepChunk == 0 {
			runtime.Gosched()
		}
		return true
	})
	return dropped
}

// keys counts the keys held (for tests and memory figures).
func (s *store) keys() int {
	n := 0
	s.m.Range(func(_, _ any) bool { n++; return true })
	return n
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
