package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/internal/window"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// Backends and strategies of a Target.
const (
	Local      = "local"
	Redis      = "redis"
	Absolute   = "absolute"
	Suppressed = "suppressed"
)

// Target is one kind of provider the workload runs against: every
// application instance gets its own provider of this kind.
type Target struct {
	Backend  string // Local or Redis
	Strategy string // Absolute or Suppressed
}

func (t Target) String() string { return t.Backend + " " + t.Strategy }

// Options describe one simulated run. Run reads them and changes nothing.
type Options struct {
	// Targets are the providers compared, each fed the same workload.
	Targets []Target
	// Keys are the limited keys and the traffic offered to each.
	Keys []KeySpec
	// Instances is the number of application instances. Each has its own
	// provider of every target and, for Redis targets, its own client.
	Instances int
	// Clients is the number of simulated clients; client i sends requests
	// for key i mod len(Keys) through a load balancer that picks an
	// instance at random. Clients ≥ len(Keys).
	Clients int
	// Duration of the run.
	Duration time.Duration
	// Window and Bucket configure every provider; Bucket 0 is the default
	// (Window/100).
	Window, Bucket time.Duration
	// WindowNote, when set, says in the banner how Window was chosen.
	WindowNote string
	// HardLimitFactor configures suppressed providers (≥ 1).
	HardLimitFactor float64
	// Cost is the units of every request (≥ 1).
	Cost int64
	// Seed makes the workload (arrival times, instances, bursts) and the
	// suppressed strategy's draws reproducible.
	Seed uint64
	// Prefix is the Redis key prefix of the run.
	Prefix string
	// RedisTimeout bounds each call of a Redis provider (limiter.WithTimeout);
	// 0 keeps the library's default.
	RedisTimeout time.Duration
	// NewRedis returns a new client to the shared Redis; Run calls it once
	// per instance when a target is on Redis, and closes the clients.
	NewRedis func() *redis.Client
	// Live redraws the table in place (stdout is a terminal); otherwise the
	// table is appended to, one block per tick.
	Live bool
	// Tick is the period of the table. Default 1 s.
	Tick time.Duration
	// Record, when set, is called for every decision with the instant the
	// provider decided at, before the clock can move on. It must be safe for
	// concurrent use and quick.
	Record func(Event)
}

// Event is one decision, as passed to Options.Record.
type Event struct {
	Target, Instance, Key int // indexes into Options
	Ms                    int64
	N                     int64
	Decision              limiter.Decision
	Err                   error
}

// simClock is the clock every provider of a run reads (limiter.WithClock;
// the Redis providers then send its reading to the script instead of using
// Redis TIME). It follows real time in whole milliseconds, but only moves
// while no decision is in progress: each decision holds mu for reading
// from the moment it reads the instant until its admission is recorded,
// and the clock takes mu for writing to move. So the instant a decision
// records is exactly the instant its provider decided at, and providers
// see time in the order they run (every call in flight shares one instant),
// as they do on a real Redis whose TIME is the clock.
type simClock struct {
	mu sync.RWMutex
	ms atomic.Int64
}

func (c *simClock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }

// lockedRand is a seeded random source safe for concurrent use.
type lockedRand struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func (r *lockedRand) Float64() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.Float64()
}

// provider is one target: its limiter in every instance, and what they
// decided.
type provider struct {
	target Target
	lims   []limiter.Limiter // one per instance
	counts counts
	lat    latencies
	keys   []*keyTrack
	last   Counts // counts at the previous tick

	errOnce  sync.Once
	firstErr error
}

// keyTrack is what one provider decided for one key.
type keyTrack struct {
	capacity, hard int64
	counts         counts // requests
	offeredUnits   atomic.Int64
	admittedUnits  atomic.Int64
	// The most admitted units in any window of W, fleet-wide and per
	// instance, fed in time order by the clock's goroutine.
	fleet *maxWindow
	inst  []*maxWindow
}

// admitted is an admission waiting to be fed to the peaks.
type admitted struct {
	key, instance int
	admission
}

// worker sends one client's requests to one provider.
type worker struct {
	prov, key int
	gen       *arrivals
	// buf holds the worker's admissions since the clock last moved. The
	// worker appends under the clock's read lock; advance takes them under
	// the write lock.
	buf []admitted
}

type engine struct {
	opts    Options
	out     io.Writer
	clock   simClock
	w       int64 // window in ms
	provs   []*provider
	workers []*worker
	batch   [][]admitted // per provider, reused
	clients []*redis.Client
}

