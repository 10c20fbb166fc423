package limiter_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
)

// fakeClock is a clock that moves only when told (limiter.WithClock takes its Now).
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeSleep records every pause Wait asks for and advances the clock by it
// instead of sleeping. hook, if set, runs at the end of pause i (from 0),
// before ctx is checked, and may cancel ctx or add traffic.
type fakeSleep struct {
	clk   *fakeClock
	hook  func(i int)
	slept []time.Duration
}

func (s *fakeSleep) sleep(ctx context.Context, d time.Duration) error {
	i := len(s.slept)
	s.slept = append(s.slept, d)
	s.clk.Advance(d)
	if s.hook != nil {
		s.hook(i)
	}
	return ctx.Err()
}

// wait runs Wait on the fake clock and sleep.
func (s *fakeSleep) wait(ctx context.Context, l limiter.Limiter, key string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	return limiter.WaitWith(ctx, l, key, rate, n, s.clk.Now, s.sleep)
}

func newFakes(t *testing.T) (*fakeClock, *fakeSleep) {
	t.Helper()
	clk := &fakeClock{t: time.Now().Truncate(time.Second)} // whole ms, as buckets are
	return clk, &fakeSleep{clk: clk}
}

// scripted is a Limiter whose Inc returns the given answers in turn.
type scripted struct {
	limiter.Limiter // nil: only Inc is called
	answers         []answer
	calls           int
}

type answer struct {
	d   limiter.Decision
	err error
}

func (s *scripted) Inc(context.Context, string, limiter.Rate, int64) (limiter.Decision, error) {
	a := s.answers[s.calls]
	s.calls++
	return a.d, a.err
}

func refused(retry time.Duration) answer {
	return answer{d: limiter.Decision{Limit: 2, RetryAfter: retry}}
}

var admitted = answer{d: limiter.Decision{Allowed: true, Limit: 2, Remaining: 1}}

// recording passes calls to a Limiter and records Inc's decisions.
type recording struct {
	limiter.Limiter
	decisions []limiter.Decision
}

func (r *recording) Inc(ctx context.Context, key string, rate limiter.Rate, n int64) (limiter.Decision, error) {
	d, err := r.Limiter.Inc(ctx, key, rate, n)
	r.decisions = append(r.decisions, d)
	return d, err
}

// retryAfters returns the RetryAfter of every refused decision.
func (r *recording) retryAfters() []time.Duration {
	var out []time.Duration
	for _, d := range r.decisions {
		if !d.Allowed {
			out = append(out, d.RetryAfter)
		}
	}
	return out
}

