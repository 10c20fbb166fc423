// Package seams holds the tests of the fleet's seams: where a memory an
// instance keeps (hot-key relief, a hybrid's leases and cached refusals),
// the failure policy's onset and the go-redis client meet. They run for
// every Redis provider (redisabs, redissup, both hybrids) on a real
// redis-server with the README's client, from the root package's tests
// on the go-redis version go.mod requires, and from module compat's on
// the newest go-redis (the same functions: the go-redis version is the
// module's). A package that calls them must run redistest.Main in its
// TestMain.
package seams

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/window"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// fleetProvider builds one of the four Redis-backed providers on client.
type fleetProvider struct {
	name string
	new  func(client *redis.Client, opts ...limiter.Option) (limiter.Limiter, error)
}

var fleetProviders = []fleetProvider{
	{"redisabs", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) { return redisabs.New(c, o...) }},
	{"redissup", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) { return redissup.New(c, o...) }},
	{"hybrid.Absolute", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) {
		return hybrid.NewAbsolute(c, o...)
	}},
	{"hybrid.Suppressed", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) {
		return hybrid.NewSuppressed(c, o...)
	}},
}

// readmeClient is the client the README builds: go-redis' defaults (dial
// retries included) but for MaxRetries.
func readmeClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// staleBound is how soon, after another instance changes a key, an
// instance that refused the key from memory must see the change: the
// documented bound (redisprov.MaxStale, 1 s) and half a second for a loaded
// machine.
const staleBound = 1500 * time.Millisecond

// RunMemoryStaleness: instance A spends a key and is refused (from
// memory from then on); another instance B then changes the key in Redis:
// a Reset, a hybrid instance's Close giving its lease back, a higher rate.
// A admits again within staleBound, at W = 1 min and W = 24 h, for every
// provider, with default options on the README's client
// (docs/algorithms.md, Staleness).
func RunMemoryStaleness(t *testing.T) {
	srv := redistest.Real(t)
	ctx := context.Background()
	windows := []time.Duration{time.Minute, 24 * time.Hour}
	cases := []string{"Reset", "GiveBack", "HigherRate"}
	for _, p := range fleetProviders {
		for _, w := range windows {
			for _, c := range cases {
				t.Run(fmt.Sprintf("%s/%v/%s", p.name, w, c), func(t *testing.T) {
					t.Parallel()
					prefix := limiter.WithPrefix(redistest.Prefix(t))
					opts := []limiter.Option{prefix, limiter.WithWindow(w)}
					a, err := p.new(readmeClient(t, srv.Addr), opts...)
					if err != nil {
						t.Fatal(err)
					}
					defer a.Close(ctx)
					rate := limiter.Every(5, w)
					k := "user:" + c
					if c == "GiveBack" {
						giveBack(t, p.name, srv.Addr, a, k, opts, w)
						return
					}
					spendAndRefuse(t, a, k, rate, 5)
					b, err := p.new(readmeClient(t, srv.Addr), opts...)
					if err != nil {
						t.Fatal(err)
					}
					defer b.Close(ctx)
					start := time.Now()
					switch c {
					case "Reset":
						if err := b.Reset(ctx, k); err != nil {
							t.Fatalf("B.Reset: %v", err)
						}
					case "HigherRate":
						rate = limiter.Every(10, w)
						if d, err := b.Inc(ctx, k, rate, 1); err != nil || !d.Allowed {
							t.Fatalf("B.Inc at the higher rate = %+v, %v; want allowed", d, err)
						}
					}
					admittedWithin(t, a, k, rate, start)
				})
			}
		}
	}
}

