package redistest

import "time"

// StallMeter measures how late this process runs a goroutine that asks to
// wake up every millisecond: the longest scheduling stall the process
// saw, which a timing bound of a test adds to what it allows (a loaded
// machine delays every goroutine, the limiter's as much as the test's).
type StallMeter struct {
	stop  chan struct{}
	done  chan struct{}
	worst time.Duration
}

// NewStallMeter starts a meter; End stops it.
func NewStallMeter() *StallMeter {
	m := &StallMeter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			start := time.Now()
			select {
			case <-m.stop:
				return
			case <-time.After(time.Millisecond):
			}
			m.worst = max(m.worst, time.Since(start)-time.Millisecond)
		}
	}()
	return m
}

// End stops the meter and returns the longest stall.
func (m *StallMeter) End() time.Duration {
	close(m.stop)
	<-m.done
	return m.worst
}
