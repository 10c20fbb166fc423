package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	win "github.com/sluice-go/sluice/internal/window"

	"github.com/sluice-go/sluice/internal/redisprov"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

func inspectCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("inspect",
		"Shows every state Redis holds for KEY under the prefix: its single limits of\n"+
			"each strategy and every limit of every set, each with the window and bucket it\n"+
			"records, its usage, remaining life, buckets, running totals, stored capacity\n"+
			"and TTL, each read with one MULTI of TIME, PTTL and HGETALL. It changes nothing.\n"+
			"The fields are described in docs/data-model.md.")
	redisURL := fs.String("redis", "", "the Redis server, as a `URL` (redis://[user:password@]host:port[/db]); required")
	prefix := fs.String("prefix", settings.DefaultPrefix, "the limiter's key `prefix` (WithPrefix)")
	strategy := fs.String("strategy", "", "[absolute|suppressed] only the states of this strategy (abs and sup work too); default both")
	limit := fs.String("limit", "", "only the limit called `NAME` of the key's sets")
	window := fs.Duration("window", 0, "a window to judge live buckets by instead of the one each hash records (optional)")
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
		cfg, err := win.NewConfig(opts...)
		if err != nil {
			return usageError(fs, stderr, "--window %v --bucket %v: %v", *window, *bucket, err)
		}
		span = cfg.Window + cfg.Bucket
	}
	strats := []string{key.Absolute, key.Suppressed}
	if *strategy != "" {
		switch name, ok := strategyName(*strategy); {
		case !ok:
			return usageError(fs, stderr, "--strategy %q: want absolute or suppressed (abs, sup)", *strategy)
		case name == Suppressed:
			strats = strats[1:]
		default:
			strats = strats[:1]
		}
	}
	if err := win.ValidatePrefix(*prefix); err != nil {
		return usageError(fs, stderr, "--prefix: %v", err)
	}
	k := fs.Arg(0)
	name, err := key.Name(*prefix, k, strats[0], key.Hash)
	if err != nil {
		return usageError(fs, stderr, "KEY: %v", err)
	}
	if *limit != "" {
		if _, err := key.LimitName(*prefix, k, strats[0], *limit); err != nil {
			return usageError(fs, stderr, "--limit: %v", err)
		}
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
	names, complete, err := keyStates(ctx, c, *prefix, k, strats, *limit)
	if err != nil {
		fmt.Fprintln(stderr, plain(fmt.Sprintf("sluice inspect: %v", err)))
		return exitFailure
	}
	shown := 0
	for _, n := range names {
		snap, err := readHash(ctx, c, n)
		if err != nil {
			fmt.Fprintln(stderr, plain(fmt.Sprintf("sluice inspect: %s: %v", n, err)))
			return exitFailure
		}
		if len(snap.fields) == 0 {
			continue
		}
		if shown > 0 {
			fmt.Fprintln(stdout)
		}
		shown++
		p, _ := key.Parse(n)
		writeInspect(stdout, k, n, p.Strategy, p.Limit, *window, span, snap)
	}
	if !complete {
		fmt.Fprintf(stdout, "\n(the search for the key's sets stopped after %d keys: name one with --limit)\n", maxSetScan)
	}
	if shown == 0 {
		if *limit != "" {
			name, _ = key.LimitName(*prefix, k, strats[0], *limit)
		}
		writeMissing(ctx, stdout, c, k, name, *prefix, strats[0])
	}
	return exitOK
}

// maxSetScan bounds the keys the search for a key's set limits may read.
const maxSetScan = 1_000_000