// Run runs the workload described by opts, drawing the live table on out
// every Tick, and returns the final report. It stops early, with the report
// so far, when ctx is done. Errors of individual decisions are counted, not
// returned; the error is for a run that cannot start.
func Run(ctx context.Context, opts Options, out io.Writer) (*Report, error) {
	e, err := newEngine(opts, out)
	if err != nil {
		return nil, err
	}
	defer e.close()
	if err := e.warmUp(ctx); err != nil {
		return nil, err
	}
	return e.run(ctx), nil
}

// warmUp opens a few connections on every Redis client and loads the
// scripts (a peek writes nothing), so that the first second's latencies
// measure decisions, not dials and NOSCRIPT round trips.
func (e *engine) warmUp(ctx context.Context) error {
	if len(e.clients) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conns := min(e.opts.Clients, 8)
	errs := make(chan error, len(e.clients)*conns)
	var wg sync.WaitGroup
	for _, c := range e.clients {
		for range conns {
			wg.Add(1)
			go func(c *redis.Client) {
				defer wg.Done()
				errs <- c.Ping(ctx).Err()
			}(c)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return fmt.Errorf("warming up Redis: %w", err)
		}
	}
	// One peek per Redis target loads its script: the script cache is
	// the server's.
	e.clock.ms.Store(time.Now().UnixMilli())
	for _, p := range e.provs {
		if p.target.Backend != Redis {
			continue
		}
		if _, err := p.lims[0].Inc(ctx, "sluice-warm-up", e.opts.Keys[0].Rate, 0); err != nil {
			return fmt.Errorf("warming up Redis: %w", err)
		}
	}
	return nil
}

func newEngine(opts Options, out io.Writer) (*engine, error) {
	if opts.Tick <= 0 {
		opts.Tick = time.Second
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	cfg, err := window.NewConfig(opts.limiterOptions()...)
	if err != nil {
		return nil, err
	}
	e := &engine{opts: opts, out: out, w: cfg.WindowMs}
	e.opts.Bucket = cfg.Bucket
	ok := false
	defer func() {
		if !ok {
			e.close()
		}
	}()
	for _, t := range opts.Targets {
		if t.Backend == Redis && e.clients == nil {
			for range opts.Instances {
				e.clients = append(e.clients, opts.NewRedis())
			}
		}
	}
	for pi, t := range opts.Targets {
		p := &provider{target: t}
		e.provs = append(e.provs, p)
		for i := range opts.Instances {
			src := &lockedRand{rng: rand.New(rand.NewPCG(opts.Seed, uint64(pi*1000+i)))}
			lopts := append(opts.limiterOptionsFor(t), limiter.WithClock(e.clock.Now))
			if t.Strategy == Suppressed {
				lopts = append(lopts, limiter.WithRandom(src.Float64))
			}
			var c *redis.Client
			if t.Backend == Redis {
				c = e.clients[i]
				if opts.RedisTimeout > 0 {
					lopts = append(lopts, limiter.WithTimeout(opts.RedisTimeout))
				}
			}
			l, err := newLimiter(t, c, lopts)
			if err != nil {
				return nil, fmt.Errorf("%v: %w", t, err)
			}
			p.lims = append(p.lims, l)
		}
		for _, k := range opts.Keys {
			c, err := limiter.Capacity(k.Rate, opts.Window)
			if err != nil {
				return nil, fmt.Errorf("key %q: %w", k.Name, err)
			}
			h, err := window.HardCapacity(k.Rate, opts.Window, opts.HardLimitFactor)
			if err != nil {
				return nil, fmt.Errorf("key %q: %w", k.Name, err)
			}
			kt := &keyTrack{capacity: c, hard: h, fleet: newMaxWindow(e.w)}
			for range opts.Instances {
				kt.inst = append(kt.inst, newMaxWindow(e.w))
			}
			p.keys = append(p.keys, kt)
		}
	}
	e.batch = make([][]admitted, len(e.provs))
	// Clients per key, for each client's share of its key's traffic.
	perKey := make([]int, len(opts.Keys))
	for c := range opts.Clients {
		perKey[c%len(opts.Keys)]++
	}
	for pi := range e.provs {
		for c := range opts.Clients {
			k := c % len(opts.Keys)
			gen := newArrivals(&opts.Keys[k], 1/float64(perKey[k]), opts.Instances,
				opts.Seed^uint64(k+1)*0x9e3779b97f4a7c15, opts.Seed^uint64(c+1)*0xbf58476d1ce4e5b9)
			e.workers = append(e.workers, &worker{prov: pi, key: k, gen: gen})
		}
	}
	ok = true
	return e, nil
}

func (o *Options) validate() error {
	switch {
	case len(o.Targets) == 0:
		return errors.New("no provider to run")
	case len(o.Keys) == 0:
		return errors.New("no key to run")
	case o.Instances < 1:
		return fmt.Errorf("instances %d: want at least 1", o.Instances)
	case o.Clients < len(o.Keys):
		return fmt.Errorf("clients %d: want at least one per key (%d keys)", o.Clients, len(o.Keys))
	case o.Duration <= 0:
		return fmt.Errorf("duration %v: want more than 0", o.Duration)
	case o.Cost < 1:
		return fmt.Errorf("cost %d: want at least 1", o.Cost)
	}
	for _, t := range o.Targets {
		if t.Backend != Local && t.Backend != Redis || t.Strategy != Absolute && t.Strategy != Suppressed {
			return fmt.Errorf("unknown provider %q", t)
		}
		if t.Backend == Redis && o.NewRedis == nil {
			return errors.New("a Redis provider needs a Redis client")
		}
	}
	for _, k := range o.Keys {
		if !(k.Offered > 0) {
			return fmt.Errorf("key %q: offered rate %v: want more than 0", k.Name, k.Offered)
		}
	}
	return nil
}

// limiterOptions is every option of the run's limiters, for checking
// them all at once (window.NewConfig, which reads every option). A
// provider is given limiterOptionsFor its target.
func (o *Options) limiterOptions() []limiter.Option {
	return append(o.limiterOptionsFor(Target{Local, Absolute}),
		limiter.WithHardLimitFactor(o.HardLimitFactor), limiter.WithPrefix(o.Prefix))
}

// limiterOptionsFor is the options of the run that target t reads (a
// provider refuses the others): the window and bucket, the hard limit
// factor for a suppressed one, the prefix for one in Redis.
func (o *Options) limiterOptionsFor(t Target) []limiter.Option {
	opts := []limiter.Option{limiter.WithWindow(o.Window)}
	if o.Bucket != 0 {
		opts = append(opts, limiter.WithBucket(o.Bucket))
	}
	if t.Strategy == Suppressed {
		opts = append(opts, limiter.WithHardLimitFactor(o.HardLimitFactor))
	}
	if t.Backend == Redis {
		opts = append(opts, limiter.WithPrefix(o.Prefix))
	}
	return opts
}

func newLimiter(t Target, c *redis.Client, opts []limiter.Option) (limiter.Limiter, error) {
	switch t {
	case Target{Local, Absolute}:
		return local.NewAbsolute(opts...)
	case Target{Local, Suppressed}:
		return local.NewSuppressed(opts...)
	case Target{Redis, Absolute}:
		return redisabs.New(c, opts...)
	case Target{Redis, Suppressed}:
		return redissup.New(c, opts...)
	}
	return nil, fmt.Errorf("unknown provider %q", t)
}

func (e *engine) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, p := range e.provs {
		for _, l := range p.lims {
			l.Close(ctx)
		}
	}
	for _, c := range e.clients {
		c.Close()
	}
}

