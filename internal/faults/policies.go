package faults

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/window"

	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// loading is the error reply miniredis gives every command during a
// simulated outage: one of the replies that mean "unavailable".
const loading = "LOADING Redis is loading the dataset in memory"

// RunPolicies checks each failure policy on miniredis (whose commands all
// fail with LOADING during the outage), that bad input never opens the
// breaker, and reconciliation on a real redis-server, alone and in a fleet
// of three. pkg is the provider's package name ("redisabs").
func RunPolicies(t *testing.T, pkg string, newLimiter NewLimiter) {
	t.Run("Policies", func(t *testing.T) { runPolicies(t, pkg, newLimiter) })
	t.Run("BadInputKeepsBreakerClosed", func(t *testing.T) { runBadInput(t, newLimiter) })
	t.Run("Reconcile", func(t *testing.T) { runReconcile(t, newLimiter) })
	t.Run("WriteBackOverFullKey", func(t *testing.T) { runWriteBackOverFull(t, newLimiter, false) })
	t.Run("WriteBackOverFullSet", func(t *testing.T) { runWriteBackOverFull(t, newLimiter, true) })
	t.Run("UnreconciledCountsUnits", func(t *testing.T) { runUnreconciled(t, newLimiter) })
	t.Run("Fleet", func(t *testing.T) { runFleet(t, newLimiter) })
}

func runPolicies(t *testing.T, pkg string, newLimiter NewLimiter) {
	ctx := context.Background()
	rate := limiter.PerMinute(10) // C = 10
	for _, pp := range redistest.Policies {
		p := pp.P
		t.Run(pp.Name, func(t *testing.T) {
			mr, c := redistest.Mini(t)
			rec := &recorder{ch: make(chan limiter.StateChange, 16)}
			l := newLimiter(t, c, limiter.WithPrefix(redistest.Prefix(t)), limiter.WithFailurePolicy(p),
				limiter.WithProbeInterval(5*time.Millisecond), limiter.WithObserver(window.StateObserver(rec.hook)))
			defer l.Close(ctx)
			for i := 0; i < 3; i++ {
				if d, err := l.Inc(ctx, "k", rate, 1); err != nil || d.Degraded || !d.Allowed {
					t.Fatalf("Inc(k, 1) on healthy Redis = %+v, %v; want allowed, not degraded", d, err)
				}
			}
			mr.SetError(loading)
			// leased: the first calls of the outage a hybrid's lease
			// answered, from memory whatever Redis' state (limiter/hybrid,
			// Failure modes): at most one, the unit left of the lease the
			// healthy calls grew.
			var allowed, leased int
			for j := 0; j < 15; j++ {
				d, err := l.Inc(ctx, "k", rate, 1)
				if j == leased && leased < 1 && pkg == "hybrid" && err == nil && d.Allowed && !d.Degraded && !d.Shed {
					leased++
					continue
				}
				i := j - leased
				if i == 0 && (err == nil && d.Shed || errors.Is(err, limiter.ErrShed)) {
					// The first call ran out of time on a loaded machine
					// before it saw the reply: shed, not evidence.
					continue
				}
				if p == limiter.FailError {
					want := pkg + ": inc: "
					switch {
					case err == nil || !strings.HasPrefix(err.Error(), want):
						t.Fatalf("Inc %d under FailError: error %v, want one starting %q", i, err, want)
					case i == 0 && (errors.Is(err, limiter.ErrUnavailable) || !strings.Contains(err.Error(), loading)):
						t.Fatalf("first Inc under FailError: %v, want Redis's error unchanged", err)
					case i > 0 && !errors.Is(err, limiter.ErrUnavailable):
						t.Fatalf("Inc %d with the breaker open: %v, want ErrUnavailable", i, err)
					}
					continue
				}
				if err != nil || !d.Degraded {
					t.Fatalf("Inc %d during the outage = %+v, %v; want degraded, no error", i, d, err)
				}
				if d.Allowed {
					allowed++
				}
			}
			switch p {
			case limiter.FallbackLocal: // the local limiter starts empty: exactly C
				if allowed != 10 {
					t.Errorf("FallbackLocal admitted %d of 15, want 10", allowed)
				}
			case limiter.FailOpen:
				if allowed != 15-leased {
					t.Errorf("FailOpen admitted %d of %d, want all", allowed, 15-leased)
				}
			case limiter.FailClosed:
				if allowed != 0 {
					t.Errorf("FailClosed admitted %d of 15, want none", allowed)
				}
			}
			if d, err := l.IsAllowed(ctx, "k"); p != limiter.FailError && (err != nil || !d.Degraded) {
				t.Errorf("IsAllowed during the outage = %+v, %v; want degraded", d, err)
			}
			if _, err := l.Get(ctx, "k"); !errors.Is(err, limiter.ErrUnavailable) {
				t.Errorf("Get during the outage: %v, want ErrUnavailable", err)
			}
			if sc := <-rec.ch; !sc.Degraded || sc.Cause == nil || !strings.Contains(sc.Cause.Error(), "LOADING") || sc.Policy != p {
				t.Errorf("state change = %+v, want entering degraded mode with the LOADING cause", sc)
			}
			mr.SetError("")
			rec.wait(t, false, 2*time.Second)
			if d, err := l.Inc(ctx, "k", rate, 1); err != nil || d.Degraded {
				t.Errorf("Inc after recovery = %+v, %v; want from Redis", d, err)
			}
		})
	}
}

