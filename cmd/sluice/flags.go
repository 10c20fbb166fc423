package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	win "github.com/sluice-go/sluice/internal/window"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// Demo settings: short enough to finish in about 10 s, long enough for two
// windows to slide by.
const (
	demoWindow   = 4 * time.Second
	demoDuration = 10 * time.Second
	demoHard     = 1.5
)

func demoKeys() []KeySpec {
	free, pro := limiter.PerSecond(10), limiter.PerSecond(50)
	burst := func(k KeySpec) KeySpec {
		k.BurstEvery, k.BurstLen, k.BurstFactor = 4*time.Second, 600*time.Millisecond, 5
		return k
	}
	return []KeySpec{
		burst(KeySpec{Name: "user:alice", Tier: "free", Rate: free, Offered: 20}),
		burst(KeySpec{Name: "user:bob", Tier: "free", Rate: free, Offered: 8}),
		burst(KeySpec{Name: "user:carol", Tier: "pro", Rate: pro, Offered: 40}),
		burst(KeySpec{Name: "user:dave", Tier: "pro", Rate: pro, Offered: 75}),
	}
}

func demoCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo",
		"Runs a simulated fleet: 3 application instances share one Redis (an embedded\n"+
			"miniredis unless --redis is given), 30 clients send bursts of requests for 4\n"+
			"keys on a free and a pro tier, and the same workload runs against local\n"+
			"absolute, Redis absolute and Redis suppressed limiters side by side. A live\n"+
			"table shows each second's decisions; the final report shows, per key, the\n"+
			"most units admitted in any window against its capacity. Ctrl-C stops early\n"+
			"with the report so far.")
	redisURL := fs.String("redis", "", "use the Redis server at `URL` (redis://[user:password@]host:port[/db]) instead of an embedded one")
	duration := fs.Duration("duration", demoDuration, "how long to run")
	window := fs.Duration("window", demoWindow, "sliding window W of every limiter; with --redis, a longer one leaves time to inspect the keys after the run (--window 1m --duration 45s still reaches the limits)")
	seed := fs.Uint64("seed", 1, "seed of the simulated workload")
	if st, done := parse(fs, args, stdout, stderr); done {
		return st
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	if *duration <= 0 {
		return usageError(fs, stderr, "--duration %v: want more than 0", *duration)
	}
	if _, err := win.NewConfig(limiter.WithWindow(*window)); err != nil {
		return usageError(fs, stderr, "--window %v: %v", *window, err)
	}
	opts := Options{
		Targets:         []Target{{Local, Absolute}, {Redis, Absolute}, {Redis, Suppressed}},
		Keys:            demoKeys(),
		Instances:       3,
		Clients:         30,
		Duration:        *duration,
		Window:          *window,
		HardLimitFactor: demoHard,
		Cost:            1,
		Seed:            *seed,
		Prefix:          runPrefix("demo"),
	}
	return workload(ctx, fs, "demo", opts, *redisURL, stdout, stderr)
}

// The bounds of load's counts. Each key is tracked per instance, each
// client is a goroutine's worth of state and each instance holds a limiter
// and, on Redis, a client with its own pool, so a count far above these
// exhausts the machine instead of measuring it (docs/cli.md, load).
const (
	maxKeys      = 10_000
	maxClients   = 100_000
	maxInstances = 100
)

func loadCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("load",
		"Runs the demo's engine with your settings: --instances application instances,\n"+
			"each with its own limiters (and Redis client), --clients clients sending\n"+
			"requests for --keys keys through a load balancer that picks an instance at\n"+
			"random, at --offer times the rate, with bursts. Same live table and report\n"+
			"as the demo. Without --redis, Redis providers run on an embedded miniredis.")
	redisURL := fs.String("redis", "", "use the Redis server at `URL` instead of an embedded one")
	provider := fs.String("provider", "both", "[local|redis|both] the providers to run")
	strategy := fs.String("strategy", Absolute, "[absolute|suppressed] the strategy of every provider (abs and sup work too)")
	rateFlag := fs.String("rate", "10/s", rateHelp)
	window := fs.Duration("window", 0, "sliding window W (whole ms, 1ms to 744h); default the rate's UNIT")
	bucket := fs.Duration("bucket", 0, "bucket B (whole ms); default W/100, at least 1ms")
	keys := fs.Int("keys", 4, fmt.Sprintf("number of keys (1 to %d)", maxKeys))
	clients := fs.Int("clients", 16, fmt.Sprintf("number of clients, at least one per key (up to %d)", maxClients))
	instances := fs.Int("instances", 3, fmt.Sprintf("number of application instances (1 to %d)", maxInstances))
	duration := fs.Duration("duration", 15*time.Second, "how long to run")
	cost := fs.Int64("cost", 1, "units per request")
	hard := fs.Float64("hard-limit", 1.5, "hard-limit factor F of the suppressed strategy (≥ 1)")
	offer := fs.Float64("offer", 2, "traffic offered to each key outside bursts, as a multiple of the rate")
	bursts := fs.Bool("bursts", true, "raise each key's traffic 4× for 500ms about every 3s")
	seed := fs.Uint64("seed", 1, "seed of the simulated workload and of the suppressed strategy's draws")
	prefix := fs.String("prefix", "", "Redis key `prefix`; default a new one per run (sluice-load-<time>-<random>)")
	if st, done := parse(fs, args, stdout, stderr); done {
		return st
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	var targets []Target
	strat, ok := strategyName(*strategy)
	if !ok {
		return usageError(fs, stderr, "--strategy %q: want absolute or suppressed (abs, sup)", *strategy)
	}
	switch *provider {
	case Local, Redis:
		targets = []Target{{*provider, strat}}
	case "both":
		targets = []Target{{Local, strat}, {Redis, strat}}
	default:
		return usageError(fs, stderr, "--provider %q: want local, redis or both", *provider)
	}
	rate, w, capacity, note, st := limitFlags(fs, stderr, *rateFlag, *window)
	if st != exitOK {
		return st
	}
	*window = w
	switch {
	case *keys < 1 || *keys > maxKeys:
		return usageError(fs, stderr, "--keys %d: want 1 to %d", *keys, maxKeys)
	case *clients < *keys:
		return usageError(fs, stderr, "--clients %d: want at least one per key (--keys %d)", *clients, *keys)
	case *clients > maxClients:
		return usageError(fs, stderr, "--clients %d: want at most %d", *clients, maxClients)
	case *instances < 1 || *instances > maxInstances:
		return usageError(fs, stderr, "--instances %d: want 1 to %d", *instances, maxInstances)
	case *duration <= 0:
		return usageError(fs, stderr, "--duration %v: want more than 0", *duration)
	case *cost < 1:
		return usageError(fs, stderr, "--cost %d: want at least 1", *cost)
	case !(*offer > 0) || math.IsInf(*offer, 0):
		return usageError(fs, stderr, "--offer %v: want a number more than 0", *offer)
	}
	if *prefix == "" {
		*prefix = runPrefix("load")
	}
	cfgOpts := []limiter.Option{limiter.WithWindow(*window), limiter.WithHardLimitFactor(*hard), limiter.WithPrefix(*prefix)}
	if *bucket != 0 {
		cfgOpts = append(cfgOpts, limiter.WithBucket(*bucket))
	}
	if _, err := win.NewConfig(cfgOpts...); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if _, err := win.HardCapacity(rate, *window, *hard); err != nil {
		return usageError(fs, stderr, "--rate %s over --window %v with --hard-limit %v: %v", *rateFlag, *window, *hard, err)
	}
	if *cost > capacity {
		return usageError(fs, stderr, "--cost %d can never fit: the capacity is %d units per --window %v at --rate %s, "+
			"so every request would be refused with Never set; lower --cost or raise --rate or --window",
			*cost, capacity, *window, *rateFlag)
	}
	var ks []KeySpec
	for i := range *keys {
		k := KeySpec{
			Name:    fmt.Sprintf("key-%d", i),
			Tier:    "-",
			Rate:    rate,
			Offered: *offer * rate.PerSecondValue() / float64(*cost),
		}
		if *bursts {
			k.BurstEvery, k.BurstLen, k.BurstFactor = 3*time.Second, 500*time.Millisecond, 4
		}
		ks = append(ks, k)
	}
	opts := Options{
		Targets:         targets,
		Keys:            ks,
		Instances:       *instances,
		Clients:         *clients,
		Duration:        *duration,
		Window:          *window,
		WindowNote:      note,
		Bucket:          *bucket,
		HardLimitFactor: *hard,
		Cost:            *cost,
		Seed:            *seed,
		Prefix:          *prefix,
	}
	return workload(ctx, fs, "load", opts, *redisURL, stdout, stderr)
}