func newLocal(t *testing.T, clk interface{ Now() time.Time }) *local.Absolute {
	t.Helper()
	l, err := local.NewAbsolute(limiter.WithWindow(time.Second), limiter.WithBucket(2*time.Millisecond), limiter.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

func mustInc(t *testing.T, l limiter.Limiter, key string, rate limiter.Rate, n int64) {
	t.Helper()
	if d, err := l.Inc(context.Background(), key, rate, n); err != nil || !d.Allowed {
		t.Fatalf("Inc(%q, %d) = %+v, %v; want allowed", key, n, d, err)
	}
}

// TestWaitLocal waits on the local limiter, sleeping exactly RetryAfter.
func TestWaitLocal(t *testing.T) {
	ctx := context.Background()
	rate := limiter.PerSecond(2) // capacity 2 per second
	t.Run("admitted at once", func(t *testing.T) {
		clk, s := newFakes(t)
		l := newLocal(t, clk)
		d, err := s.wait(ctx, l, "k", rate, 2)
		if err != nil || !d.Allowed || d.Remaining != 0 {
			t.Fatalf("Wait(%q, 2) = %+v, %v; want allowed, 0 remaining", "k", d, err)
		}
		if len(s.slept) != 0 {
			t.Errorf("slept %v, want no sleep", s.slept)
		}
	})
	t.Run("one retry", func(t *testing.T) {
		clk, s := newFakes(t)
		l := newLocal(t, clk)
		mustInc(t, l, "k", rate, 1)
		clk.Advance(200 * time.Millisecond)
		mustInc(t, l, "k", rate, 1)
		clk.Advance(100 * time.Millisecond)
		// n = 2 fits once both units have left the window, about 900 ms
		// later: one sleep of exactly RetryAfter, then admitted.
		rec := &recording{Limiter: l}
		d, err := s.wait(ctx, rec, "k", rate, 2)
		if err != nil || !d.Allowed {
			t.Fatalf("Wait(%q, 2) = %+v, %v; want allowed", "k", d, err)
		}
		if len(rec.decisions) != 2 || !reflect.DeepEqual(s.slept, rec.retryAfters()) {
			t.Errorf("decisions %+v; slept %v, want one sleep of the refusal's RetryAfter", rec.decisions, s.slept)
		}
		if ra := s.slept[0]; ra < 900*time.Millisecond || ra > 902*time.Millisecond {
			t.Errorf("slept %v, want 900 ms (+ B = 2 ms for the bucket)", ra)
		}
	})
	t.Run("retries under competing traffic", func(t *testing.T) {
		clk, s := newFakes(t)
		l := newLocal(t, clk)
		mustInc(t, l, "k", rate, 2)
		clk.Advance(300 * time.Millisecond)
		// Another caller takes the whole window the moment it frees up.
		s.hook = func(i int) {
			if i == 0 {
				mustInc(t, l, "k", rate, 2)
			}
		}
		rec := &recording{Limiter: l}
		d, err := s.wait(ctx, rec, "k", rate, 1)
		if err != nil || !d.Allowed {
			t.Fatalf("Wait(%q, 1) = %+v, %v; want allowed", "k", d, err)
		}
		if len(rec.decisions) != 3 || !reflect.DeepEqual(s.slept, rec.retryAfters()) {
			t.Errorf("decisions %+v; slept %v, want two sleeps of the refusals' RetryAfter", rec.decisions, s.slept)
		}
		if ra := s.slept; len(ra) != 2 || ra[0] < 700*time.Millisecond || ra[0] > 702*time.Millisecond || ra[1] < time.Second || ra[1] > 1002*time.Millisecond {
			t.Errorf("slept %v, want about [700ms 1s]", ra)
		}
		if u, err := l.Get(ctx, "k"); err != nil || u.Used != 1 {
			t.Errorf("Get(%q) = %+v, %v; want 1 used", "k", u, err)
		}
	})
	t.Run("never", func(t *testing.T) {
		clk, s := newFakes(t)
		l := newLocal(t, clk)
		d, err := s.wait(ctx, l, "k", rate, 3)
		if !errors.Is(err, limiter.ErrNeverFits) || !d.Never {
			t.Fatalf("Wait(%q, 3) = %+v, %v; want Never and ErrNeverFits", "k", d, err)
		}
		if len(s.slept) != 0 {
			t.Errorf("slept %v, want no sleep", s.slept)
		}
	})
	t.Run("invalid rate", func(t *testing.T) {
		clk, s := newFakes(t)
		l := newLocal(t, clk)
		if d, err := s.wait(ctx, l, "k", limiter.PerSecond(0), 1); !errors.Is(err, limiter.ErrInvalidRate) {
			t.Fatalf("Wait(%q, 0/s, 1) = %+v, %v; want ErrInvalidRate", "k", d, err)
		}
	})
}

func TestWaitScripted(t *testing.T) {
	errBackend := errors.New("backend down")
	tests := []struct {
		name    string
		answers []answer
		slept   []time.Duration
		err     error // matched with errors.Is; nil: admitted
	}{
		{"allowed", []answer{admitted}, nil, nil},
		{"exact sleeps", []answer{refused(1500 * time.Millisecond), refused(3 * time.Millisecond), admitted},
			[]time.Duration{1500 * time.Millisecond, 3 * time.Millisecond}, nil},
		{"suppressed refusal with no RetryAfter sleeps 1 ms",
			[]answer{
				{d: limiter.Decision{Suppressed: true, Limit: 2, SuppressionFactor: 0.5}},
				{d: limiter.Decision{Suppressed: true, Limit: 2, SuppressionFactor: 0.5}},
				{d: limiter.Decision{Suppressed: true, Allowed: true, Limit: 2, SuppressionFactor: 0.5}},
			},
			[]time.Duration{time.Millisecond, time.Millisecond}, nil},
		{"sub-millisecond RetryAfter sleeps 1 ms", []answer{refused(300 * time.Microsecond), admitted},
			[]time.Duration{time.Millisecond}, nil},
		{"never", []answer{{d: limiter.Decision{Limit: 2, Never: true}}}, nil, limiter.ErrNeverFits},
		{"never after a retry", []answer{refused(time.Second), {d: limiter.Decision{Limit: 1, Never: true}}},
			[]time.Duration{time.Second}, limiter.ErrNeverFits},
		{"Inc error", []answer{{err: errBackend}}, nil, errBackend},
		{"Inc error after a retry", []answer{refused(time.Second), {err: errBackend}}, []time.Duration{time.Second}, errBackend},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, s := newFakes(t)
			l := &scripted{answers: tt.answers}
			d, err := s.wait(context.Background(), l, "k", limiter.PerSecond(2), 1)
			last := tt.answers[len(tt.answers)-1]
			switch {
			case tt.err == nil && (err != nil || d != last.d):
				t.Errorf("Wait = %+v, %v; want %+v", d, err, last.d)
			case tt.err != nil && (!errors.Is(err, tt.err) || d != last.d):
				t.Errorf("Wait = %+v, %v; want %+v, %v", d, err, last.d, tt.err)
			}
			if tt.err == errBackend && err != errBackend {
				t.Errorf("Wait error = %v, want Inc's error as it is", err)
			}
			if l.calls != len(tt.answers) {
				t.Errorf("Inc called %d times, want %d", l.calls, len(tt.answers))
			}
			if !reflect.DeepEqual(s.slept, tt.slept) {
				t.Errorf("slept %v, want %v", s.slept, tt.slept)
			}
		})
	}
}

