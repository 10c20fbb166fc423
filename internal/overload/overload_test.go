package overload_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	win "github.com/sluice-go/sluice/internal/window"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/check"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// newFn builds a provider on a client.
type newFn func(c *redis.Client, opts ...limiter.Option) (limiter.Limiter, error)

var providers = []struct {
	name string
	new  newFn
}{
	{"HybridAbsolute", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) {
		return hybrid.NewAbsolute(c, o...)
	}},
	{"HybridSuppressed", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) {
		return hybrid.NewSuppressed(c, o...)
	}},
	{"Redisabs", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) { return redisabs.New(c, o...) }},
	{"Redissup", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) { return redissup.New(c, o...) }},
}

// The load of every test: C = 2,000 per window of 1 s (the hard capacity
// is C too: the default hard-limit factor is 1).
const (
	window   = time.Second
	capacity = 2000
)

var rate = limiter.PerSecond(capacity)

// The set of the set cells: the load's limit and a half window of
// 1,500, so that both bind under a hot key.
const (
	halfWindow   = window / 2
	halfCapacity = 1500
)

var loadSet = func() *limiter.Set {
	s, err := limiter.NewSet(limiter.Limit{Name: "window", Rate: rate, Window: window},
		limiter.Limit{Name: "half", Rate: limiter.PerSecond(2 * halfCapacity), Window: halfWindow})
	if err != nil {
		panic(err)
	}
	return s
}()

// The documented defaults of WithTimeout and WithProbeInterval.
const (
	defaultTimeout = 250 * time.Millisecond
	defaultProbe   = 200 * time.Millisecond
)

// fleet is some instances of one provider sharing a prefix, each on its
// own client, with a state-change hook that records the breaker's moves.
type fleet struct {
	ls      []limiter.Limiter
	clients []*redis.Client
	set     *limiter.Set // IncSet on it instead of Inc, when not nil

	mu     sync.Mutex
	opened []time.Time // when the breaker of some instance opened
	causes []error     // why
	closed []time.Time // when one closed
}

func newFleet(t *testing.T, newL newFn, n int, client func() *redis.Client, opts ...limiter.Option) *fleet {
	t.Helper()
	f := &fleet{}
	all := append([]limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithWindow(window),
		limiter.WithObserver(win.StateObserver(f.hook))}, opts...)
	for range n {
		c := client()
		f.clients = append(f.clients, c)
		l, err := newL(c, all...)
		if err != nil {
			t.Fatalf("new: %v", err)
		}
		f.ls = append(f.ls, l)
	}
	return f
}

func (f *fleet) hook(sc limiter.StateChange) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sc.Degraded {
		f.opened = append(f.opened, time.Now())
		f.causes = append(f.causes, sc.Cause)
	} else {
		f.closed = append(f.closed, time.Now())
	}
}

func (f *fleet) close(t *testing.T) {
	t.Helper()
	for _, l := range f.ls {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := l.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		cancel()
	}
	for _, c := range f.clients {
		c.Close()
	}
}

// stats is what a load saw.
type stats struct {
	calls, degraded, shed, errs int64
	firstErr                    error
	maxLat                      time.Duration // slowest call
	maxAt                       time.Time     // when it started
	maxWhat                     string        // what it returned
	maxAdmLat                   time.Duration // slowest admitted call
	adm                         map[int][]check.Admission
}

func (s *stats) merge(o *stats) {
	s.calls += o.calls
	s.degraded += o.degraded
	s.shed += o.shed
	s.errs += o.errs
	if s.firstErr == nil {
		s.firstErr = o.firstErr
	}
	if o.maxLat > s.maxLat {
		s.maxLat, s.maxAt, s.maxWhat = o.maxLat, o.maxAt, o.maxWhat
	}
	s.maxAdmLat = max(s.maxAdmLat, o.maxAdmLat)
	for k, a := range o.adm {
		s.adm[k] = append(s.adm[k], a...)
	}
}