// workload connects to Redis when a target needs it, prints what is about
// to run, runs it with the live table, prints the report and returns the
// exit status.
func workload(ctx context.Context, fs *flag.FlagSet, name string, opts Options, redisURL string, stdout, stderr io.Writer) int {
	where := ""
	needsRedis := false
	for _, t := range opts.Targets {
		needsRedis = needsRedis || t.Backend == Redis
	}
	var r *redisTarget
	if needsRedis && opts.NewRedis == nil {
		var err error
		r, err = openRedis(ctx, redisURL)
		if err != nil {
			var ue usageErr
			if errors.As(err, &ue) {
				return usageError(fs, stderr, "%v", err)
			}
			fmt.Fprintln(stderr, plain(fmt.Sprintf("sluice %s: %v", name, err)))
			return exitFailure
		}
		defer r.close()
		opts.NewRedis, where = r.newClient, r.where
		if r.mini != nil {
			opts.RedisTimeout = embeddedTimeout
		}
	}
	opts.Live = isTerminal(stdout)
	if name == "demo" {
		writeDemoIntro(stdout, &opts, where)
	} else {
		writeLoadIntro(stdout, &opts, where)
	}
	rep, err := Run(ctx, opts, stdout)
	if err != nil {
		fmt.Fprintln(stderr, plain(fmt.Sprintf("sluice %s: %v", name, err)))
		return exitFailure
	}
	WriteReport(stdout, rep)
	if redisURL != "" && needsRedis {
		writeKeysNote(ctx, stdout, r, &opts, redisURL)
	}
	status := exitOK
	if n := rep.Errors(); n > 0 {
		first := ""
		for _, p := range rep.Providers {
			if p.FirstError != nil {
				first = p.FirstError.Error()
				break
			}
		}
		fmt.Fprintln(stderr, plain(fmt.Sprintf("sluice %s: %d decisions failed; first: %s", name, n, first)))
		status = exitFailure
	}
	if v := rep.Violations(); len(v) > 0 {
		fmt.Fprintf(stderr, "sluice %s: %d keys admitted more than their limit (see the report)\n", name, len(v))
		status = exitFailure
	}
	return status
}

