package redisprov

import "time"

// The goroutines that run bounded's calls. A worker keeps the large stack
// a Redis call grows, which a goroutine per call would grow anew each time
// (docs/benchmarks.md). spawn hands a call to an idle worker (never a
// queue) or starts one; a worker ends after workerIdle without a call or
// when the guard closes.

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
	if g.closed { // Close waits for workers: no new one; g.calls counts f
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
			if !t.Stop() { // drain: right before and after Go 1.23
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