// giveBack: a hybrid instance B of a's strategy holds unused units of k
// in a lease while a spends the rest of k's room and is refused; B's
// Close gives them back, and a admits again.
func giveBack(t *testing.T, name, addr string, a limiter.Limiter, k string, opts []limiter.Option, w time.Duration) {
	ctx := context.Background()
	sup := name == "redissup" || name == "hybrid.Suppressed"
	var b, raw limiter.Limiter
	var err error
	if sup {
		b, err = hybrid.NewSuppressed(readmeClient(t, addr), opts...)
		if err == nil {
			raw, err = redissup.New(readmeClient(t, addr), opts...)
		}
	} else {
		b, err = hybrid.NewAbsolute(readmeClient(t, addr), opts...)
		if err == nil {
			raw, err = redisabs.New(readmeClient(t, addr), opts...)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(ctx)
	rate := limiter.Every(1000, w)
	// B calls until it holds a lease with units unused (Redis holds more
	// than B admitted), then a spends the rest of the room.
	held := false
	for i := 1; i <= 500 && !held; i++ {
		if d, err := b.Inc(ctx, k, rate, 1); err != nil || !d.Allowed {
			t.Fatalf("B.Inc = %+v, %v; want allowed", d, err)
		}
		u, err := raw.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		held = u.Used > int64(i)
	}
	if !held {
		t.Fatalf("B holds no lease of %q with units unused after 500 calls", k)
	}
	spendAndRefuse(t, a, k, rate, 1)
	start := time.Now()
	if err := b.Close(ctx); err != nil {
		t.Fatalf("B.Close: %v", err)
	}
	admittedWithin(t, a, k, rate, start)
}

// spendAndRefuse spends k's room on l (at least min units admitted) and
// calls until l refuses, then a few times more so that the refusal is
// remembered; it returns the units admitted.
func spendAndRefuse(t *testing.T, l limiter.Limiter, k string, rate limiter.Rate, min int) (admitted int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 2000; i++ {
		d, err := l.Inc(ctx, k, rate, 1)
		if err != nil {
			t.Fatalf("Inc(%q) = %v", k, err)
		}
		if d.Degraded || d.Shed {
			t.Fatalf("Inc(%q) = %+v; want an answer from Redis", k, d)
		}
		if d.Allowed {
			admitted++
			continue
		}
		if admitted < min {
			t.Fatalf("Inc(%q): refused after %d admitted, want at least %d", k, admitted, min)
		}
		for j := 0; j < 5; j++ {
			if d, err := l.Inc(ctx, k, rate, 1); err != nil || d.Allowed {
				t.Fatalf("Inc(%q) after a refusal = %+v, %v; want refused", k, d, err)
			}
		}
		return admitted
	}
	t.Fatalf("Inc(%q): 2000 calls admitted", k)
	return admitted
}

// admittedWithin calls l on k every 20 ms until it admits, and fails
// when that takes longer than staleBound from start.
func admittedWithin(t *testing.T, l limiter.Limiter, k string, rate limiter.Rate, start time.Time) {
	t.Helper()
	for {
		d, err := l.Inc(context.Background(), k, rate, 1)
		if err != nil {
			t.Fatalf("Inc(%q) = %v", k, err)
		}
		if d.Allowed {
			t.Logf("admitted again %v after the change", time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > staleBound {
			t.Fatalf("Inc(%q) still refused %v after the change (%+v); want admitted within %v",
				k, time.Since(start).Round(time.Millisecond), d, staleBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// onsetTimeout is the per-call timeout (WithTimeout's default).
const onsetTimeout = 250 * time.Millisecond

// onsetSlack is how much a call may exceed its bound on a loaded 2-core
// machine (the race detector slows every call 5 to 20 times).
func onsetSlack() time.Duration {
	if raceEnabled {
		return 250 * time.Millisecond
	}
	return 50 * time.Millisecond
}

// onsetCall is one call of RunOutageOnset's load.
type onsetCall struct {
	start, end time.Time
	d          limiter.Decision
	err        error
	lease      bool // admitted from a hybrid's lease: memory, not the policy
}

// lastEvents is an observer that keeps each key's latest decision event.
type lastEvents struct{ m sync.Map }

func (o *lastEvents) ObserveDecision(_ context.Context, e limiter.DecisionEvent) { o.m.Store(e.Key, e) }
func (o *lastEvents) ObserveEvent(context.Context, limiter.Event)                {}

func (o *lastEvents) last(k string) limiter.DecisionEvent {
	e, _ := o.m.Load(k)
	ev, _ := e.(limiter.DecisionEvent)
	return ev
}

// RunOutageOnset: a Redis that dies under load, or that is not there from
// the first call, is answered by the failure policy within the timeout,
// whatever go-redis' dialer does with the refused dials (the README's
// client: go-redis' defaults, DialerRetries 5 with 100 ms pauses): with 16
// goroutines calling Inc and IncSet when redis-server is killed, every
// call that starts 300 ms or more after the kill is Degraded with a nil
// error (or, on a hybrid, admitted from a lease it holds: exact, its units
// are in Redis, and not the policy's answer), no call takes more than two
// timeouts, and no call is shed; on an
// address that refuses from the start the first Inc and the first IncSet
// are Degraded within 300 ms (calls started before the kill are held to
// the first two bounds only); a restarted Redis is back within one probe
// interval and the write-back (docs/operations.md, What counts as an
// outage).
func RunOutageOnset(t *testing.T) {
	set, err := limiter.NewSet(limiter.Limit{Name: "second", Rate: limiter.PerSecond(100), Window: time.Second},
		limiter.Limit{Name: "minute", Rate: limiter.PerMinute(3000), Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range fleetProviders {
		t.Run(p.name+"/Killed", func(t *testing.T) {
			srv := redistest.StartServer(t)
			obs, states := &lastEvents{}, newStateLog()
			l, err := p.new(readmeClient(t, srv.Addr), limiter.WithPrefix(redistest.Prefix(t)), limiter.WithObserver(limiter.MultiObserver(obs, window.StateObserver(states.hook))))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close(context.Background())
			calls, kill := onsetLoad(t, l, obs, set, srv.Kill)
			checkOnset(t, calls, kill)
			// Back: the probe's client dials afresh at each probe (go-redis'
			// pool repeated its failed dial's error until its own redial,
			// once a second), so the breaker closes at the first probe
			// after the restart, plus the write-back of 16 keys.
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			up := time.Now()
			closed := states.wait(false, up, 10*time.Second)
			if bound := probeInterval + 2*onsetSlack(); closed.IsZero() || closed.Sub(up) > bound {
				t.Errorf("breaker closed restart+%v (zero: not within 10 s), want within %v", closed.Sub(up), bound)
			}
			t.Logf("closed restart+%v", closed.Sub(up).Round(time.Millisecond))
		})
		t.Run(p.name+"/RefusedFromStart", func(t *testing.T) {
			addr := redistest.DeadClient(t).Options().Addr
			for _, op := range []string{"Inc", "IncSet"} {
				l, err := p.new(readmeClient(t, addr), limiter.WithPrefix(redistest.Prefix(t)), window.WithLogger(nil))
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				var d limiter.Decision
				if op == "Inc" {
					d, err = l.Inc(context.Background(), "k", limiter.PerSecond(10), 1)
				} else {
					var sd limiter.SetDecision
					sd, err = l.(limiter.SetLimiter).IncSet(context.Background(), "k", set, 1)
					d = sd.Decision
				}
				took := time.Since(start)
				if err != nil || !d.Degraded || d.Shed {
					t.Errorf("first %s on a refusing address = %+v, %v after %v; want Degraded", op, d, err, took)
				}
				if bound := 300*time.Millisecond + onsetSlack(); took > bound {
					t.Errorf("first %s on a refusing address took %v, want at most %v", op, took, bound)
				}
				t.Logf("first %s: degraded=%v after %v", op, d.Degraded, took.Round(time.Millisecond))
				l.Close(context.Background())
			}
		})
	}
}

// onsetLoad runs 16 goroutines of Inc and IncSet on l (half each, a key
// each) for 300 ms, calls kill, and goes on for 1.5 s: it returns every
// call and the instant of the kill.
func onsetLoad(t *testing.T, l limiter.Limiter, obs *lastEvents, set *limiter.Set, kill func()) ([]onsetCall, time.Time) {
	t.Helper()
	const workers = 16
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		all    []onsetCall
		stop   = make(chan struct{})
		sl, ok = l.(limiter.SetLimiter)
	)
	if !ok {
		t.Fatalf("%T is not a SetLimiter", l)
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			k := fmt.Sprintf("user:%d", w)
			var mine []onsetCall
			for {
				select {
				case <-stop:
					mu.Lock()
					all = append(all, mine...)
					mu.Unlock()
					return
				default:
				}
				c := onsetCall{start: time.Now()}
				if w%2 == 0 {
					c.d, c.err = l.Inc(context.Background(), k, limiter.PerSecond(1000), 1)
				} else {
					var sd limiter.SetDecision
					sd, c.err = sl.IncSet(context.Background(), k, set, 1)
					c.d = sd.Decision
				}
				c.end = time.Now()
				ev := obs.last(k)
				c.lease = c.d.Allowed && !ev.Backend && !ev.Decision.Degraded
				mine = append(mine, c)
				time.Sleep(time.Millisecond)
			}
		}(w)
	}
	time.Sleep(300 * time.Millisecond)
	at := time.Now()
	kill()
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	return all, at
}

// checkOnset checks RunOutageOnset's bounds on calls around a kill at
// kill.
func checkOnset(t *testing.T, calls []onsetCall, kill time.Time) {
	t.Helper()
	shed, late, bad, leased := 0, 0, 0, 0
	var longest time.Duration
	var firstDegraded time.Time
	for _, c := range calls {
		if c.err != nil {
			if bad++; bad <= 3 {
				t.Errorf("call at kill%+v: %v", c.start.Sub(kill).Round(time.Millisecond), c.err)
			}
			continue
		}
		// A call started before the kill may be shed by a busy client's
		// rule (a loaded machine starves a call of its budget): that is
		// not the outage's onset.
		if c.d.Shed && !c.start.Before(kill) {
			if shed++; shed <= 3 {
				t.Errorf("call at kill%+v shed: %+v", c.start.Sub(kill).Round(time.Millisecond), c.d)
			}
		}
		if c.lease {
			leased++
		}
		if c.start.Sub(kill) >= 300*time.Millisecond && !c.d.Degraded && !c.lease {
			if late++; late <= 3 {
				t.Errorf("call at kill+%v not degraded: %+v", c.start.Sub(kill).Round(time.Millisecond), c.d)
			}
		}
		if c.d.Degraded && (firstDegraded.IsZero() || c.end.Before(firstDegraded)) {
			firstDegraded = c.end
		}
		longest = max(longest, c.end.Sub(c.start))
	}
	if bound := 2*onsetTimeout + onsetSlack(); longest > bound {
		t.Errorf("longest call %v, want at most %v (two timeouts)", longest, bound)
	}
	t.Logf("%d calls: %d errors, %d shed, %d from leases, %d neither degraded nor leased 300 ms after the kill, longest %v, first degraded kill+%v",
		len(calls), bad, shed, leased, late, longest.Round(time.Millisecond), firstDegraded.Sub(kill).Round(time.Millisecond))
}

// goRedisLog captures what go-redis logs (redis.SetLogger).
type goRedisLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *goRedisLog) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
}

// RunProbeClientQuiet: building every provider, on go-redis' default
// client and on one with maintenance notifications enabled, pinging and
// deciding makes go-redis log nothing and nothing panics (the probe's own client copied the
// user's push-notification processor, so go-redis logged "cannot
// overwrite existing handler" for each limiter, and with
// maintnotifications.ModeEnabled New panicked).
//
// go-redis' logger is global and SetLogger races with any go-redis
// goroutine still running (an earlier test's pool), so the test runs
// itself in a process of its own.
func RunProbeClientQuiet(t *testing.T) {
	if os.Getenv(quietChild) != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), quietChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS") {
			t.Fatalf("TestProbeClientQuiet in a process of its own: %v\n%s", err, out)
		}
		return
	}
	srv := redistest.Real(t)
	logged := &goRedisLog{}
	redis.SetLogger(logged)
	ctx := context.Background()
	clients := map[string]func() *redis.Client{
		"default": func() *redis.Client { return redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1}) },
		"maintnotifications enabled": func() *redis.Client {
			return redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1,
				MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeEnabled}})
		},
	}
	for cname, newClient := range clients {
		for _, p := range fleetProviders {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s on a client with %s: panic %v", p.name, cname, r)
					}
				}()
				c := newClient()
				defer c.Close()
				l, err := p.new(c, limiter.WithPrefix(redistest.Prefix(t)))
				if err != nil {
					t.Fatalf("%s: %v", p.name, err)
				}
				defer l.Close(ctx)
				if err := l.(interface{ Ping(context.Context) error }).Ping(ctx); err != nil {
					t.Errorf("%s on a client with %s: Ping = %v", p.name, cname, err)
				}
				if cname != "default" {
					// The client's own connections ask Redis for the
					// notifications, which Redis 7.0 does not know: its
					// calls fail, not the limiter's construction.
					return
				}
				if _, err := l.Inc(ctx, "k", limiter.PerSecond(10), 1); err != nil {
					t.Errorf("%s on a client with %s: Inc = %v", p.name, cname, err)
				}
			}()
		}
	}
	logged.mu.Lock()
	defer logged.mu.Unlock()
	if len(logged.lines) != 0 {
		t.Errorf("go-redis logged %d lines, want none: %q", len(logged.lines), logged.lines)
	}
}

