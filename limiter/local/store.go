package local

import (
	"context"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/internal/config"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// nShards spreads keys over independent locks. A power of two.
const nShards = 256

// sweepChunk bounds how many keys the sweep visits under one shard lock.
const sweepChunk = 128

type entry struct {
	key string
	idx int // position in shard.list
	st  window.State
	buf [2]window.Bucket // the first buckets live inline: one cache miss less for a cold key
}

type shard struct {
	mu   sync.Mutex
	m    map[string]*entry
	list []*entry // the same entries, in a slice the sweep can walk in chunks
	_    [40]byte // keep neighbouring shards' locks off one cache line
}

// store is the engine both strategies share: sharded key state, the clock
// and the background sweep.
type store struct {
	cfg    config.Config
	p      window.Params
	seed   maphash.Seed
	shards [nShards]shard

	closed atomic.Bool
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

func newStore(opts []limiter.Option) (*store, error) {
	cfg, err := config.New(opts...)
	if err != nil {
		return nil, err
	}
	s := &store{
		cfg:  cfg,
		p:    window.Params{W: cfg.WindowMs, B: cfg.BucketMs},
		seed: maphash.MakeSeed(),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*entry)
	}
	go s.sweepLoop(sweepInterval(cfg.Window))
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
	return s.cfg.NowMs(), nil
}

func checkCost(n int64) error {
	if err := config.CheckCost(n); err != nil {
		return fmt.Errorf("local: inc: %w", err)
	}
	return nil
}

// lock finds k's shard and locks it, returning the key's state, or nil when
// the key is unknown and create is false. The caller unlocks sh.mu.
func (s *store) lock(k string, create bool) (*shard, *window.State) {
	sh := &s.shards[maphash.String(s.seed, k)&(nShards-1)]
	sh.mu.Lock()
	e := sh.m[k]
	if e == nil {
		if !create {
			return sh, nil
		}
		e = &entry{key: k, idx: len(sh.list)}
		e.st.UseBuffer(e.buf[:])
		sh.m[k] = e
		sh.list = append(sh.list, e)
	}
	return sh, &e.st
}

// usage reads k's state under its lock.
func (s *store) usage(k string) (limiter.Usage, error) {
	now, err := s.check("get", k)
	if err != nil {
		return limiter.Usage{}, err
	}
	sh, st := s.lock(k, false)
	defer sh.mu.Unlock()
	if st == nil {
		return limiter.Usage{}, nil
	}
	st.Expire(now, s.p.W)
	if !st.Live() {
		return limiter.Usage{}, nil
	}
	return limiter.Usage{Used: st.Used - st.Declined, Declined: st.Declined, Limit: st.Capacity}, nil
}

func (s *store) reset(k string) error {
	if _, err := s.check("reset", k); err != nil {
		return err
	}
	sh, st := s.lock(k, false)
	if st != nil {
		sh.remove(sh.m[k])
	}
	sh.mu.Unlock()
	return nil
}

// remove deletes e from the shard; the caller holds the lock.
func (sh *shard) remove(e *entry) {
	last := len(sh.list) - 1
	moved := sh.list[last]
	sh.list[e.idx] = moved
	moved.idx = e.idx
	sh.list[last] = nil
	sh.list = sh.list[:last]
	delete(sh.m, e.key)
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
		}
	}
}

// sweep drops every key without a live bucket. It holds a shard's lock for
// at most sweepChunk keys at a time, so callers wait microseconds, not the
// length of a full pass.
func (s *store) sweep() int {
	dropped := 0
	for i := range s.shards {
		sh := &s.shards[i]
		for pos := 0; ; {
			sh.mu.Lock()
			now := s.cfg.NowMs()
			end := min(pos+sweepChunk, len(sh.list))
			for pos < end {
				e := sh.list[pos]
				e.st.Expire(now, s.p.W)
				if e.st.Live() {
					pos++
					continue
				}
				sh.remove(e) // the last entry moves to pos: look at it next
				end = min(end, len(sh.list))
				dropped++
			}
			more := pos < len(sh.list)
			sh.mu.Unlock()
			if !more {
				break
			}
			runtime.Gosched()
		}
	}
	return dropped
}

// keys counts the keys held (for tests and memory figures).
func (s *store) keys() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
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
