package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/window"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/check"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// The write-back matrix: a fleet of Fleet instances × FleetWorkers
// goroutines on FleetKeys keys, with WithFallbackInstances(Fleet) and
// otherwise default options, through each outage of writeBackCells.
const (
	Fleet        = 3
	FleetWorkers = 8
	FleetKeys    = 3
	// FleetSlack is the share above C that a span may hold: the calls in
	// flight when the breaker closes, decided by Redis before the last
	// write-back pass, and the jitter of the callers' stamps.
	FleetSlack = 0.05
	fleetPace  = 10 * time.Millisecond
)

// stopped is SIGSTOP for 2 s: the server takes connections into its
// backlog and answers nothing, then resumes and runs what it queued.
var stopped = Cell{"SIGSTOP2s", true, func(t *testing.T, e *Env) func() time.Time {
	if err := e.Server.Pause(); err != nil {
		t.Fatalf("SIGSTOP: %v", err)
	}
	return func() time.Time {
		time.Sleep(2 * time.Second)
		if err := e.Server.Resume(); err != nil {
			t.Fatalf("SIGCONT: %v", err)
		}
		return time.Now()
	}
}}

// writeBackCells are the outages of the write-back matrix.
func writeBackCells() []Cell {
	cells := []Cell{stopped}
	for _, c := range Cells {
		switch c.Name {
		case "DebugSleep2", "ClientPause3000", "Blackholed3s", "KilledAndRestarted":
			cells = append(cells, c)
		}
	}
	return cells
}

// fleetLimit is one limit the matrix checks: its window and capacity, and
// how to read a key's usage of it from Redis.
type fleetLimit struct {
	name string
	w, b time.Duration
	c    int64
}

// fleetCalls is what the fleet calls: Inc on one rate, or IncSet on a set
// of two limits.
type fleetCalls struct {
	opts   []limiter.Option // the window of Inc's limit
	limits []fleetLimit
	inc    func(ctx context.Context, l limiter.Limiter, k string) (limiter.Decision, error)
	usage  func(ctx context.Context, l limiter.Limiter, k string) ([]limiter.Usage, error)
}

func singleCalls() fleetCalls {
	const w = time.Second
	rate := limiter.PerSecond(200) // C = 200, 66 per instance in the fallback
	return fleetCalls{
		// A one-second window (the default is a minute) keeps the cell
		// short: the check runs until the written-back units expire.
		opts:   []limiter.Option{limiter.WithWindow(w)},
		limits: []fleetLimit{{"", w, w / 100, 200}},
		inc: func(ctx context.Context, l limiter.Limiter, k string) (limiter.Decision, error) {
			return l.Inc(ctx, k, rate, 1)
		},
		usage: func(ctx context.Context, l limiter.Limiter, k string) ([]limiter.Usage, error) {
			u, err := l.Get(ctx, k)
			return []limiter.Usage{u}, err
		},
	}
}

func setCalls(t *testing.T) fleetCalls {
	short := limiter.Limit{Name: "short", Rate: limiter.PerSecond(200), Window: 500 * time.Millisecond} // C = 100
	long := limiter.Limit{Name: "long", Rate: limiter.PerSecond(150), Window: time.Second}              // C = 150
	set, err := limiter.NewSet(short, long)
	if err != nil {
		t.Fatal(err)
	}
	return fleetCalls{
		limits: []fleetLimit{{"short", short.Window, short.Window / 100, 100}, {"long", long.Window, long.Window / 100, 150}},
		inc: func(ctx context.Context, l limiter.Limiter, k string) (limiter.Decision, error) {
			d, err := l.(limiter.SetLimiter).IncSet(ctx, k, set, 1)
			return d.Decision, err
		},
		usage: func(ctx context.Context, l limiter.Limiter, k string) ([]limiter.Usage, error) {
			return l.(limiter.SetLimiter).GetSet(ctx, k, set)
		},
	}
}

