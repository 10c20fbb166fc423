package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/config"
	"github.com/sluice-go/sluice/internal/redisx"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

func inspectCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("inspect",
		"Shows what Redis holds for KEY: its buckets, running totals, stored capacity\n"+
			"and TTL, read with one MULTI of TIME, PTTL and HGETALL. It changes nothing.\n"+
			"The fields are described in docs/data-model.md.")
	redisURL := fs.String("redis", "", "the Redis server, as a `URL` (redis://[user:password@]host:port[/db]); required")
	prefix := fs.String("prefix", config.DefaultPrefix, "the limiter's key `prefix` (WithPrefix)")
	strategy := fs.String("strategy", Absolute, "[absolute|suppressed] the limiter's strategy (abs and sup work too)")
	window := fs.Duration("window", 0, "the limiter's window, to tell live buckets from expired ones (optional)")
	bucket := fs.Duration("bucket", 0, "the limiter's bucket (WithBucket), with --window; default window/100, at least 1ms")
	if st, done := parse(fs, args, stdout, stderr); done {
		return st
	}
	switch {
	case fs.NArg() == 0:
		return usageError(fs, stderr, "missing KEY")
	case fs.NArg() > 1 && strings.HasPrefix(fs.Arg(1), "-"):
		return usageError(fs, stderr, "%s after KEY %q: flags go before KEY (sluice inspect [flags] KEY)", fs.Arg(1), fs.Arg(0))
	case fs.NArg() > 1:
		return usageError(fs, stderr, "one KEY, got %d arguments (quote a key with spaces)", fs.NArg())
	case *redisURL == "":
		return usageError(fs, stderr, "--redis is required")
	case *window < 0 || *window%time.Millisecond != 0:
		return usageError(fs, stderr, "--window %v: want a positive whole number of milliseconds", *window)
	case *bucket != 0 && *window == 0:
		return usageError(fs, stderr, "--bucket needs --window")
	}
	// A bucket is live while its age is below W + B (docs/algorithms.md,
	// The window guarantee).
	var span time.Duration
	if *window > 0 {
		opts := []limiter.Option{limiter.WithWindow(*window)}
		if *bucket != 0 {
			opts = append(opts, limiter.WithBucket(*bucket))
		}
		cfg, err := config.New(opts...)
		if err != nil {
			return usageError(fs, stderr, "--window %v --bucket %v: %v", *window, *bucket, err)
		}
		span = cfg.Window + cfg.Bucket
	}
	strat := key.Absolute
	switch name, ok := strategyName(*strategy); {
	case !ok:
		return usageError(fs, stderr, "--strategy %q: want absolute or suppressed (abs, sup)", *strategy)
	case name == Suppressed:
		strat = key.Suppressed
	}
	if err := config.ValidatePrefix(*prefix); err != nil {
		return usageError(fs, stderr, "--prefix: %v", err)
	}
	k := fs.Arg(0)
	name, err := key.Name(*prefix, k, strat, key.Hash)
	if err != nil {
		return usageError(fs, stderr, "KEY: %v", err)
	}
	o, err := redis.ParseURL(*redisURL)
	if err != nil {
		return usageError(fs, stderr, "--redis %q: %v", *redisURL, err)
	}
	o.MaxRetries = -1
	if err := ping(ctx, o); err != nil {
		fmt.Fprintln(stderr, plain(fmt.Sprintf("sluice inspect: %v", err)))
		return exitFailure
	}
	c := redis.NewClient(o)
	defer c.Close()
	snap, err := readHash(ctx, c, name)
	if err != nil {
		fmt.Fprintln(stderr, plain(fmt.Sprintf("sluice inspect: %s: %v", name, err)))
		return exitFailure
	}
	if len(snap.fields) == 0 {
		writeMissing(ctx, stdout, c, k, name, *prefix, strat)
		return exitOK
	}
	writeInspect(stdout, k, name, strat, *window, span, snap)
	return exitOK
}