// quietChild is set in the environment of RunProbeClientQuiet's own
// process.
const quietChild = "SLUICE_TEST_QUIET_CHILD"

// records is a slog handler that keeps every record's message and
// attributes, one line each.
type records struct {
	mu    sync.Mutex
	lines []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
	return nil
}

func (r *records) with(s string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// RunEvictionWarning: a Redis whose maxmemory-policy can evict the
// limiter's hashes (every policy but noeviction: they all carry a TTL) is
// warned about through the logger, once, at Ping and, without Ping, after
// the limiter's first call; noeviction is not (docs/operations.md, Memory
// policy).
func RunEvictionWarning(t *testing.T) {
	ctx := context.Background()
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "volatile-ttl", "noeviction"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartServer(t, "--maxmemory-policy", policy)
			want := 1
			if policy == "noeviction" {
				want = 0
			}
			for _, ping := range []bool{true, false} {
				logs := &records{}
				l, err := redisabs.New(readmeClient(t, srv.Addr), limiter.WithPrefix(redistest.Prefix(t)),
					window.WithLogger(slog.New(logs)))
				if err != nil {
					t.Fatal(err)
				}
				if ping {
					if err := l.Ping(ctx); err != nil {
						t.Fatal(err)
					}
				}
				for i := 0; i < 3; i++ {
					if _, err := l.Inc(ctx, "k", limiter.PerSecond(10), 1); err != nil {
						t.Fatal(err)
					}
				}
				// Without Ping the check runs in the background, and Close
				// cancels it: wait for its warning (loose: it takes about a
				// millisecond on a quiet machine).
				for end := time.Now().Add(5 * time.Second); want > 0 && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
					if len(logs.with("maxmemory-policy="+policy)) > 0 {
						break
					}
				}
				l.Close(ctx)
				got := logs.with("maxmemory-policy=" + policy)
				if len(got) != want {
					t.Errorf("ping %v: %d warnings naming maxmemory-policy=%s, want %d: %q", ping, len(got), policy, want, logs.lines)
				}
			}
		})
	}
}

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