// spin burns the CPU for d: a handler's work between two calls.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// drive runs goroutines per instance of f, each calling Inc of one unit
// (IncSet on f.set, if any) on a key drawn from keys, with work of CPU
// between calls (a negative work sleeps -work instead), until end.
func drive(f *fleet, goroutines, keys int, work time.Duration, end time.Time) *stats {
	total := &stats{adm: make(map[int][]check.Admission)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	names := make([]string, keys)
	for i := range names {
		names[i] = "k" + strconv.Itoa(i)
	}
	for i, l := range f.ls {
		for g := range goroutines {
			wg.Add(1)
			go func(seed uint64) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, 7))
				s := &stats{adm: make(map[int][]check.Admission)}
				ctx := context.Background()
				for {
					lo := time.Now()
					if !lo.Before(end) {
						break
					}
					k := rng.IntN(keys)
					d, err := f.inc(ctx, l, names[k])
					lat := time.Since(lo)
					s.calls++
					if lat > s.maxLat {
						s.maxLat, s.maxAt, s.maxWhat = lat, lo, fmt.Sprintf("%+v, %v", d, err)
					}
					switch {
					case err != nil:
						s.errs++
						if s.firstErr == nil {
							s.firstErr = err
						}
					case d.Degraded:
						s.degraded++
					case d.Shed:
						s.shed++
					case d.Allowed:
						units := int64(1)
						if lat > quick {
							units = 0 // not counted: see mostInWindow
						}
						s.adm[k] = append(s.adm[k], check.Admission{At: lo, Units: units})
						s.maxAdmLat = max(s.maxAdmLat, lat)
					}
					if work > 0 {
						spin(work)
					} else if work < 0 {
						time.Sleep(-work)
					}
				}
				mu.Lock()
				total.merge(s)
				mu.Unlock()
			}(uint64(i*1000 + g))
		}
	}
	wg.Wait()
	return total
}

// inc is one call of a load on f: Inc of one unit, or IncSet on f.set.
func (f *fleet) inc(ctx context.Context, l limiter.Limiter, k string) (limiter.Decision, error) {
	if f.set == nil {
		return l.Inc(ctx, k, rate, 1)
	}
	d, err := l.(limiter.SetLimiter).IncSet(ctx, k, f.set, 1)
	return d.Decision, err
}

// quick is the longest an admitted call may take to be counted by
// mostInWindow.
const quick = window / 10

// mostInWindow is the most units admitted in any span of w, per
// check.MostInAnyWindow over the instants the calls started. A call
// admits at some instant between its start and its return, so only the
// calls that returned within quick are counted (slow is how many were
// not), and the spans are shorter than the window by quick and a
// millisecond (the providers' clock unit): every admission counted in one
// of them certainly fell within one window.
func (s *stats) mostInWindow(w time.Duration) (most int64, key int, span time.Duration, slow int) {
	span = w - quick - time.Millisecond
	for k, adm := range s.adm {
		fast := adm[:0:0]
		for _, a := range adm {
			if a.Units > 0 {
				fast = append(fast, a)
			} else {
				slow++
			}
		}
		if m, _ := check.MostInAnyWindow(fast, span); m > most {
			most, key = m, k
		}
	}
	return most, key, span, slow
}

// cell is one cell of the contention matrix.
type cell struct {
	prov                  int // index in providers
	instances, goroutines int
	keys                  int
	work                  time.Duration
	set                   bool // IncSet on loadSet
}

func (c cell) String() string {
	w := "idle"
	if c.work > 0 {
		w = "work" + c.work.String()
	}
	p := providers[c.prov].name
	if c.set {
		p += "Sets"
	}
	return fmt.Sprintf("%s/%dx%d/%dkeys/%s", p, c.instances, c.goroutines, c.keys, w)
}