// maxScan bounds the keys the search for a missing key's hashes under other
// prefixes may read: inspect must stay cheap on a large database.
const maxScan = 100_000

// writeMissing reports a key with no hash under the prefix and strategy
// asked for, and what does exist for it: its hash under the other strategy,
// or its hashes under other prefixes (found with a SCAN bounded by
// maxScan keys), each with the flags that show it.
func writeMissing(ctx context.Context, w io.Writer, c *redis.Client, k, name, prefix, strat string) {
	fmt.Fprintf(w, "%s: no such key (never written, expired, or reset)\n", name)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var found []key.Parsed
	other := map[string]string{key.Absolute: key.Suppressed, key.Suppressed: key.Absolute}[strat]
	if n, err := key.Name(prefix, k, other, key.Hash); err == nil && c.Exists(ctx, n).Val() == 1 {
		found = append(found, key.Parsed{Prefix: prefix, Key: k, Strategy: other, Suffix: key.Hash})
	}
	complete := true
	if len(found) == 0 {
		pattern := "*:{" + globEscape(key.Escape(k)) + "}:*"
		var cursor uint64
		seen := 0
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				complete = false
				break
			}
			seen += 1000
			for _, rk := range keys {
				p, err := key.Parse(rk)
				if err == nil && p.Key == k && p.Suffix == key.Hash && p.Limit == "" && len(found) < 5 {
					found = append(found, p)
				}
			}
			if cursor = next; cursor == 0 {
				break
			}
			if seen >= maxScan || len(found) >= 5 {
				complete = false
				break
			}
		}
	}
	if len(found) == 0 {
		if complete {
			fmt.Fprintf(w, "  No hash of key %q under any prefix or strategy.\n", k)
		} else {
			fmt.Fprintf(w, "  No hash of key %q under the other strategy; the search under other prefixes stopped after %d keys.\n", k, maxScan)
		}
		return
	}
	fmt.Fprintf(w, "  Key %q has hashes elsewhere:\n", k)
	for _, p := range found {
		st := Absolute
		if p.Strategy == key.Suppressed {
			st = Suppressed
		}
		fmt.Fprintf(w, "    --prefix %s --strategy %s\n", p.Prefix, st)
	}
}

// globEscape escapes the characters SCAN MATCH gives meaning to.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// snapshot is what inspect read, in one transaction.
type snapshot struct {
	now    int64 // Redis TIME, ms
	pttl   time.Duration
	fields map[string]string
}

func readHash(ctx context.Context, c *redis.Client, name string) (*snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var tm *redis.TimeCmd
	var ttl *redis.DurationCmd
	var all *redis.MapStringStringCmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		tm = p.Time(ctx)
		ttl = p.PTTL(ctx, name)
		all = p.HGetAll(ctx, name)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &snapshot{now: tm.Val().UnixMilli(), pttl: ttl.Val(), fields: all.Val()}, nil
}

// bucket is one bucket field of a hash, with its declined count (suppressed).
type bucket struct {
	start, count, declined int64
}

// hashState is a limiter hash taken apart (docs/data-model.md).
type hashState struct {
	buckets []bucket          // oldest first
	meta    map[string]int64  // c, u, o, n, nc; suppressed also x, nd, hc, f, ft
	cursor  []int64           // suppressed cursor: rs, rb, ra, rl, ro; nil for none
	other   map[string]string // fields this version does not know
}

// The packed meta fields (docs/data-model.md): the names of their values.
var (
	absMeta = []string{"c", "u", "o", "n", "nc"}       // absolute "m"
	absZero = []string{"c", "u", "o", "n", "nc", "z"}  // absolute single "m" while a bucket may hold 0
	supMeta = []string{"u", "x", "o", "n", "nc", "nd"} // suppressed "m"
	supRate = []string{"c", "hc", "f", "ft"}           // suppressed "k"
)