func (e *engine) run(ctx context.Context) *Report {
	start := time.Now()
	e.clock.ms.Store(start.UnixMilli())
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, wk := range e.workers {
		wg.Add(1)
		go func(wk *worker) {
			defer wg.Done()
			e.work(wctx, wk, start)
		}(wk)
	}
	tab := newTable(e.out, e.opts.Live, e.names())
	tab.header()
	tick := time.NewTicker(time.Millisecond)
	next := e.opts.Tick
	interrupted := false
loop:
	for {
		select {
		case <-ctx.Done():
			interrupted = true
			break loop
		case <-tick.C:
		}
		elapsed := time.Since(start)
		if elapsed >= e.opts.Duration {
			break loop
		}
		e.advance(start.UnixMilli() + elapsed.Milliseconds())
		if elapsed >= next {
			tab.frame(next, e.opts.Duration, e.rows())
			next += e.opts.Tick
		}
	}
	tick.Stop()
	stop()
	wg.Wait()
	elapsed := min(time.Since(start), e.opts.Duration)
	e.advance(start.UnixMilli() + elapsed.Milliseconds())
	tab.frame(elapsed.Truncate(100*time.Millisecond), e.opts.Duration, e.rows())
	tab.end()
	return e.report(elapsed, interrupted)
}

// work sends one client's requests to one provider, on schedule, until the
// run's end or ctx is done.
func (e *engine) work(ctx context.Context, wk *worker, start time.Time) {
	timer := time.NewTimer(never)
	timer.Stop()
	for {
		a := wk.gen.next()
		if a.at >= e.opts.Duration {
			return
		}
		if d := time.Until(start.Add(a.at)); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		e.decide(wk, a.instance)
	}
}