func TestWaitContext(t *testing.T) {
	t.Run("canceled before the first try", func(t *testing.T) {
		_, s := newFakes(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		l := &scripted{answers: []answer{admitted}}
		d, err := s.wait(ctx, l, "k", limiter.PerSecond(2), 1)
		if err != context.Canceled || d != (limiter.Decision{}) || l.calls != 0 {
			t.Errorf("Wait = %+v, %v after %d calls; want the zero Decision, context.Canceled, no call", d, err, l.calls)
		}
	})
	t.Run("canceled while sleeping", func(t *testing.T) {
		_, s := newFakes(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s.hook = func(i int) {
			if i == 1 {
				cancel()
			}
		}
		l := &scripted{answers: []answer{refused(time.Second), refused(2 * time.Second), admitted}}
		d, err := s.wait(ctx, l, "k", limiter.PerSecond(2), 1)
		if err != context.Canceled || d != l.answers[1].d || l.calls != 2 {
			t.Errorf("Wait = %+v, %v after %d calls; want %+v, context.Canceled after 2", d, err, l.calls, l.answers[1].d)
		}
		if want := []time.Duration{time.Second, 2 * time.Second}; !reflect.DeepEqual(s.slept, want) {
			t.Errorf("slept %v, want %v", s.slept, want)
		}
	})
	t.Run("deadline before RetryAfter", func(t *testing.T) {
		clk, s := newFakes(t)
		ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(time.Hour))
		defer cancel()
		l := &scripted{answers: []answer{refused(time.Hour + time.Millisecond), admitted}}
		d, err := s.wait(ctx, l, "k", limiter.PerSecond(2), 1)
		if !errors.Is(err, context.DeadlineExceeded) || d != l.answers[0].d || l.calls != 1 {
			t.Errorf("Wait = %+v, %v after %d calls; want %+v, DeadlineExceeded after 1", d, err, l.calls, l.answers[0].d)
		}
		if len(s.slept) != 0 {
			t.Errorf("slept %v, want no sleep", s.slept)
		}
	})
	t.Run("deadline before the 1 ms minimum", func(t *testing.T) {
		clk, s := newFakes(t)
		ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(time.Hour))
		defer cancel()
		clk.Advance(time.Hour - time.Microsecond)
		l := &scripted{answers: []answer{refused(0), admitted}}
		if d, err := s.wait(ctx, l, "k", limiter.PerSecond(2), 1); !errors.Is(err, context.DeadlineExceeded) || len(s.slept) != 0 {
			t.Errorf("Wait = %+v, %v after sleeping %v; want DeadlineExceeded, no sleep", d, err, s.slept)
		}
	})
	t.Run("deadline at RetryAfter", func(t *testing.T) {
		clk, s := newFakes(t)
		ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(time.Hour))
		defer cancel()
		l := &scripted{answers: []answer{refused(time.Hour), admitted}}
		d, err := s.wait(ctx, l, "k", limiter.PerSecond(2), 1)
		if err != nil || !d.Allowed {
			t.Errorf("Wait = %+v, %v; want allowed", d, err)
		}
		if want := []time.Duration{time.Hour}; !reflect.DeepEqual(s.slept, want) {
			t.Errorf("slept %v, want %v", s.slept, want)
		}
	})
	t.Run("never before the deadline check", func(t *testing.T) {
		_, s := newFakes(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		l := &scripted{answers: []answer{{d: limiter.Decision{Limit: 2, Never: true}}}}
		if _, err := s.wait(ctx, l, "k", limiter.PerSecond(2), 3); !errors.Is(err, limiter.ErrNeverFits) {
			t.Errorf("Wait error = %v, want ErrNeverFits", err)
		}
	})
}