// parseInts reads want space-separated decimal integers.
func parseInts(s string, want int) ([]int64, bool) {
	parts := strings.Fields(s)
	if len(parts) != want {
		return nil, false
	}
	out := make([]int64, want)
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

func parseHash(fields map[string]string) hashState {
	h := hashState{meta: map[string]int64{}, other: map[string]string{}}
	byStart := map[int64]*bucket{}
	get := func(s int64) *bucket {
		b := byStart[s]
		if b == nil {
			b = &bucket{start: s}
			byStart[s] = b
		}
		return b
	}
	unpack := func(v string, names []string) bool {
		ns, ok := parseInts(v, len(names))
		for i, name := range names {
			if ok {
				h.meta[name] = ns[i]
			}
		}
		return ok
	}
	var kcursor []int64
	for f, v := range fields {
		switch f {
		case "m": // absolute "<c> <u> <o> <n> <nc>", suppressed "<u> <x> <o> <n> <nc> <nd>"
			// six values: a suppressed "m" beside "k", else an absolute one with z
			if _, sup := fields["k"]; unpack(v, absMeta) || !sup && unpack(v, absZero) || sup && unpack(v, supMeta) {
				continue
			}
		case "k": // suppressed "<c> <hc> <f> <ft>", on a single hash perhaps " <rd> <rb> <ra> <rl>"
			if unpack(v, supRate) {
				continue
			}
			if ns, ok := parseInts(v, len(supRate)+4); ok {
				for i, name := range supRate {
					h.meta[name] = ns[i]
				}
				kcursor = ns[len(supRate):] // rs - o: resolved once "m" is read
				continue
			}
		case "r": // an earlier layout's RetryAfter cursor "<rs> <rb> <ra> <rl> <ro>"
			if ns, ok := parseInts(v, 5); ok {
				h.cursor = ns
				continue
			}
		}
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil:
			h.other[f] = v
		case isDigits(f):
			s, _ := strconv.ParseInt(f, 10, 64)
			get(s).count, _ = redisx.BucketValue(n)
		case len(f) > 1 && f[0] == 'd' && isDigits(f[1:]):
			s, _ := strconv.ParseInt(f[1:], 10, 64)
			get(s).declined = n
		default:
			h.other[f] = v
		}
	}
	if o, ok := h.meta["o"]; ok && kcursor != nil {
		h.cursor = []int64{o + kcursor[0], kcursor[1], kcursor[2], kcursor[3], o}
	}
	// The newest bucket lives in the meta values n, nc and (suppressed) nd.
	if n, ok := h.meta["n"]; ok {
		if nc, ok := h.meta["nc"]; ok {
			get(n).count += nc
		}
		if nd, ok := h.meta["nd"]; ok {
			get(n).declined += nd
		}
	}
	for _, b := range byStart {
		h.buckets = append(h.buckets, *b)
	}
	sort.Slice(h.buckets, func(i, j int) bool { return h.buckets[i].start < h.buckets[j].start })
	return h
}