// RunWriteBack runs the write-back matrix as subtests, one at a time (each
// on its own redis-server; in parallel, the load of a shared two-core
// machine under the race detector delays calls past the timeout): Inc on one limit, and, when the provider
// decides sets, IncSet on a set of two. Each cell checks, per key and
// limit: in every span of W − B that starts after the last admission of a
// call begun before the fault, at most C × (1 + FleetSlack) admitted
// (check.MostInAnyWindow over the callers' stamps; W − B so that a stamp's
// lag behind Redis's instant cannot fake an excess); Get right after the
// fleet is back on Redis shows at least the fallbacks' admissions still
// inside the window; each instance's leaving events count every key it
// admitted for reconciled and none unreconciled. The calling package's
// TestMain must run redistest.Main.
func RunWriteBack(t *testing.T, newLimiter NewLimiter) {
	shapes := []struct {
		name  string
		calls func(t *testing.T) fleetCalls
	}{{"Inc", func(*testing.T) fleetCalls { return singleCalls() }}, {"IncSet", setCalls}}
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) { runWriteBackCells(t, newLimiter, sh.calls, nil) })
	}
}

// admission is one admitted call as a worker saw it.
type admission struct {
	inst, key  int
	start, end time.Time
	degraded   bool
}

func runWriteBackCell(t *testing.T, c Cell, newLimiter NewLimiter, calls fleetCalls) {
	ctx := context.Background()
	srv := redistest.StartServer(t)
	e := &Env{Server: srv, Proxy: NewProxy(t, srv.Addr), Admin: Admin(t, srv)}
	prefix := redistest.Prefix(t)
	type member struct {
		l   limiter.Limiter
		rec *recorder
	}
	var fleet []member
	for i := 0; i < Fleet; i++ {
		opt := srv.Options()
		opt.Addr = e.Proxy.Addr()
		opt.ContextTimeoutEnabled = true // let the per-call deadline reach the socket
		client := redis.NewClient(opt)
		defer client.Close()
		rec := &recorder{ch: make(chan limiter.StateChange, 64)}
		opts := append([]limiter.Option{limiter.WithPrefix(prefix), limiter.WithFallbackInstances(Fleet),
			limiter.WithObserver(window.StateObserver(rec.hook)), window.WithLogger(nil)}, calls.opts...)
		l := newLimiter(t, client, opts...)
		if _, ok := l.(limiter.SetLimiter); !ok && len(calls.limits) > 1 {
			t.Skip("the provider decides no sets")
		}
		defer l.Close(ctx)
		fleet = append(fleet, member{l, rec})
	}
	keys := make([]string, FleetKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("wb:%d", i)
	}

	var (
		mu   sync.Mutex
		adms []admission
		stop atomic.Bool
		wg   sync.WaitGroup
		errs atomic.Int64
	)
	for i, m := range fleet {
		for g := 0; g < FleetWorkers; g++ {
			wg.Add(1)
			go func(inst int, l limiter.Limiter, seed uint64) {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed, 2))
				for !stop.Load() {
					k := r.IntN(FleetKeys)
					start := time.Now()
					d, err := calls.inc(ctx, l, keys[k])
					end := time.Now()
					if err != nil {
						errs.Add(1)
					} else if d.Allowed {
						mu.Lock()
						adms = append(adms, admission{inst, k, start, end, d.Degraded})
						mu.Unlock()
					}
					time.Sleep(fleetPace)
				}
			}(i, m.l, uint64(i*FleetWorkers+g))
		}
	}
	stopLoad := func() {
		if !stop.Swap(true) {
			wg.Wait()
		}
	}
	defer stopLoad()

	time.Sleep(600 * time.Millisecond) // the keys fill from Redis
	injected := time.Now()
	fixed := c.Inject(t, e)()
	var backs []time.Duration
	backAt := make([]time.Time, Fleet)
	// One deadline for the whole fleet: an instance whose breaker never
	// opened is known only when the deadline passes, and waiting for each
	// in turn cost 5 s per such instance (KilledAndRestarted, whose calls
	// are often bridged by shed refusals, took 12 s).
	for i, m := range fleet {
		backAt[i] = m.rec.backAfter(t, fixed, fixed.Add(5*time.Second), fixed.Add(Recovery))
		backs = append(backs, backAt[i].Sub(fixed).Round(time.Millisecond))
	}

	// Get at once: what Redis holds for each key and limit, against what
	// the fallbacks admitted that is still inside the window.
	us := make([][]limiter.Usage, FleetKeys)
	for k := range keys {
		u, err := calls.usage(ctx, fleet[0].l, keys[k])
		for i := 0; err != nil && i < 50; i++ {
			// A restarted server's dead connections, or a call slowed
			// past the timeout on the loaded machine, may open the
			// breaker once more: Get is then an error.
			time.Sleep(20 * time.Millisecond)
			u, err = calls.usage(ctx, fleet[0].l, keys[k])
		}
		if err != nil {
			t.Fatalf("Get(%s) after recovery: %v", keys[k], err)
		}
		us[k] = u
	}
	got := time.Now()
	longest := time.Duration(0)
	for _, l := range calls.limits {
		longest = max(longest, l.w+l.b)
	}
	time.Sleep(longest + 300*time.Millisecond) // Redis admits again once the written-back units expire
	stopLoad()

	if n := errs.Load(); n != 0 {
		t.Errorf("%d calls returned an error, want none under FallbackLocal", n)
	}
	mu.Lock()
	defer mu.Unlock()
	// The pre-fault admissions: those begun before the fault's first
	// fallback admission began (the fault takes hold a little after
	// Inject returns). Spans start after the last of them. A fallback
	// admission before the fault (a call that timed out on the loaded
	// machine opened a breaker) is pre-fault too: the fallback then
	// starts empty beside what Redis holds, which no write-back can
	// undo.
	first := time.Now()
	var degraded [FleetKeys]int
	var fellBack [Fleet]bool // the instances whose fallbacks admitted in the fault
	early := 0
	for _, a := range adms {
		switch {
		case !a.degraded:
		case a.start.Before(injected):
			early++
		default:
			degraded[a.key]++
			fellBack[a.inst] = true
			if a.start.Before(first) {
				first = a.start
			}
		}
	}
	if early > 0 {
		t.Logf("%d fallback admissions before the fault: a breaker opened on a slow call", early)
	}
	var pre time.Time
	for _, a := range adms {
		if (!a.degraded || a.start.Before(injected)) && a.start.Before(first) && a.end.After(pre) {
			pre = a.end
		}
	}
	t.Logf("%d admitted, fault at +600ms, Redis back %v after the fault, the instances back %v after that; fallbacks admitted %v",
		len(adms), fixed.Sub(injected).Round(time.Millisecond), backs, degraded)
	// An instance whose breaker never opened (its calls during the fault
	// were shed) stays on Redis while the others' fallbacks admit their
	// shares beside it; after a restart that forgot the window, Redis then
	// admits up to C beside the fallbacks' units until they are written
	// back. That is the documented limit of the write-back (an instance
	// degraded while others answer from Redis: its fallback admits its
	// share C/n beside Redis until it is back), so a span may then hold C
	// plus the share of each instance that answered from its fallback.
	onRedis, shares := 0, int64(0)
	for _, m := range fleet {
		m.rec.mu.Lock()
		if len(m.rec.events) == 0 {
			onRedis++
		}
		m.rec.mu.Unlock()
	}
	if onRedis > 0 {
		for _, fb := range fellBack {
			if fb {
				shares++
			}
		}
	}
	if shares > 0 {
		t.Logf("%d instance(s) stayed on Redis while %d answered from a fallback: spans may hold C × %.2f + %d shares of C/%d",
			onRedis, shares, 1+FleetSlack, shares, Fleet)
	}
	for k := range keys {
		var after []check.Admission
		for _, a := range adms {
			if a.key == k && a.end.After(pre) {
				after = append(after, check.Admission{At: a.end, Units: 1})
			}
		}
		for i, l := range calls.limits {
			bound := int64(float64(l.c)*(1+FleetSlack)) + shares*((l.c+Fleet-1)/Fleet)
			most, at := check.MostInAnyWindow(after, l.w-l.b)
			if most > bound {
				t.Errorf("key %s, limit %q: %d admitted in the span of %v from %v after the fault, want ≤ C × %.2f + %d shares of C/%d = %d",
					keys[k], l.name, most, l.w-l.b, at.Sub(injected).Round(time.Millisecond), 1+FleetSlack, shares, Fleet, bound)
				logSpan(t, adms, k, pre, at, l.w-l.b, injected)
			}
			// The fallbacks' admissions before each instance's recovery
			// still inside the window when Get ran must all be in Redis
			// (a breaker opened again after it, by a slow call, admits
			// more that the next recovery writes back).
			inside := int64(0)
			for _, a := range adms {
				if a.key == k && a.degraded && !a.start.Before(injected) && a.end.Before(backAt[a.inst]) && got.Sub(a.end) < l.w {
					inside++
				}
			}
			u := us[k][i]
			if u.Used < inside { // Used: admitted (accepted, for suppressed)
				t.Errorf("key %s, limit %q: Get after recovery = %+v; want Used ≥ the fallbacks' %d admissions still inside the window",
					keys[k], l.name, u, inside)
			}
		}
	}
	for i, m := range fleet {
		m.rec.mu.Lock()
		var done, lost int
		var lostUnits int64
		var leaving int
		events := len(m.rec.events)
		for _, ev := range m.rec.events {
			if !ev.sc.Degraded {
				leaving++
				done, lost, lostUnits = done+ev.sc.Reconciled, lost+ev.sc.Unreconciled, lostUnits+ev.sc.UnreconciledUnits
			}
		}
		if t.Failed() || testing.Verbose() {
			for _, ev := range m.rec.events {
				t.Logf("instance %d: %v after Redis was back: degraded %v, reconciled %d, unreconciled %d (%d units)",
					i, ev.at.Sub(fixed).Round(time.Millisecond), ev.sc.Degraded, ev.sc.Reconciled, ev.sc.Unreconciled, ev.sc.UnreconciledUnits)
			}
		}
		m.rec.mu.Unlock()
		// Every key took fallback admissions on every instance (the
		// load saturates them all), and the last of them is within W + B
		// of recovery: each is written back once per outage.
		if events == 0 {
			t.Logf("instance %d: its breaker never opened (the fault was bridged by shed calls)", i)
			continue
		}
		if lost != 0 || lostUnits != 0 || done < FleetKeys || leaving == 1 && done != FleetKeys {
			t.Errorf("instance %d: %d leaving events, %d keys reconciled, %d unreconciled (%d units); want each of the %d keys reconciled",
				i, leaving, done, lost, lostUnits, FleetKeys)
		}
	}
}