// RunFreezeWithHotKeys: a Redis stopped with SIGSTOP while the instance
// answers its hot keys from memory (refusals hot-key relief remembers, a
// hybrid's cached refusals) and calls other keys on Redis: the breaker
// opens within two timeouts and one probe interval of the freeze in 8 of
// 8 runs, on the README's client (memory is not the wire: answers from it
// are not replies of Redis's, which would make the confirming probe
// inconclusive); after SIGCONT the breaker closes within one probe
// interval and the write-back.
func RunFreezeWithHotKeys(t *testing.T) {
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
		limiter.WithObserver(window.StateObserver(states.hook)), window.WithLogger(nil))
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
				// (a starved process makes the probe inconclusive):
				// 12,000 calls a second on the hot keys.
				time.Sleep(time.Millisecond)
			}
		}(w)
	}
	time.Sleep(200 * time.Millisecond)
	meter := redistest.NewStallMeter()
	frozen := time.Now()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	opened := states.wait(true, frozen, 10*time.Second)
	stall := meter.End()
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	closed := states.wait(false, resumed, 10*time.Second)
	close(stop)
	wg.Wait()
	// The contract's bound, plus the longest scheduling stall this
	// process saw meanwhile (as internal/overload's TestFreeze): a loaded
	// machine delays the limiter's goroutines as much as the test's.
	bound := 2*onsetTimeout + probeInterval + onsetSlack() + stall
	if stall > onsetTimeout/4 {
		// A stall of a quarter of the timeout makes a confirming probe
		// inconclusive (docs/operations.md, What counts as an outage):
		// the next call that times out asks again.
		bound += onsetTimeout + probeInterval/2
	}
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
	t.Logf("run %d: opened freeze+%v (longest stall %v), closed SIGCONT+%v", run, opened.Sub(frozen).Round(time.Millisecond),
		stall.Round(time.Millisecond), closed.Sub(resumed).Round(time.Millisecond))
}

