package redisprov

import "time"

// The goroutines that run bounded's calls.
//
// A Redis call's chain (the guard, the provider, the batcher's select,
// go-redis) needs more stack than a new goroutine starts with, so a
// goroutine per call grew and copied its stack on every call: a fifth of
// the client's CPU per call in the benchmarks (runtime.newstack under
// bounded, docs/benchmarks.md). A worker keeps its grown stack and runs
// call after call. spawn hands a call to a worker that is waiting for one
// (an unbuffered send, never a queue: a call never waits behind another),
// and starts a worker when none is idle, so there are as many workers as
// calls ran at once at the busiest, each gone after workerIdle without a
// call, and all gone when the guard closes (Close waits for them).

// workerIdle is how long a worker waits for a call before it ends.
const workerIdle = 5 * time.Second

// spawn runs f on a worker of g: an idle one, or a new one.
func (g *Guard) spawn(f func()) {
	select {
	case g.work <- f:
		return
	default:
	}
	g.mu.Lock()
	if g.closed {
		// No new worker once Close began (it waits for them): the call
		// runs on a goroutine of its own, which g.calls counts.
		g.mu.Unlock()
		go f()
		return
	}
	g.workers.Add(1)
	g.mu.Unlock()
	go g.worker(f)
}

// worker runs f, then the calls spawn hands it, until it has waited
// workerIdle for one or g closes.
func (g *Guard) worker(f func()) {
	defer g.workers.Done()
	f()
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		select {
		case f = <-g.work:
			f()
			// Stop and drain, then Reset: right under both timer
			// semantics (before Go 1.23 a fired timer keeps its value in
			// the channel; after, Stop discards it).
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
			t.Reset(workerIdle)
		case <-t.C:
			return
		case <-g.stopCtx.Done():
			return
		}
	}
}