// writeKeysNote ends a run on a Redis server: it sets the TTL of every key
// the run wrote to W + B from now, and prints where the keys are, when they
// expire and an inspect command for one of them. The run passes its own
// clock to the providers (WithClock), under which every write sets a TTL of
// W + B plus a minute of slack (docs/data-model.md, Expiry); the run's
// clock follows real time, so W + B after the run's end is W + B after its
// last write, the lifetime a key has under Redis TIME.
func writeKeysNote(ctx context.Context, w io.Writer, r *redisTarget, o *Options, redisURL string) {
	cfg, err := win.NewConfig(o.limiterOptions()...)
	if err != nil || r == nil {
		return
	}
	life := cfg.Window + cfg.Bucket
	var names []string
	strat := ""
	for _, t := range o.Targets {
		if t.Backend != Redis {
			continue
		}
		s := key.Absolute
		if t.Strategy == Suppressed {
			s = key.Suppressed
		}
		if strat == "" {
			strat = t.Strategy
		}
		for _, k := range o.Keys {
			if n, err := key.Name(o.Prefix, k.Name, s, key.Hash); err == nil {
				names = append(names, n)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	c := r.newClient()
	defer c.Close()
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, n := range names {
			p.PExpire(ctx, n, life)
		}
		return nil
	})
	fmt.Fprintf(w, "\nThe run's keys are under prefix %s. ", o.Prefix)
	if err != nil {
		fmt.Fprintf(w, "They expire by themselves W + B + 60 s = %v after\n", life+time.Minute)
		fmt.Fprintf(w, "their last write (setting a shorter TTL failed: %s). Look at one:\n", plain(err.Error()))
	} else {
		fmt.Fprintf(w, "They expire by themselves W + B = %v after the\n", life)
		fmt.Fprintf(w, "run's last write, at %s. Look at one before then:\n", time.Now().Add(life).UTC().Format("15:04:05 MST"))
		if life < time.Minute {
			fmt.Fprintf(w, "(That is soon: run again with --window 1m --duration 45s for time to look, and a window filled.)\n")
		}
	}
	bucket := ""
	if o.Bucket != 0 {
		bucket = fmt.Sprintf(" --bucket %v", o.Bucket)
	}
	fmt.Fprintf(w, "  sluice inspect --redis %s --prefix %s --strategy %s --window %v%s %s\n",
		shellURL(redisURL), o.Prefix, strat, o.Window, bucket, o.Keys[0].Name)
}

func writeDemoIntro(w io.Writer, o *Options, where string) {
	fmt.Fprintf(w, "sluice demo: %d application instances share one Redis (%s).\n", o.Instances, where)
	if strings.Contains(where, "miniredis") {
		fmt.Fprintf(w, "(miniredis runs Lua in Go, far slower than Redis: pass --redis URL for real latencies.)\n")
	}
	fmt.Fprintf(w, "%d clients send requests, in bursts, for %d keys through a load balancer that\n", o.Clients, len(o.Keys))
	fmt.Fprintf(w, "picks an instance at random. Each instance has its own limiters and its own\n")
	fmt.Fprintf(w, "Redis client. The same workload runs against three providers side by side:\n")
	fmt.Fprintf(w, "  local absolute     an in-process limiter in each instance\n")
	fmt.Fprintf(w, "  redis absolute     one window per key in Redis, shared by the fleet\n")
	fmt.Fprintf(w, "  redis suppressed   shared too; above the target it admits with falling\n")
	fmt.Fprintf(w, "                     probability, never beyond %g × target\n", o.HardLimitFactor)
	writePolicies(w, o)
	fmt.Fprintf(w, "Running for %s; Ctrl-C stops early with the report so far.\n\n", fmtSeconds(o.Duration))
}

func writeLoadIntro(w io.Writer, o *Options, where string) {
	names := make([]string, len(o.Targets))
	for i, t := range o.Targets {
		names[i] = t.String()
	}
	fmt.Fprintf(w, "sluice load: %s; %d instances, %d clients, %d keys, cost %d",
		strings.Join(names, " and "), o.Instances, o.Clients, len(o.Keys), o.Cost)
	if where != "" {
		fmt.Fprintf(w, "; Redis: %s", where)
	}
	fmt.Fprintln(w, ".")
	writePolicies(w, o)
	fmt.Fprintf(w, "Running for %s; Ctrl-C stops early with the report so far.\n\n", fmtSeconds(o.Duration))
}

// writePolicies lists each key's tier, rate, capacities and offered rate;
// keys that share all of them share a row.
func writePolicies(w io.Writer, o *Options) {
	bucket := o.Bucket
	if c, err := win.NewConfig(o.limiterOptions()...); err == nil {
		bucket = c.Bucket
	}
	suppressed := false
	for _, t := range o.Targets {
		suppressed = suppressed || t.Strategy == Suppressed
	}
	window := o.Window.String()
	if o.WindowNote != "" {
		window = o.WindowNote
	}
	fmt.Fprintf(w, "Policies (window %s, bucket %v):\n", window, bucket)
	g := &grid{indent: "  ", align: "llrll"}
	seen := map[string]bool{}
	same := func(a, b KeySpec) bool { return a.Tier == b.Tier && a.Rate == b.Rate && a.Offered == b.Offered }
	for i, k := range o.Keys {
		if seen[k.Name] {
			continue
		}
		var names []string
		for _, k2 := range o.Keys[i:] {
			if same(k, k2) {
				names = append(names, k2.Name)
				seen[k2.Name] = true
			}
		}
		if len(names) > 3 {
			names = append(names[:2], "…", names[len(names)-1])
		}
		c, _ := limiter.Capacity(k.Rate, o.Window)
		capacity := fmt.Sprintf("capacity %d per window", c)
		if suppressed {
			h, _ := win.HardCapacity(k.Rate, o.Window, o.HardLimitFactor)
			capacity += fmt.Sprintf(" (hard %d)", h)
		}
		g.add(strings.Join(names, ", "), k.Tier, k.Rate.String(), capacity,
			offered(k, o.Cost))
	}
	g.write(w)
}

// strategyName reads a strategy as the commands accept it: absolute or
// suppressed, or inspect's short forms abs and sup.
func strategyName(s string) (string, bool) {
	switch s {
	case Absolute, key.Absolute:
		return Absolute, true
	case Suppressed, key.Suppressed:
		return Suppressed, true
	}
	return "", false
}

// offered describes the traffic offered to k, in units per second.
func offered(k KeySpec, cost int64) string {
	s := fmt.Sprintf("offered %s/s", fmtRate(k.Offered*float64(cost)))
	if k.BurstFactor > 1 && k.BurstLen > 0 {
		s += fmt.Sprintf(", %g× in bursts", k.BurstFactor)
	}
	return s
}

// runPrefix is a Redis key prefix no other run uses, so reruns against a
// real server do not mix.
func runPrefix(cmd string) string {
	var b [3]byte
	rand.Read(b[:])
	return fmt.Sprintf("sluice-%s-%s-%s", cmd, time.Now().UTC().Format("20060102T150405"), hex.EncodeToString(b[:]))
}

// usageErr is a bad --redis URL: a usage error, not a failure.
type usageErr struct{ error }

// embeddedTimeout bounds each Redis call of a run on the embedded
// miniredis, instead of the library's 250 ms. miniredis runs Lua in Go,
// one command at a time: 90 callers (30 clients, 3 providers) queueing on
// it, on a loaded machine or under the race detector, wait longer than
// 250 ms, and a call that times out is answered by the local fallback,
// which the fleet-wide figures of the report do not cover. The run
// measures the strategies, not miniredis; a real server (--redis) keeps
// the default.
const embeddedTimeout = 5 * time.Second

// redisTarget is the Redis a run uses: an embedded miniredis or a server.
type redisTarget struct {
	opts  *redis.Options
	where string
	mini  *miniredis.Miniredis
}

// openRedis starts an embedded miniredis (url "") or checks that the server
// at url answers PING.
func openRedis(ctx context.Context, url string) (*redisTarget, error) {
	if url == "" {
		mr, err := miniredis.Run()
		if err != nil {
			return nil, fmt.Errorf("cannot start the embedded Redis: %w", err)
		}
		return &redisTarget{
			opts:  &redis.Options{Addr: mr.Addr(), MaxRetries: -1},
			where: "an embedded miniredis at " + mr.Addr(),
			mini:  mr,
		}, nil
	}
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, usageErr{fmt.Errorf("--redis %q: %w", url, err)}
	}
	// An increment is never retried: a retried call that did count the
	// first time would count twice.
	o.MaxRetries = -1
	if err := ping(ctx, o); err != nil {
		return nil, err
	}
	return &redisTarget{opts: o, where: "the Redis server at " + o.Addr}, nil
}

func ping(ctx context.Context, o *redis.Options) error {
	c := redis.NewClient(o)
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cannot reach Redis at %s: %v", o.Addr, err)
	}
	return nil
}

func (r *redisTarget) newClient() *redis.Client {
	o := *r.opts
	return redis.NewClient(&o)
}

func (r *redisTarget) close() {
	if r.mini != nil {
		r.mini.Close()
	}
}

// shellURL is url as it may be printed: credentials are replaced by a
// placeholder.
func shellURL(url string) string {
	if i := strings.Index(url, "@"); i >= 0 {
		if j := strings.Index(url, "://"); j >= 0 && j < i {
			return url[:j+3] + "USER:PASSWORD" + url[i:]
		}
	}
	return url
}