// keyStates returns the Redis keys that may hold a state of k under prefix
// for the strategies strats: with limit, that limit of a set; else the
// single hashes and the set limits' hashes that SCAN MATCH
// <prefix>:{<k>}:<strategy>:h:* finds (complete false when it stopped
// after maxSetScan keys).
func keyStates(ctx context.Context, c *redis.Client, prefix, k string, strats []string, limit string) ([]string, bool, error) {
	var names []string
	for _, st := range strats {
		if limit != "" {
			n, err := key.LimitName(prefix, k, st, limit)
			if err != nil {
				return nil, false, err
			}
			names = append(names, n)
			continue
		}
		n, err := key.Name(prefix, k, st, key.Hash)
		if err != nil {
			return nil, false, err
		}
		names = append(names, n)
	}
	if limit != "" {
		return names, true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	complete := true
	for _, st := range strats {
		single, _ := key.Name(prefix, k, st, key.Hash)
		pattern := globEscape(single) + ":*"
		var sets []string
		var cursor uint64
		for seen := 0; ; seen += 1000 {
			keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return nil, false, err
			}
			for _, rk := range keys {
				if p, err := key.Parse(rk); err == nil && p.Key == k && p.Limit != "" {
					sets = append(sets, rk)
				}
			}
			if cursor = next; cursor == 0 {
				break
			}
			if seen >= maxSetScan {
				complete = false
				break
			}
		}
		sort.Strings(sets)
		names = append(names, slices.Compact(sets)...)
	}
	return names, complete, nil
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
	meta    map[string]int64  // c, u, o, n, nc; suppressed also x, nd, hc, f, ft; a set's t
	cursor  []int64           // suppressed cursor: rs, rb, ra, rl, ro; nil for none
	record  string            // the record "v" as stored, "" for none
	w, b    int64             // the window and bucket it records, ms; 0 when none or unread
	other   map[string]string // fields this version does not know
}