// RunLeaseStaleness: a hybrid instance's lease outlives another
// instance's Reset of its key by at most the lease's life, B + D (the
// bucket and how far ahead a lease may be dated): after the Reset the
// instance admits from the lease it holds (units Redis no longer counts)
// for at most that long, then asks Redis again (docs/algorithms.md,
// Staleness). Measured at W = 1 s (B = 10 ms, D = 50 ms) and W = 1 min
// (B = 600 ms, D = 1 s).
func RunLeaseStaleness(t *testing.T) {
	srv := redistest.Real(t)
	ctx := context.Background()
	for _, p := range fleetProviders[2:] { // the hybrids
		for _, w := range []time.Duration{time.Second, time.Minute} {
			t.Run(fmt.Sprintf("%s/%v", p.name, w), func(t *testing.T) {
				t.Parallel()
				obs := &lastEvents{}
				opts := []limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithWindow(w)}
				a, err := p.new(readmeClient(t, srv.Addr), append(opts, limiter.WithObserver(obs))...)
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close(ctx)
				b, err := p.new(readmeClient(t, srv.Addr), opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close(ctx)
				rate := limiter.Every(100_000, w)
				const k = "user:leased"
				// A's calls, 2 ms apart, until one is answered from a lease.
				leased := false
				for i := 0; i < 500 && !leased; i++ {
					if d, err := a.Inc(ctx, k, rate, 1); err != nil || !d.Allowed {
						t.Fatalf("A.Inc = %+v, %v; want allowed", d, err)
					}
					ev := obs.last(k)
					leased = ev.Source == window.SourceMemory
					time.Sleep(2 * time.Millisecond)
				}
				if !leased {
					t.Fatal("A answered no call from a lease in 500 calls")
				}
				if err := b.Reset(ctx, k); err != nil {
					t.Fatal(err)
				}
				reset := time.Now()
				var last time.Time
				for time.Since(reset) < 3*time.Second {
					if d, err := a.Inc(ctx, k, rate, 1); err != nil || !d.Allowed {
						t.Fatalf("A.Inc after the Reset = %+v, %v; want allowed", d, err)
					}
					if ev := obs.last(k); ev.Source == window.SourceMemory {
						last = time.Now()
					} else {
						break // asked Redis: the lease is gone
					}
					time.Sleep(2 * time.Millisecond)
				}
				b2 := w / 100
				ahead := min(w/20, time.Second)
				bound := b2 + ahead + 100*time.Millisecond + onsetSlack()
				stale := last.Sub(reset)
				if last.IsZero() {
					stale = 0
				}
				if stale > bound {
					t.Errorf("A answered from its lease %v after B's Reset, want at most B + D (%v) and slack: %v", stale, b2+ahead, bound)
				}
				t.Logf("last answer from the lease reset+%v (B + D = %v)", stale.Round(time.Millisecond), b2+ahead)
			})
		}
	}
}