// matrix is the contention matrix: instances {1, 3} × goroutines {4, 16,
// 64} × {no work, 20 µs of CPU work between calls} × every provider × {one
// hot key, 1,000 keys}, and 3 redisabs instances × 128 goroutines on one
// key. Unless full, a reduced matrix of 25 cells covers each provider and
// key set at (1 × 4, idle), (3 × 16, work) and (3 × 64, idle), the corners
// that opened the breaker before the evidence rule. Then the hybrids'
// IncSet on loadSet: at those three corners for each key set when full,
// else at (3 × 64, idle) on one hot key and (3 × 16, work) on 1,000 keys
// (their set calls are the Redis providers' own: a few cells show that
// the hybrid's guard holds them as it holds those).
func matrix(full bool) []cell {
	var cs []cell
	for p := range providers {
		for _, keys := range []int{1, 1000} {
			if !full {
				cs = append(cs,
					cell{p, 1, 4, keys, 0, false},
					cell{p, 3, 16, keys, 20 * time.Microsecond, false},
					cell{p, 3, 64, keys, 0, false})
				continue
			}
			for _, inst := range []int{1, 3} {
				for _, g := range []int{4, 16, 64} {
					for _, w := range []time.Duration{0, 20 * time.Microsecond} {
						cs = append(cs, cell{p, inst, g, keys, w, false})
					}
				}
			}
		}
	}
	cs = append(cs, cell{2, 3, 128, 1, 0, false})
	for p, pr := range providers {
		if !strings.HasPrefix(pr.name, "Hybrid") {
			continue
		}
		if !full {
			cs = append(cs, cell{p, 3, 64, 1, 0, true}, cell{p, 3, 16, 1000, 20 * time.Microsecond, true})
			continue
		}
		for _, keys := range []int{1, 1000} {
			cs = append(cs,
				cell{p, 1, 4, keys, 0, true},
				cell{p, 3, 16, keys, 20 * time.Microsecond, true},
				cell{p, 3, 64, keys, 0, true})
		}
	}
	return cs
}

// MatrixEnv set to "full" runs the whole contention matrix (109 cells of
// cellTime, about 4 minutes) instead of the reduced one (29 cells).
const MatrixEnv = "SLUICE_MATRIX"

const cellTime = 2 * time.Second

// reducedCellTime is a cell's run in the reduced matrix that make test
// runs: 1.5 s, a whole window and half of the next, so the spans of W
// checked against C still cross a window's end. The cells saturate both
// cores; at 2 s the 25 cells were 56 s of make test.
const reducedCellTime = 1500 * time.Millisecond

// starvedRuns is how many times a cell runs while the process stalls
// for the whole timeout during it.
const starvedRuns = 3

// maxShedFull is the largest share of shed decisions a cell may have in
// the full matrix (SLUICE_MATRIX=full, the figures in docs/operations.md).
// maxShedReduced is the bound of the reduced matrix that make test runs,
// alone, once the other packages are done (Makefile, ALONE): there the
// hot-key cells of the hybrids measured up to 0.08 % (a caller's budget
// ends waiting for a CPU), and the bound is five times the target for
// slower machines and cells of 1.5 s. Run beside the providers' suites the
// cells get a fraction of the CPU and shed more (2 % at 3 × 128 on a CI
// machine), which says nothing about the code: go test ./... is not the
// run that certifies this bound. Neither bound excuses a breaker opening
// or a degraded decision, which no cell may have.
const (
	maxShedFull    = 0.001
	maxShedReduced = 0.005
)