// backAfter waits until the limiter's latest state change is a recovery
// after t, and returns when it came; it fails tb if none came by deadline.
// A limiter with no state change at all by quiet is one whose breaker
// never opened: backAfter returns t. quiet is Recovery after Redis
// answered again: the calls begun during the fault have timed out by
// then (250 ms, or 500 ms with the race detector's slack) and any probe
// since has found Redis up, so the breaker no longer opens for this
// fault.
func (r *recorder) backAfter(tb testing.TB, t, deadline, quiet time.Time) time.Time {
	tb.Helper()
	for {
		r.mu.Lock()
		var last *event
		if n := len(r.events); n > 0 {
			last = &r.events[n-1]
		}
		r.mu.Unlock()
		if last != nil && !last.sc.Degraded && last.at.After(t) {
			return last.at
		}
		if last == nil && time.Now().After(quiet) {
			// The breaker never opened: a short fault (a kill and a quick
			// restart) whose calls timed out behind the client's dial
			// retries was bridged by shed refusals, which admit nothing,
			// before a probe could confirm it. Nothing to write back.
			return t
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not back on Redis within %v of the fault's end", deadline.Sub(t))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// logSpan logs what the span of length w from at holds of key k, per
// instance: the admissions of its fallback and those from Redis, each with
// the first and last of them after the fault, so that a span over its
// bound tells which instances filled it and when.
func logSpan(t *testing.T, adms []admission, k int, pre, at time.Time, w time.Duration, injected time.Time) {
	t.Helper()
	type side struct {
		n           int
		first, last time.Duration
	}
	var fb, rd [Fleet]side
	for _, a := range adms {
		if a.key != k || !a.end.After(pre) || a.end.Before(at) || a.end.Sub(at) >= w {
			continue
		}
		s := &rd[a.inst]
		if a.degraded {
			s = &fb[a.inst]
		}
		d := a.end.Sub(injected).Round(time.Millisecond)
		if s.n == 0 {
			s.first = d
		}
		s.n, s.last = s.n+1, d
	}
	for i := range fb {
		t.Logf("instance %d in that span: %d from its fallback (%v to %v after the fault), %d from Redis (%v to %v)",
			i, fb[i].n, fb[i].first, fb[i].last, rd[i].n, rd[i].first, rd[i].last)
	}
}