// The packed meta fields (docs/data-model.md): the names of their values,
// as the layouts of internal/redisprov give them.
var (
	absMeta = redisprov.AbsMeta.Names     // absolute "m"
	absZero = redisprov.AbsMetaZero.Names // absolute single "m" while a bucket may hold 0
	absSet  = redisprov.AbsSetMeta.Names  // absolute set limit's "m"
	supSetK = redisprov.SupSetRate.Names  // suppressed set limit's "k"
	supMeta = redisprov.SupMeta.Names     // suppressed "m"
	supRate = redisprov.SupRate.Names     // suppressed "k"
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

func parseHash(fields map[string]string, set bool) hashState {
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
			// six values: a suppressed "m" beside "k", else an absolute one
			// with z (a single hash) or t (a set's limit)
			six := absZero
			if set {
				six = absSet
			}
			if _, sup := fields["k"]; unpack(v, absMeta) || !sup && unpack(v, six) || sup && unpack(v, supMeta) {
				continue
			}
		case "k": // suppressed "<c> <hc> <f> <ft>", on a single hash perhaps " <rd> <rb> <ra> <rl>", on a set's " <t>"
			if unpack(v, supRate) || set && unpack(v, supSetK) {
				continue
			}
			if ns, ok := parseInts(v, len(supRate)+len(redisprov.SupCursor.Names)); ok {
				for i, name := range supRate {
					h.meta[name] = ns[i]
				}
				kcursor = ns[len(supRate):] // rs - o: resolved once "m" is read
				continue
			}
		case "v": // the record, "<a|s><layout> <W> <B>"
			h.record = v
			if f := strings.Fields(v); len(f) == 3 && (f[0] == "a2" || f[0] == "s2") {
				w, err1 := strconv.ParseInt(f[1], 10, 64)
				b, err2 := strconv.ParseInt(f[2], 10, 64)
				if err1 == nil && err2 == nil {
					h.w, h.b = w, b
				}
			}
			continue
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
			get(s).count, _ = redisprov.BucketValue(n)
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

// writeInspect prints what s holds, the hash name of k's single limit of
// strategy strat or of its set limit called limit. It judges buckets live
// (age below span, W + B) or expired by window when window > 0, else by the
// window the hash records (a set's limit without a record: its TTL span t).
func writeInspect(w io.Writer, k, name, strat, limit string, window, span time.Duration, s *snapshot) {
	fmt.Fprintf(w, "%s\n", name)
	strategyName := Absolute
	if strat == key.Suppressed {
		strategyName = Suppressed
	}
	what := "single limit"
	if limit != "" {
		what = fmt.Sprintf("limit %q of a set", limit)
	}
	fmt.Fprintf(w, "  key %q, %s, %s strategy; Redis time %d ms (%s)\n", k, what, strategyName, s.now,
		time.UnixMilli(s.now).UTC().Format("2006-01-02 15:04:05.000 MST"))
	h := parseHash(s.fields, limit != "")
	switch {
	case h.w > 0:
		fmt.Fprintf(w, "  record %q: window %v, bucket %v\n", h.record, time.Duration(h.w)*time.Millisecond, time.Duration(h.b)*time.Millisecond)
		if window == 0 {
			window, span = time.Duration(h.w)*time.Millisecond, time.Duration(h.w+h.b)*time.Millisecond
		}
	case h.record != "":
		fmt.Fprintf(w, "  record %q: another layout, which this version does not read\n", h.record)
	case h.meta["t"] > 0:
		fmt.Fprintf(w, "  no record (written before it): W + B = %v by the set's TTL span t\n", time.Duration(h.meta["t"])*time.Millisecond)
		if window == 0 {
			window = time.Duration(h.meta["t"]) * time.Millisecond
			span = window
		}
	default:
		fmt.Fprintf(w, "  no record (written before it): window unknown; add --window\n")
	}
	switch {
	case s.pttl >= 0:
		fmt.Fprintf(w, "  TTL %v (deleted by Redis unless written again)\n", s.pttl)
	case s.pttl == -1:
		fmt.Fprintf(w, "  TTL none: the key never expires by itself (not written by sluice?)\n")
	}
	if n, ok := h.meta["n"]; ok && window > 0 {
		if life := n + span.Milliseconds() - s.now; life > 0 {
			fmt.Fprintf(w, "  life %v: the newest bucket dies then, and the state with it\n", time.Duration(life)*time.Millisecond)
		} else {
			fmt.Fprintf(w, "  life over: no live bucket (the key is absent to every call)\n")
		}
	}
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
	if v, ok := h.meta["t"]; ok {
		meta("t", "TTL span (ms)", fmt.Sprintf("the hash expires %v after its newest bucket opened", time.Duration(v)*time.Millisecond))
	}
	if v, ok := h.meta["f"]; ok {
		meta("f", "cached factor (ppm)", fmt.Sprintf("%.6f", float64(v)/1e6))
	}
	if v, ok := h.meta["ft"]; ok {
		meta("ft", "factor computed at", factorAge(v, h.meta, ago))
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

// factorAge says when a suppressed hash's cached factor was computed, ft
// ms: "none cached" for ft 0, which the scripts write when no factor is
// cached (not an instant), else its age against the key's own time, the
// start of its newest bucket n (a hash written under a limiter's clock
// keeps that clock's instants, whatever Redis TIME reads), then its age
// against Redis TIME.
func factorAge(ft int64, meta map[string]int64, ago func(ms int64) string) string {
	if ft == 0 {
		return "none cached"
	}
	n, ok := meta["n"]
	if !ok {
		return ago(ft) + " ago"
	}
	rel := "after"
	d := time.Duration(ft-n) * time.Millisecond
	if d < 0 {
		rel, d = "before", -d
	}
	return fmt.Sprintf("%s %s the newest bucket opened; %s ago", fmtAge(d), rel, ago(ft))
}

// fmtAge formats a non-negative age with millisecond precision; a negative
// one (a bucket in Redis' future: a writer with a clock ahead) is "-…".
func fmtAge(d time.Duration) string {
	if d < 0 {
		return "-" + fmtAge(-d)
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s"
}