// TestContentionMatrix: with default options on a healthy real Redis, a
// busy client is not an outage. In every cell (see matrix) the breaker
// never opens, no decision is degraded, at most 0.1 % of the decisions are
// shed, no call fails, and no span of the window holds more than C
// admitted units of any key (docs/operations.md, When Redis fails).
func TestContentionMatrix(t *testing.T) {
	srv := redistest.Real(t)
	full := os.Getenv(MatrixEnv) == "full"
	maxShed, cellRun := maxShedReduced, reducedCellTime
	if full {
		maxShed, cellRun = maxShedFull, cellTime
	}
	for _, c := range matrix(full) {
		t.Run(c.String(), func(t *testing.T) {
			// A cell during which this process itself stalled for a whole
			// timeout (a machine loaded far beyond its CPUs) proves
			// nothing about the rule: no reply can be read then, from
			// the probe or any call. It runs again, up to starvedRuns
			// times, and is skipped, saying so, if every run starved. A
			// cell over the shed bound runs again too, up to starvedRuns
			// times, and its last run is judged.
			var f *fleet
			var s *stats
			var stall time.Duration
			for run := 1; ; run++ {
				f = newFleet(t, providers[c.prov].new, c.instances, func() *redis.Client { return readmeClient(t, srv.Addr) })
				if c.set {
					f.set = loadSet
				}
				meter := redistest.NewStallMeter()
				s = drive(f, c.goroutines, c.keys, c.work, time.Now().Add(cellRun))
				stall = meter.End()
				f.close(t)
				shedExcess := float64(s.shed) > maxShed*float64(s.calls-s.errs)
				if stall < defaultTimeout && (!shedExcess || run == starvedRuns || s.degraded > 0 || len(f.opened) > 0 || s.errs > 0) {
					break
				}
				if stall < defaultTimeout {
					// Shedding is a property of the machine as much as of
					// the code: a cell over the shed bound runs again (a
					// bound broken by the code breaks it every time), and
					// the last run is judged. Safety failures are judged
					// at once.
					t.Logf("run %d: %d of %d decisions shed, more than %.1f %%: again", run, s.shed, s.calls-s.errs, 100*maxShed)
					continue
				}
				if run == starvedRuns {
					t.Skipf("the process stalled for %v (at least the timeout) in each of %d runs", stall, run)
				}
				t.Logf("run %d: the process stalled for %v, at least the timeout: again", run, stall)
			}
			most, key, span, slow := s.mostInWindow(window)
			decisions := s.calls - s.errs
			t.Logf("%d calls, %d shed (%.4f %%), %d degraded, %d errors; slowest call %v, slowest admission %v, longest scheduling stall %v; most admitted in a span of %v: %d (key %d; %d admissions slower than %v not counted)",
				s.calls, s.shed, 100*float64(s.shed)/float64(max(decisions, 1)), s.degraded, s.errs, s.maxLat, s.maxAdmLat, stall, span, most, key, slow, quick)
			if s.errs > 0 {
				t.Errorf("%d calls failed, first: %v", s.errs, s.firstErr)
			}
			if len(f.opened) > 0 {
				t.Errorf("the breaker opened %d times on a healthy Redis, first because %v", len(f.opened), f.causes[0])
			}
			if s.degraded > 0 {
				t.Errorf("%d decisions degraded on a healthy Redis", s.degraded)
			}
			// Shedding is the answer to a caller whose budget ran out
			// locally: a process starved of CPU for a good part of the
			// timeout must shed, and is held to the bound only when it
			// was not (the breaker and the degraded count above hold
			// whatever the machine does).
			if starved := stall > defaultTimeout/4; !starved && float64(s.shed) > maxShed*float64(decisions) {
				t.Errorf("%d of %d decisions shed, more than %.1f %%", s.shed, decisions, 100*maxShed)
			} else if starved {
				t.Logf("the process stalled for %v (more than a quarter of the timeout): shed not held to %.1f %%", stall, 100*maxShed)
			}
			if most > capacity {
				t.Errorf("key %d: %d units admitted within %v, capacity %d", key, most, span, capacity)
			}
			if c.set {
				most, key, span, _ := s.mostInWindow(halfWindow)
				t.Logf("limit half: most admitted in a span of %v: %d (key %d)", span, most, key)
				if most > halfCapacity {
					t.Errorf("key %d: %d units admitted within %v, capacity of limit half %d", key, most, span, halfCapacity)
				}
			}
		})
	}
}

// readmeClientLine is how the quick start of README.md builds its client.
// TestReadmeClient fails when the README says otherwise, so that the
// freeze tests, which build their client with readmeClient, always test
// the client the README recommends.
const readmeClientLine = `client := redis.NewClient(&redis.Options{Addr: "localhost:6379", MaxRetries: -1})`

// readmeClient builds the README's client for addr, closed at t.Cleanup.
func readmeClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestReadmeClient: every client the README builds is readmeClientLine.
func TestReadmeClient(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, "redis.NewClient(") {
			continue
		}
		n++
		if got := strings.TrimSpace(line); got != readmeClientLine {
			t.Errorf("README.md:%d builds its client as\n\t%s\nthe freeze tests build\n\t%s\nchange readmeClient and readmeClientLine with it", i+1, got, readmeClientLine)
		}
	}
	if n == 0 {
		t.Errorf("README.md builds no client: the freeze tests test none")
	}
}

// TestFreeze: each provider, 3 instances × 16 goroutines on one hot key
// with default options and the README's client, while Redis is frozen
// (SIGSTOP) for 3 s: every call returns within 2 × the timeout, the
// breaker opens within 2 × the timeout plus one probe interval of the
// freeze, closes after it, and the goroutines come back to their baseline
// after Close (the calls left in the background end when Redis answers).
func TestFreeze(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			runFreeze(t, p.new, defaultTimeout, nil)
		})
	}
}

