package sluice_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// probeInterval is WithProbeInterval's default.
const probeInterval = 200 * time.Millisecond

// stateLog records a limiter's state changes with their instants.
type stateLog struct {
	mu      sync.Mutex
	changes []stateAt
	ch      chan struct{}
}

type stateAt struct {
	degraded bool
	at       time.Time
}

func newStateLog() *stateLog { return &stateLog{ch: make(chan struct{}, 64)} }

func (s *stateLog) hook(sc limiter.StateChange) {
	s.mu.Lock()
	s.changes = append(s.changes, stateAt{sc.Degraded, time.Now()})
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// wait returns the instant of the first change to degraded (or out of
// it) after from, waiting up to within; zero when none came.
func (s *stateLog) wait(degraded bool, from time.Time, within time.Duration) time.Time {
	deadline := time.After(within)
	for {
		s.mu.Lock()
		for _, c := range s.changes {
			if c.degraded == degraded && !c.at.Before(from) {
				s.mu.Unlock()
				return c.at
			}
		}
		s.mu.Unlock()
		select {
		case <-s.ch:
		case <-deadline:
			return time.Time{}
		}
	}
}

// TestFreezeWithHotKeys: a Redis stopped with SIGSTOP while the instance
// answers its hot keys from memory (refusals hot-key relief remembers, a
// hybrid's cached refusals) and calls other keys on Redis: the breaker
// opens within two timeouts and one probe interval of the freeze in 8 of
// 8 runs, on the README's client (memory is not the wire: answers from it
// are not replies of Redis's, which would make the confirming probe
// inconclusive); after SIGCONT the breaker closes within one probe
// interval and the write-back.
func TestFreezeWithHotKeys(t *testing.T) {
	const runs = 8
	for _, p := range fleetProviders {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartServer(t)
			for run := 0; run < runs; run++ {
				freezeRun(t, p, srv, run)
			}
		})
	}
}

func freezeRun(t *testing.T, p fleetProvider, srv *redistest.Server, run int) {
	t.Helper()
	ctx := context.Background()
	states := newStateLog()
	l, err := p.new(readmeClient(t, srv.Addr), limiter.WithPrefix(fmt.Sprintf("%s-%d", redistest.Prefix(t), run)),
		limiter.WithStateChange(states.hook), limiter.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	hot := limiter.Every(5, time.Minute)
	for k := 0; k < 4; k++ {
		spendAndRefuse(t, l, fmt.Sprintf("hot:%d", k), hot, 5)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if w%4 == 0 {
					// A new key each call: a hybrid holds no lease of it, so
					// every such call asks Redis.
					l.Inc(ctx, fmt.Sprintf("cold:%d:%d", w, i), limiter.PerSecond(1000), 1)
				} else {
					l.Inc(ctx, fmt.Sprintf("hot:%d", w%4), hot, 1)
				}
				// A pause, so that the process is busy, not starved
				// (a starved process makes the probe inconclusive).
				time.Sleep(200 * time.Microsecond)
			}
		}(w)
	}
	time.Sleep(200 * time.Millisecond)
	frozen := time.Now()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	opened := states.wait(true, frozen, 10*time.Second)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	closed := states.wait(false, resumed, 10*time.Second)
	close(stop)
	wg.Wait()
	bound := 2*onsetTimeout + probeInterval + onsetSlack()
	switch {
	case opened.IsZero():
		t.Errorf("run %d: the breaker did not open within 10 s of the freeze", run)
	case opened.Sub(frozen) > bound:
		t.Errorf("run %d: the breaker opened %v after the freeze, want at most %v", run, opened.Sub(frozen), bound)
	}
	// Back on Redis at the first probe after SIGCONT (within one probe
	// interval), then the write-back of what the fallback admitted (two
	// passes of pipelines: a few hundred keys here) before the breaker
	// closes: 200 to 480 ms measured under make test's load.
	closeBound := 2*probeInterval + 2*onsetSlack()
	switch {
	case closed.IsZero():
		t.Errorf("run %d: the breaker did not close within 10 s of SIGCONT", run)
	case closed.Sub(resumed) > closeBound:
		t.Errorf("run %d: the breaker closed %v after SIGCONT, want at most %v", run, closed.Sub(resumed), closeBound)
	}
	t.Logf("run %d: opened freeze+%v, closed SIGCONT+%v", run, opened.Sub(frozen).Round(time.Millisecond),
		closed.Sub(resumed).Round(time.Millisecond))
}