func runBadInput(t *testing.T, newLimiter NewLimiter) {
	ctx := context.Background()
	_, c := redistest.Mini(t)
	rec := &recorder{ch: make(chan limiter.StateChange, 16)}
	l := newLimiter(t, c, limiter.WithPrefix(redistest.Prefix(t)), limiter.WithObserver(window.StateObserver(rec.hook)))
	defer l.Close(ctx)
	good := limiter.PerSecond(10)
	bad := []func() error{
		func() error { _, err := l.Inc(ctx, "", good, 1); return err },
		func() error { _, err := l.Inc(ctx, strings.Repeat("x", 513), good, 1); return err },
		func() error { _, err := l.Inc(ctx, "k", limiter.PerSecond(math.NaN()), 1); return err },
		func() error { _, err := l.Inc(ctx, "k", limiter.PerSecond(-1), 1); return err },
		func() error { _, err := l.Inc(ctx, "k", limiter.PerSecond(0.001), 1); return err }, // capacity < 1
		func() error { _, err := l.Inc(ctx, "k", good, -1); return err },
		func() error { _, err := l.IsAllowed(ctx, ""); return err },
		func() error { _, err := l.Get(ctx, ""); return err },
		func() error { return l.Reset(ctx, "") },
	}
	for i := 0; i < 10_000; i++ {
		if err := bad[i%len(bad)](); err == nil {
			t.Fatalf("bad call %d: no error", i%len(bad))
		}
	}
	if n := rec.count(); n != 0 {
		t.Fatalf("%d state changes after bad input, want none", n)
	}
	if d, err := l.Inc(ctx, "k", good, 1); err != nil || d.Degraded {
		t.Fatalf("Inc after bad input = %+v, %v; want from Redis", d, err)
	}
}

// onRecordedServer starts a real redis-server and a limiter on it, with
// opts, whose state changes rec records.
func onRecordedServer(t *testing.T, newLimiter NewLimiter, opts ...limiter.Option) (*redistest.Server, limiter.Limiter, *recorder) {
	srv := redistest.StartServer(t)
	opt := srv.Options()
	opt.ContextTimeoutEnabled = true
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	rec := &recorder{ch: make(chan limiter.StateChange, 16)}
	l := newLimiter(t, c, append([]limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithObserver(window.StateObserver(rec.hook))}, opts...)...)
	return srv, l, rec
}