// TestFreezeNoTimeout: WithTimeout(0) (the option under test) leaves each
// call to the client's socket timeout: during a 3 s freeze a call still
// waits about one ReadTimeout behind others at most, not one per caller
// ahead of it (hybrid callers queue on a key's token, batched calls on a
// pipeline): every call returns within 2 × ReadTimeout and a second.
func TestFreezeNoTimeout(t *testing.T) {
	const read = 500 * time.Millisecond
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			client := func(t testing.TB, addr string) *redis.Client {
				c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: read})
				t.Cleanup(func() { c.Close() })
				return c
			}
			runFreeze(t, p.new, 0, client)
		})
	}
}

// runFreeze drives 3 instances × 16 goroutines of newL for 1 s, freezes
// the server for 3 s, and drives on for 2 s after. timeout is the
// WithTimeout given (defaultTimeout means the default: none is
// given); client builds the clients (nil: readmeClient).
func runFreeze(t *testing.T, newL newFn, timeout time.Duration, client func(testing.TB, string) *redis.Client) {
	const freeze, pace = 3 * time.Second, 100 * time.Microsecond
	srv := redistest.StartServer(t)
	if client == nil {
		client = readmeClient
	}
	var opts []limiter.Option
	bound := 2 * timeout
	if timeout != defaultTimeout {
		opts = append(opts, limiter.WithTimeout(timeout))
		bound = 2*500*time.Millisecond + time.Second
	}
	base := goroutines()
	meter := redistest.NewStallMeter()
	f := newFleet(t, newL, 3, func() *redis.Client { return client(t, srv.Addr) }, opts...)
	start := time.Now()
	var frozeAt time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(time.Second)
		frozeAt = time.Now()
		if err := srv.Pause(); err != nil {
			t.Errorf("SIGSTOP: %v", err)
			return
		}
		time.Sleep(freeze)
		if err := srv.Resume(); err != nil {
			t.Errorf("SIGCONT: %v", err)
		}
	}()
	// The callers pause between calls, as a server's handlers wait for
	// their network: 48 goroutines that never block would keep each
	// other waiting for the two CPUs for hundreds of ms once the
	// breaker answers in microseconds, which is no bound of the
	// limiter's (the contention matrix is where CPU-bound callers are
	// tested).
	s := drive(f, 16, 1, -pace, start.Add(time.Second+freeze+2*time.Second))
	<-done
	stall := meter.End()
	bound += stall
	f.close(t)
	f.mu.Lock()
	opened, closed := f.opened, f.closed
	f.mu.Unlock()
	t.Logf("%d calls, %d degraded, %d shed, %d errors; slowest call %v (bound %v, with the longest scheduling stall seen, %v); breaker opened %d times, closed %d times",
		s.calls, s.degraded, s.shed, s.errs, s.maxLat, bound, stall, len(opened), len(closed))
	if s.errs > 0 {
		t.Errorf("%d calls failed, first: %v", s.errs, s.firstErr)
	}
	if s.maxLat > bound {
		t.Errorf("a call started %v after the freeze took %v, want at most %v; it returned %s", s.maxAt.Sub(frozeAt), s.maxLat, bound, s.maxWhat)
	}
	if len(opened) == 0 {
		t.Fatalf("the breaker never opened during a %v freeze", freeze)
	}
	if timeout == defaultTimeout {
		within := 2*timeout + defaultProbe + stall
		for i, at := range opened {
			if d := at.Sub(frozeAt); d > within || d < 0 {
				t.Errorf("instance breaker %d opened %v after the freeze, want within %v", i, d, within)
			}
		}
	}
	if len(closed) < len(opened) {
		t.Errorf("the breaker opened %d times and closed %d times", len(opened), len(closed))
	}
	for i, at := range opened {
		t.Logf("breaker %d opened %v after the freeze", i, at.Sub(frozeAt))
	}
	if n := settle(base); n > base {
		t.Errorf("%d goroutines after Close, %d before the fleet", n, base)
	}
}

// goroutines is the number of goroutines now.
func goroutines() int { return runtime.NumGoroutine() }

// settle waits up to 10 s for the goroutines to come back to base and
// returns their number.
func settle(base int) int {
	n := goroutines()
	for deadline := time.Now().Add(10 * time.Second); n > base && time.Now().Before(deadline); n = goroutines() {
		time.Sleep(20 * time.Millisecond)
	}
	return n
}
