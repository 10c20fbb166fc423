package redisprov

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// workerGuard is a Guard with what bounded and Close need, and nothing
// else: no client, no probe.
func workerGuard() *Guard {
	g := &Guard{maxAbandoned: 8, released: make(chan struct{}, 1), work: make(chan func())}
	g.stopCtx, g.stop = context.WithCancel(context.Background())
	g.rearm()
	g.watch = new(dialWatch)
	return g
}

// goid is the calling goroutine's id, read from its stack trace's
// header ("goroutine 42 [running]:").
func goid() string {
	var buf [64]byte
	s := string(buf[:runtime.Stack(buf[:], false)])
	s = strings.TrimPrefix(s, "goroutine ")
	id, _, _ := strings.Cut(s, " ")
	return id
}

// TestWorkersReused: bounded's calls run on workers that outlive them: a
// thousand calls, eight at a time, run on a few dozen goroutines at most
// (a thousand before: one per call), every call's result comes back, and
// the workers end when the guard stops.
func TestWorkersReused(t *testing.T) {
	g := workerGuard()
	var mu sync.Mutex
	ran := map[string]bool{} // the goroutines the calls ran on
	var wg sync.WaitGroup
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < 125; i++ {
				want := c*1000 + i
				v, err := bounded(g, context.Background(), func(context.Context) (int, error) {
					id := goid()
					mu.Lock()
					ran[id] = true
					mu.Unlock()
					return want, nil
				})
				if err != nil || v != want {
					t.Errorf("bounded = %d, %v; want %d", v, err, want)
					return
				}
			}
		}(c)
	}
	wg.Wait()
	// 8 callers, and a new worker only when a caller came while every
	// worker was between two calls: far fewer than the 1,000 calls.
	if len(ran) > 100 {
		t.Errorf("1,000 calls ran on %d goroutines: the workers are not reused", len(ran))
	}
	t.Logf("1,000 calls from 8 callers ran on %d workers", len(ran))
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.stop()
	done := make(chan struct{})
	go func() { g.calls.Wait(); g.workers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the workers did not end within 5 s of the guard's stop")
	}
}

// TestWorkerAbandoned: a call whose caller left (its ctx ended) finishes
// on its worker, which then takes the next call; the abandoned count goes
// back to 0.
func TestWorkerAbandoned(t *testing.T) {
	g := workerGuard()
	defer g.stop()
	release := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := bounded(g, ctx, func(context.Context) (int, error) { <-release; return 1, nil })
	if err == nil {
		t.Fatal("a call past its caller's deadline returned no error")
	}
	if got := g.Abandoned(); got != 1 {
		t.Fatalf("Abandoned = %d, want 1", got)
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for g.Abandoned() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned call never ended")
		}
		time.Sleep(time.Millisecond)
	}
	v, err := bounded(g, context.Background(), func(context.Context) (int, error) { return 2, nil })
	if err != nil || v != 2 {
		t.Fatalf("the next call = %d, %v; want 2", v, err)
	}
}

// TestWorkerAfterClose: a call made once the guard began to close runs
// on a goroutine of its own (no new worker: Close waits for them).
func TestWorkerAfterClose(t *testing.T) {
	g := workerGuard()
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.stop()
	v, err := bounded(g, context.Background(), func(context.Context) (int, error) { return 3, nil })
	if err != nil || v != 3 {
		t.Fatalf("bounded after close = %d, %v; want 3", v, err)
	}
	g.calls.Wait()
	g.workers.Wait() // returns at once: no worker was started
}