func runReconcile(t *testing.T, newLimiter NewLimiter) {
	ctx := context.Background()
	srv, l, rec := onRecordedServer(t, newLimiter)
	defer l.Close(ctx)
	rate := limiter.PerMinute(100)
	if _, err := l.Inc(ctx, "warm", rate, 1); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	const k = 7
	for i, shed := 0, 0; i < k; {
		d, err := l.Inc(ctx, "r", rate, 1)
		if err == nil && d.Shed && !d.Allowed && !d.Degraded && shed < 100 {
			// A dial that outlasts the timeout on a loaded machine is a
			// timeout, not wire evidence: the call is shed until the
			// confirming probe opens the breaker.
			shed++
			continue
		}
		if err != nil || !d.Degraded || !d.Allowed {
			t.Fatalf("Inc(r, 1) during the outage = %+v, %v; want admitted by the fallback", d, err)
		}
		i++
	}
	if err := srv.Restart(); err != nil { // empty: only reconciliation brings the units back
		t.Fatal(err)
	}
	rec.wait(t, false, 3*time.Second)
	rec.mu.Lock()
	last := rec.events[len(rec.events)-1].sc
	rec.mu.Unlock()
	if last.Reconciled != 1 || last.Unreconciled != 0 {
		t.Errorf("leaving event = %+v, want 1 key reconciled", last)
	}
	u, err := l.Get(ctx, "r")
	for deadline := time.Now().Add(5 * time.Second); errors.Is(err, limiter.ErrUnavailable) && time.Now().Before(deadline); {
		// A client that keeps connections from before the restart
		// (rueidis, valkey-go) may answer the first call on each with its
		// end (io.EOF), which opens the breaker again until the probe
		// finds Redis; what this test checks is what reconciliation wrote.
		t.Logf("Get(r) after recovery: %v; again", err)
		time.Sleep(50 * time.Millisecond)
		u, err = l.Get(ctx, "r")
	}
	if err != nil || u.Used != k {
		t.Fatalf("Get(r) after recovery = %+v, %v; want Used %d", u, err, k)
	}
}

// runFleet: three limiters on one Redis, each with its own client, call
// one key through an outage that starts before the traffic. The fallbacks
// admit up to C each; after recovery the reconciled units fill Redis, so
// no window spanning the outage holds more than 3C and no window starting
// after the last recovery holds more than C.
func runFleet(t *testing.T, newLimiter NewLimiter) {
	ctx := context.Background()
	srv := redistest.StartServer(t)
	prefix := redistest.Prefix(t)
	const w, b = time.Second, 10 * time.Millisecond
	rate := limiter.PerSecond(20) // C = 20
	const capacity = 20
	var (
		mu    sync.Mutex
		times []time.Time
		backs []time.Time
	)
	type member struct {
		l   limiter.Limiter
		rec *recorder
	}
	var fleet []member
	for i := 0; i < 3; i++ {
		opt := srv.Options()
		opt.ContextTimeoutEnabled = true
		c := redis.NewClient(opt)
		defer c.Close()
		rec := &recorder{ch: make(chan limiter.StateChange, 16)}
		l := newLimiter(t, c, limiter.WithPrefix(prefix), limiter.WithWindow(w), limiter.WithBucket(b),
			limiter.WithObserver(window.StateObserver(rec.hook)))
		defer l.Close(ctx)
		fleet = append(fleet, member{l, rec})
	}
	srv.Stop()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, m := range fleet {
		wg.Add(1)
		go func(l limiter.Limiter) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := l.Inc(ctx, "f", rate, 1)
				if err == nil && d.Allowed {
					mu.Lock()
					times = append(times, time.Now())
					mu.Unlock()
				}
				time.Sleep(2 * time.Millisecond)
			}
		}(m.l)
	}
	time.Sleep(600 * time.Millisecond)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for _, m := range fleet {
		backs = append(backs, m.rec.wait(t, false, 3*time.Second))
	}
	time.Sleep(2*w + 2*b)
	close(stop)
	wg.Wait()
	recovered := slices.MaxFunc(backs, func(a, b time.Time) int { return a.Compare(b) })
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	// A unit is stamped when its call returned, after Redis recorded it;
	// the span checked is W − B so that this jitter cannot fake an excess.
	span := w - b
	maxAll, maxAfter := 0, 0
	for i, t0 := range times {
		j := i
		for j < len(times) && times[j].Sub(t0) < span {
			j++
		}
		maxAll = max(maxAll, j-i)
		if t0.After(recovered) {
			maxAfter = max(maxAfter, j-i)
		}
	}
	t.Logf("%d admitted in all; most in one window %d (bound 3C = %d); after recovery %d (bound C = %d)",
		len(times), maxAll, 3*capacity, maxAfter, capacity)
	if maxAll > 3*capacity {
		t.Errorf("a window spanning the outage admitted %d, want ≤ 3C = %d", maxAll, 3*capacity)
	}
	if maxAfter > capacity {
		t.Errorf("a window after recovery admitted %d, want ≤ C = %d", maxAfter, capacity)
	}
	if len(times) < 3*capacity {
		t.Errorf("only %d admitted: the fallbacks or Redis admitted too little", len(times))
	}
}