func isDigits(s string) bool {
	if s == "" || len(s) > 18 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// writeInspect prints what s holds. With window > 0 it marks each bucket
// live (age below span, W + B) or expired.
func writeInspect(w io.Writer, k, name, strat string, window, span time.Duration, s *snapshot) {
	fmt.Fprintf(w, "%s\n", name)
	strategyName := Absolute
	if strat == key.Suppressed {
		strategyName = Suppressed
	}
	fmt.Fprintf(w, "  key %q, %s strategy; Redis time %d ms (%s)\n", k, strategyName, s.now,
		time.UnixMilli(s.now).UTC().Format("2006-01-02 15:04:05.000 MST"))
	switch {
	case s.pttl >= 0:
		fmt.Fprintf(w, "  TTL %v (deleted by Redis unless written again)\n", s.pttl)
	case s.pttl == -1:
		fmt.Fprintf(w, "  TTL none: the key never expires by itself (not written by sluice?)\n")
	}
	h := parseHash(s.fields)
	ago := func(ms int64) string {
		return fmtAge(time.Duration(s.now-ms) * time.Millisecond)
	}
	g := &grid{indent: "  ", align: "llrl"}
	meta := func(f, what, extra string) {
		if v, ok := h.meta[f]; ok {
			g.add(f, what, itoa(v), extra)
		}
	}
	var total, declined int64
	for _, b := range h.buckets {
		total += b.count
		declined += b.declined
	}
	if strat == key.Absolute {
		meta("c", "stored capacity", "of the latest Inc")
		meta("u", "units in stored buckets", fmt.Sprintf("buckets sum to %d", total))
	} else {
		meta("c", "soft capacity S", "of the latest Inc")
		meta("hc", "hard capacity H", "of the latest Inc")
		meta("u", "units offered in stored buckets", fmt.Sprintf("buckets sum to %d", total))
		meta("x", "units declined", fmt.Sprintf("buckets sum to %d", declined))
		if u, ok := h.meta["u"]; ok {
			g.add("", "units accepted", itoa(u-h.meta["x"]), "u − x")
		}
	}
	if v, ok := h.meta["o"]; ok {
		meta("o", "oldest bucket start", ago(v)+" ago")
	}
	if v, ok := h.meta["n"]; ok {
		meta("n", "newest bucket start", ago(v)+" ago")
	}
	meta("nc", "newest bucket count", "")
	meta("nd", "newest bucket declined", "")
	if v, ok := h.meta["z"]; ok {
		meta("z", "newest bucket that may hold 0", ago(v)+" ago")
	}
	if v, ok := h.meta["f"]; ok {
		meta("f", "cached factor (ppm)", fmt.Sprintf("%.6f", float64(v)/1e6))
	}
	if v, ok := h.meta["ft"]; ok {
		meta("ft", "factor computed at", ago(v)+" ago")
	}
	if r := h.cursor; r != nil {
		g.add("r", "RetryAfter cursor", itoa(r[0]), fmt.Sprintf("%d accepted before it, %d in it; valid while o = %d", r[1], r[2], r[4]))
	}
	g.write(w)
	for f, v := range h.other {
		fmt.Fprintf(w, "  field %q = %q (unknown to this version)\n", f, v)
	}

	plural := "s"
	if len(h.buckets) == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "\n  %d bucket%s, oldest first", len(h.buckets), plural)
	if window > 0 {
		fmt.Fprintf(w, " (live while age < W + B = %v, window %v)", span, window)
	} else {
		fmt.Fprintf(w, " (add --window to tell live buckets from expired ones)")
	}
	fmt.Fprintln(w, ":")
	g = &grid{indent: "    ", align: "rrrrrl"}
	if strat == key.Absolute {
		g.align = "rrrl"
		g.add("start (ms)", "age", "count", "")
	} else {
		g.add("start (ms)", "age", "offered", "declined", "accepted", "")
	}
	var live int64
	for _, b := range h.buckets {
		state := ""
		if window > 0 {
			if s.now-b.start < span.Milliseconds() {
				state = "live"
				live += b.count - b.declined
			} else {
				state = "expired"
			}
		}
		if strat == key.Absolute {
			g.add(itoa(b.start), ago(b.start), itoa(b.count), state)
		} else {
			g.add(itoa(b.start), ago(b.start), itoa(b.count), itoa(b.declined), itoa(b.count-b.declined), state)
		}
	}
	g.write(w)
	if window > 0 {
		what := "units admitted"
		if strat == key.Suppressed {
			what = "units accepted"
		}
		fmt.Fprintf(w, "\n  %d %s in the live window", live, what)
		if c, ok := h.meta["c"]; ok {
			fmt.Fprintf(w, " of capacity %d", c)
		}
		fmt.Fprintln(w, ".")
	}
}

// fmtAge formats a non-negative age with millisecond precision; a negative
// one (a bucket in Redis' future: a writer with a clock ahead) is "-…".
func fmtAge(d time.Duration) string {
	if d < 0 {
		return "-" + fmtAge(-d)
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s"
}