// decide makes one request's decision and counts it.
func (e *engine) decide(wk *worker, inst int) {
	p := e.provs[wk.prov]
	spec := &e.opts.Keys[wk.key]
	n := e.opts.Cost

	e.clock.mu.RLock()
	now := e.clock.ms.Load()
	t0 := time.Now()
	d, err := p.lims[inst].Inc(context.Background(), spec.Name, spec.Rate, n)
	lat := time.Since(t0)
	if err == nil && d.Allowed {
		wk.buf = append(wk.buf, admitted{key: wk.key, instance: inst, admission: admission{ms: now, n: n}})
	}
	if e.opts.Record != nil {
		e.opts.Record(Event{Target: wk.prov, Instance: inst, Key: wk.key, Ms: now, N: n, Decision: d, Err: err})
	}
	e.clock.mu.RUnlock()

	e.count(p, p.keys[wk.key], result{d: d, err: err, lat: lat})
}

// result is one call's outcome.
type result struct {
	d   limiter.Decision
	err error
	lat time.Duration
}

func (e *engine) count(p *provider, kt *keyTrack, r result) {
	n := e.opts.Cost
	p.lat.add(r.lat)
	kt.offeredUnits.Add(n)
	for _, c := range []*counts{&p.counts, &kt.counts} {
		c.offered.Add(1)
		if r.err == nil && r.d.Degraded {
			c.degraded.Add(1)
		}
		switch {
		case r.err != nil:
			c.errors.Add(1)
		case r.d.Allowed:
			c.allowed.Add(1)
		case r.d.Suppressed:
			c.suppressed.Add(1)
		default:
			c.rejected.Add(1)
		}
	}
	switch {
	case r.err != nil:
		p.errOnce.Do(func() { p.firstErr = r.err })
	case r.d.Allowed:
		kt.admittedUnits.Add(n)
	}
}

// advance moves the clock to ms (never backwards) and feeds the peaks the
// admissions made before, in time order. Every admission in a worker's
// buffer was decided at an instant before ms, and every later one will be
// decided at ms or after, so the peaks see one ordered stream.
func (e *engine) advance(ms int64) {
	e.clock.mu.Lock()
	if ms > e.clock.ms.Load() {
		e.clock.ms.Store(ms)
	}
	for _, wk := range e.workers {
		e.batch[wk.prov] = append(e.batch[wk.prov], wk.buf...)
		wk.buf = wk.buf[:0]
	}
	e.clock.mu.Unlock()
	for pi, b := range e.batch {
		slices.SortStableFunc(b, func(x, y admitted) int { return cmp.Compare(x.ms, y.ms) })
		p := e.provs[pi]
		for _, a := range b {
			kt := p.keys[a.key]
			kt.fleet.add(a.admission)
			kt.inst[a.instance].add(a.admission)
		}
		e.batch[pi] = b[:0]
	}
}

func (e *engine) names() []string {
	var s []string
	for _, p := range e.provs {
		s = append(s, p.target.String())
	}
	return s
}

// rows returns the table's rows for the interval since the previous call.
func (e *engine) rows() []row {
	var rs []row
	for _, p := range e.provs {
		now := p.counts.snapshot()
		r := row{name: p.target.String(), Counts: now.Sub(p.last)}
		p.last = now
		r.p50, r.p99 = p.lat.takeInterval()
		rs = append(rs, r)
	}
	return rs
}

func (e *engine) report(elapsed time.Duration, interrupted bool) *Report {
	r := &Report{
		Elapsed:         elapsed,
		Duration:        e.opts.Duration,
		Interrupted:     interrupted,
		Window:          e.opts.Window,
		Bucket:          e.opts.Bucket,
		Instances:       e.opts.Instances,
		Clients:         e.opts.Clients,
		Cost:            e.opts.Cost,
		HardLimitFactor: e.opts.HardLimitFactor,
	}
	for _, p := range e.provs {
		pr := ProviderReport{Target: p.target, Counts: p.counts.snapshot(), FirstError: p.firstErr}
		pr.P50, pr.P99 = p.lat.totals()
		for ki, kt := range p.keys {
			spec := e.opts.Keys[ki]
			kr := KeyReport{
				Key:      spec.Name,
				Tier:     spec.Tier,
				Rate:     spec.Rate,
				Capacity: kt.capacity,
				Hard:     kt.hard,
				Counts:   kt.counts.snapshot(),
				Offered:  kt.offeredUnits.Load(),
				Admitted: kt.admittedUnits.Load(),
				Fleet:    kt.fleet.max,
			}
			for _, m := range kt.inst {
				kr.PerInstance = append(kr.PerInstance, m.max)
			}
			pr.Keys = append(pr.Keys, kr)
		}
		r.Providers = append(r.Providers, pr)
	}
	return r
}