// TestWaitRealSleep runs the exported Wait, whose sleep is a real timer.
func TestWaitRealSleep(t *testing.T) {
	t.Run("sleeps then admits", func(t *testing.T) {
		l := &scripted{answers: []answer{refused(2 * time.Millisecond), admitted}}
		start := time.Now()
		d, err := limiter.Wait(context.Background(), l, "k", limiter.PerSecond(2), 1)
		if err != nil || !d.Allowed {
			t.Fatalf("Wait = %+v, %v; want allowed", d, err)
		}
		if el := time.Since(start); el < 2*time.Millisecond {
			t.Errorf("Wait returned after %v, want at least the 2 ms RetryAfter", el)
		}
	})
	t.Run("cancel wakes the sleep", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		l := &scripted{answers: []answer{refused(time.Hour), admitted}}
		time.AfterFunc(10*time.Millisecond, cancel)
		start := time.Now()
		_, err := limiter.Wait(ctx, l, "k", limiter.PerSecond(2), 1)
		if err != context.Canceled {
			t.Fatalf("Wait error = %v, want context.Canceled", err)
		}
		if el := time.Since(start); el > time.Minute {
			t.Errorf("Wait returned after %v", el)
		}
	})
	t.Run("expired deadline", func(t *testing.T) {
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		l := &scripted{answers: []answer{admitted}}
		if _, err := limiter.Wait(ctx, l, "k", limiter.PerSecond(2), 1); err != context.DeadlineExceeded || l.calls != 0 {
			t.Errorf("Wait error = %v after %d calls, want context.DeadlineExceeded and no call", err, l.calls)
		}
	})
	t.Run("deadline shorter than RetryAfter", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l := &scripted{answers: []answer{refused(time.Hour), admitted}}
		start := time.Now()
		_, err := limiter.Wait(ctx, l, "k", limiter.PerSecond(2), 1)
		if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			t.Fatalf("Wait error = %v (ctx %v), want DeadlineExceeded before the deadline", err, ctx.Err())
		}
		if el := time.Since(start); el > 30*time.Second {
			t.Errorf("Wait returned after %v, want at once", el)
		}
	})
}