// runWriteBackOverFull: Redis already holds C units of a key (another
// instance admitted them) when the fallback admits C more during an
// outage. The write-back records all C as admitted whatever Redis holds,
// for both strategies (the suppressed one above H) and, with set, in every
// limit of a two-limit set; the leaving event counts the key reconciled.
func runWriteBackOverFull(t *testing.T, newLimiter NewLimiter, set bool) {
	ctx := context.Background()
	mr, c := redistest.Mini(t)
	rec := &recorder{ch: make(chan limiter.StateChange, 16)}
	l := newLimiter(t, c, limiter.WithPrefix(redistest.Prefix(t)), limiter.WithProbeInterval(5*time.Millisecond),
		limiter.WithObserver(window.StateObserver(rec.hook)))
	defer l.Close(ctx)
	const capacity = 10
	rate := limiter.PerMinute(capacity)
	inc := func(k string) (limiter.Decision, error) { return l.Inc(ctx, k, rate, 1) }
	get := func(k string) ([]limiter.Usage, error) {
		u, err := l.Get(ctx, k)
		return []limiter.Usage{u}, err
	}
	if set {
		sl, ok := l.(limiter.SetLimiter)
		if !ok {
			t.Skip("the provider decides no sets")
		}
		s, err := limiter.NewSet(limiter.Limit{Name: "minute", Rate: rate, Window: time.Minute},
			limiter.Limit{Name: "hour", Rate: limiter.PerHour(12 * capacity), Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		inc = func(k string) (limiter.Decision, error) {
			d, err := sl.IncSet(ctx, k, s, 1)
			return d.Decision, err
		}
		get = func(k string) ([]limiter.Usage, error) { return sl.GetSet(ctx, k, s) }
	}
	for i := 0; i < capacity; i++ {
		if d, err := inc("k"); err != nil || d.Degraded || !d.Allowed {
			t.Fatalf("Inc %d on healthy Redis = %+v, %v; want admitted by Redis", i, d, err)
		}
	}
	mr.SetError(loading)
	admitted := 0
	for i := 0; i < 2*capacity; i++ {
		d, err := inc("k")
		if err != nil || !d.Degraded {
			t.Fatalf("Inc %d during the outage = %+v, %v; want degraded", i, d, err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != capacity {
		t.Fatalf("the fallback admitted %d, want C = %d", admitted, capacity)
	}
	mr.SetError("")
	rec.wait(t, false, 3*time.Second)
	rec.mu.Lock()
	last := rec.events[len(rec.events)-1].sc
	rec.mu.Unlock()
	if last.Reconciled != 1 || last.Unreconciled != 0 || last.UnreconciledUnits != 0 {
		t.Errorf("leaving event = %+v, want 1 key reconciled, none lost", last)
	}
	us, err := get("k")
	if err != nil {
		t.Fatalf("Get(k) after recovery: %v", err)
	}
	for i, u := range us {
		if u.Used != 2*capacity { // Used: admitted (accepted, for suppressed)
			t.Errorf("limit %d after recovery: %+v; want Used 2C = %d (Redis's C and the fallback's C)", i, u, 2*capacity)
		}
	}
	if d, err := inc("k"); err != nil || d.Degraded || d.Allowed {
		t.Errorf("Inc after recovery = %+v, %v; want refused by Redis", d, err)
	}
}

// runUnreconciled: an outage whose fallback admits units for one key more
// than redisprov.MaxPending remembers; the leaving event counts the
// remembered keys reconciled and the last one unreconciled, with its units.
func runUnreconciled(t *testing.T, newLimiter NewLimiter) {
	ctx := context.Background()
	srv, l, rec := onRecordedServer(t, newLimiter, window.WithLogger(nil))
	defer l.Close(ctx)
	rate := limiter.PerMinute(10)
	srv.Stop()
	inc := func(k string) {
		d, err := l.Inc(ctx, k, rate, 1)
		// Until the confirming probe has failed, a call that timed out
		// (the client's dial retries outlast the timeout) is shed: it
		// admits and records nothing, so it is asked again.
		for deadline := time.Now().Add(5 * time.Second); err == nil && d.Shed && !d.Allowed && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
			d, err = l.Inc(ctx, k, rate, 1)
		}
		if err != nil || !d.Degraded || !d.Allowed {
			t.Fatalf("Inc(%s) during the outage = %+v, %v; want admitted by the fallback", k, d, err)
		}
	}
	for i := 0; i < redisprov.MaxPending; i++ {
		inc(fmt.Sprintf("u:%d", i))
	}
	inc("last")
	inc("last")
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, false, 10*time.Second)
	rec.mu.Lock()
	last := rec.events[len(rec.events)-1].sc
	rec.mu.Unlock()
	if last.Reconciled != redisprov.MaxPending || last.Unreconciled != 1 || last.UnreconciledUnits != 2 {
		t.Errorf("leaving event = %+v; want %d reconciled, 1 unreconciled with 2 units", last, redisprov.MaxPending)
	}
	if u, err := l.Get(ctx, "u:0"); err != nil || u.Used != 1 {
		t.Errorf("Get(u:0) = %+v, %v; want the unit written back", u, err)
	}
}

// RunGrace: in the grace after an outage (WithFallbackInstances(n), n > 1)
// an instance charges every admission to its fallback's share, so an
// instance whose fallback admitted its whole share during the outage
// admits nothing more in that window, whatever Redis would grant: not
// from Redis, not from a lease (a hybrid's lease taken in the grace once
// answered from memory past the share). share is the most the fallback
// admits of a key at 30 per minute and opts with WithFallbackInstances(3):
// 10 for the absolute strategy, its hard share for the suppressed one
// (opts set the hard-limit factor). Runs on miniredis (LOADING as the
// outage).
func RunGrace(t *testing.T, newLimiter NewLimiter, share int, opts ...limiter.Option) {
	ctx := context.Background()
	mr, c := redistest.Mini(t)
	rec := &recorder{ch: make(chan limiter.StateChange, 16)}
	l := newLimiter(t, c, append([]limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithFallbackInstances(3),
		limiter.WithProbeInterval(5 * time.Millisecond), limiter.WithObserver(window.StateObserver(rec.hook))}, opts...)...)
	defer l.Close(ctx)
	rate := limiter.PerMinute(30) // C (or S) = 30: a share of 10 (hard: share)
	for i := 0; i < 3; i++ {
		if d, err := l.Inc(ctx, "warm", rate, 1); err != nil || !d.Allowed || d.Degraded {
			t.Fatalf("Inc(warm) on healthy Redis = %+v, %v; want admitted by Redis", d, err)
		}
	}
	// incs makes calls Inc(g, 1) and returns how many were admitted; with
	// degraded, each admission must be the fallback's.
	incs := func(phase string, calls int, degraded bool) int {
		admitted := 0
		for i := 0; i < calls; i++ {
			d, err := l.Inc(ctx, "g", rate, 1)
			if err != nil {
				t.Fatalf("Inc(g) %d %s: %v", i, phase, err)
			}
			if d.Allowed && degraded && !d.Degraded {
				t.Fatalf("Inc(g) %d %s = %+v: admitted, not degraded", i, phase, d)
			}
			if d.Allowed {
				admitted++
			}
		}
		return admitted
	}
	mr.SetError(loading)
	inOutage := incs("during the outage", 60, true)
	if inOutage < 10 || inOutage > share {
		t.Fatalf("the fallback admitted %d of 60 calls, want 10 to %d", inOutage, share)
	}
	mr.SetError("")
	rec.wait(t, false, 3*time.Second)
	inGrace := incs("in the grace", 40, false)
	if inOutage+inGrace > share {
		t.Errorf("admitted %d during the outage and %d of 40 calls in the grace, want at most the share %d in all",
			inOutage, inGrace, share)
	}
}
