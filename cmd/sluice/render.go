package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// isTerminal reports whether w is a terminal, where the live table is
// redrawn in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// grid lays out rows of cells in columns two spaces apart, each line
// indented. align[i] is 'l' for a column aligned left; other columns are
// aligned right.
type grid struct {
	indent string
	align  string
	rows   [][]string
}

func (g *grid) add(cells ...string) { g.rows = append(g.rows, cells) }

func (g *grid) lines() []string {
	var width []int
	for _, r := range g.rows {
		for i, c := range r {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var out []string
	for _, r := range g.rows {
		var b strings.Builder
		b.WriteString(g.indent)
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < len(g.align) && g.align[i] == 'l' {
				b.WriteString(c)
				if i < len(r)-1 {
					b.WriteString(pad)
				}
			} else {
				b.WriteString(pad)
				b.WriteString(c)
			}
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}

func (g *grid) write(w io.Writer) {
	for _, l := range g.lines() {
		fmt.Fprintln(w, l)
	}
}

// row is one provider's line of the live table.
type row struct {
	name string
	Counts
	p50, p99 time.Duration
}

// table is the live table: every tick, one line per provider with the
// requests of the last interval. On a terminal it is redrawn in place
// (ANSI cursor up and erase line); elsewhere each tick appends its lines.
type table struct {
	w     io.Writer
	live  bool
	names []string
	drawn int // lines drawn by the previous live frame
}

func newTable(w io.Writer, live bool, names []string) *table {
	return &table{w: w, live: live, names: names}
}

// grid lays out a frame: the header, a wide sample row that fixes the
// column widths so that frames line up with each other, and the rows. Only
// the appended (not live) table has a time column: the live one shows the
// time in its title.
func (t *table) grid(rows []row, elapsed string) *grid {
	g := &grid{align: "l"}
	cells := func(tm string, rest ...string) []string {
		if t.live {
			return rest
		}
		return append([]string{tm}, rest...)
	}
	if !t.live {
		g.align = "ll"
	}
	g.add(cells("time", "provider", "offered", "allowed", "rejected", "suppressed", "p50", "p99", "")...)
	name := 0
	for _, n := range t.names {
		name = max(name, len(n))
	}
	g.add(cells("00000s", strings.Repeat(" ", name), "0000000", "0000000", "0000000", "0000000", "000.0ms", "000.0ms", "")...)
	for _, r := range rows {
		errs := ""
		if r.Errors > 0 {
			errs = fmt.Sprintf("errors %d", r.Errors)
		}
		g.add(cells(elapsed, r.name, itoa(r.Offered), itoa(r.Allowed), itoa(r.Rejected), itoa(r.Suppressed),
			fmtLatency(r.p50), fmtLatency(r.p99), errs)...)
	}
	return g
}

func (t *table) header() {
	if t.live {
		return
	}
	fmt.Fprintln(t.w, "Requests decided in each second:")
	fmt.Fprintln(t.w, t.grid(nil, "").lines()[0])
}

func (t *table) frame(elapsed, total time.Duration, rows []row) {
	lines := t.grid(rows, fmtSeconds(elapsed)).lines()
	lines = append(lines[:1], lines[2:]...) // drop the sample row
	if !t.live {
		for _, l := range lines[1:] {
			fmt.Fprintln(t.w, l)
		}
		return
	}
	var b strings.Builder
	if t.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", t.drawn)
	}
	all := append([]string{fmt.Sprintf("%s of %s — requests decided in the last second:", fmtSeconds(elapsed), fmtSeconds(total))}, lines...)
	for _, l := range all {
		b.WriteString("\r\x1b[2K")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	io.WriteString(t.w, b.String())
	t.drawn = len(all)
}

func (t *table) end() { fmt.Fprintln(t.w) }

// WriteReport writes the final report: totals per provider, then the
// accuracy of every key.
func WriteReport(w io.Writer, r *Report) {
	if r.Interrupted {
		fmt.Fprintf(w, "Interrupted after %s: the report so far.\n\n", fmtSeconds(r.Elapsed))
	}
	fmt.Fprintf(w, "Totals over %s (%d instances, %d clients, window %v, bucket %v, cost %d per request):\n",
		fmtSeconds(r.Elapsed), r.Instances, r.Clients, r.Window, r.Bucket, r.Cost)
	g := &grid{indent: "  ", align: "l"}
	g.add("provider", "offered", "allowed", "rejected", "suppressed", "errors", "p50", "p99")
	for _, p := range r.Providers {
		c := p.Counts
		g.add(p.Target.String(), itoa(c.Offered), itoa(c.Allowed), itoa(c.Rejected), itoa(c.Suppressed),
			itoa(c.Errors), fmtLatency(p.P50), fmtLatency(p.P99))
	}
	g.write(w)
	for _, p := range r.Providers {
		if p.FirstError != nil {
			fmt.Fprintf(w, "  %v: first error: %v\n", p.Target, p.FirstError)
		}
		if n := p.Counts.Degraded; n > 0 {
			fmt.Fprintf(w, "  %v: %d decisions came from the local fallback, not Redis (Redis failed or\n"+
				"  did not answer within the timeout); each instance counts those alone, so the\n"+
				"  fleet-wide bound does not hold for them (docs/operations.md, When Redis fails).\n", p.Target, n)
		}
	}

	span := r.Window.String()
	fmt.Fprintf(w, "\nAccuracy: for each key, the most units admitted in any window of %s (any span\n", span)
	fmt.Fprintf(w, "[t, t + %s)), counted exactly at the millisecond each provider decided at. No\n", span)
	fmt.Fprintf(w, "window of %s may hold more than the capacity (the hard one for the suppressed\n", span)
	fmt.Fprintf(w, "strategy): fleet-wide through Redis, per instance for local limiters. A unit\n")
	fmt.Fprintf(w, "counts for at least %s and at most %s (W + B), so a saturated key still\n", span, r.Window+r.Bucket)
	fmt.Fprintf(w, "admits, on average, at least %.1f %% of its capacity per window\n",
		100*float64(r.Window)/float64(r.Window+r.Bucket))
	fmt.Fprintf(w, "(docs/algorithms.md, \"The window guarantee\").\n")

	for i := range r.Providers {
		p := &r.Providers[i]
		fmt.Fprintln(w)
		switch p.Target {
		case Target{Redis, Absolute}:
			writeRedisAbsolute(w, r, p, span)
		case Target{Local, Absolute}:
			writeLocalAbsolute(w, r, p, span)
		default:
			writeSuppressed(w, r, p, span)
		}
	}
	if v := r.Violations(); len(v) > 0 {
		fmt.Fprintln(w)
		for _, s := range v {
			fmt.Fprintf(w, "OVER THE LIMIT: %s\n", s)
		}
	}
}

func mark(got, bound int64) string {
	if got > bound {
		return "OVER"
	}
	return "ok"
}

func writeRedisAbsolute(w io.Writer, r *Report, p *ProviderReport, span string) {
	fmt.Fprintf(w, "%v: one window per key, shared by the %d instances through Redis\n", p.Target, r.Instances)
	g := &grid{indent: "  ", align: "llrrrl"}
	g.add("key", "tier", "capacity", "admitted", "most in any "+span, "")
	over := 0
	for i := range p.Keys {
		k := &p.Keys[i]
		if k.Fleet > k.Capacity {
			over++
		}
		g.add(k.Key, k.Tier, itoa(k.Capacity), itoa(k.Admitted), itoa(k.Fleet), mark(k.Fleet, k.Capacity))
	}
	g.write(w)
	if over == 0 {
		fmt.Fprintf(w, "  No key over capacity fleet-wide.\n")
	} else {
		fmt.Fprintf(w, "  %d keys over capacity fleet-wide.\n", over)
	}
}

func writeLocalAbsolute(w io.Writer, r *Report, p *ProviderReport, span string) {
	fmt.Fprintf(w, "%v: one limiter per instance, each counting only its own requests\n", p.Target)
	fmt.Fprintf(w, "  Most units admitted in any %s, by one instance and by the whole fleet:\n", span)
	g := &grid{indent: "  ", align: "llrrlrl"}
	g.add("key", "tier", "capacity", "per instance", "", "fleet-wide", "")
	over, worst := 0, 0.0
	for i := range p.Keys {
		k := &p.Keys[i]
		inst := k.MaxInstance()
		if inst > k.Capacity {
			over++
		}
		ratio := float64(k.Fleet) / float64(k.Capacity)
		worst = max(worst, ratio)
		g.add(k.Key, k.Tier, itoa(k.Capacity), itoa(inst), mark(inst, k.Capacity),
			itoa(k.Fleet), fmt.Sprintf("= %.2f × capacity", ratio))
	}
	g.write(w)
	if over == 0 {
		fmt.Fprintf(w, "  Every instance within capacity. ")
	} else {
		fmt.Fprintf(w, "  %d keys over capacity on an instance. ", over)
	}
	switch {
	case r.Instances == 1:
		fmt.Fprintf(w, "With one instance, the fleet is that instance.\n")
	case worst > 1:
		fmt.Fprintf(w, "But the fleet as a whole admitted up to %.2f × capacity:\n", worst)
		fmt.Fprintf(w, "  with local limiters, %d instances can admit up to %d × capacity together.\n", r.Instances, r.Instances)
		fmt.Fprintf(w, "  That is why a shared Redis exists.\n")
	default:
		fmt.Fprintf(w, "The fleet as a whole stayed within capacity in this run,\n")
		fmt.Fprintf(w, "  but nothing bounds it: with local limiters, %d instances can admit up to %d × capacity together.\n", r.Instances, r.Instances)
	}
}

func writeSuppressed(w io.Writer, r *Report, p *ProviderReport, span string) {
	shared := p.Target.Backend == Redis
	if shared {
		fmt.Fprintf(w, "%v: one window per key, shared through Redis; admits above the target with\n", p.Target)
	} else {
		fmt.Fprintf(w, "%v: one limiter per instance; admits above the target with\n", p.Target)
	}
	fmt.Fprintf(w, "  falling probability, never above the hard ceiling (%g × target)\n", r.HardLimitFactor)
	secs := r.Elapsed.Seconds()
	g := &grid{indent: "  ", align: "llrrrrrrl"}
	where := "fleet-wide"
	if !shared {
		where = "per instance"
	}
	g.add("key", "tier", "target/s", "offered/s", "accepted/s", "soft", "hard", "most in any "+span, "")
	over := 0
	for i := range p.Keys {
		k := &p.Keys[i]
		pk := p.Most(k)
		if pk > k.Hard {
			over++
		}
		g.add(k.Key, k.Tier, fmtRate(k.Rate.PerSecondValue()), fmtRate(float64(k.Offered)/secs),
			fmtRate(float64(k.Admitted)/secs), itoa(k.Capacity), itoa(k.Hard), itoa(pk), mark(pk, k.Hard))
	}
	g.write(w)
	fmt.Fprintf(w, "  Rates are units per second over the whole run (the first window starts empty).\n")
	fmt.Fprintf(w, "  The soft capacity is what the accepted rate settles near, not a bound on a window;\n")
	fmt.Fprintf(w, "  the hard one is: no window of %s may hold more.\n", span)
	if over == 0 {
		fmt.Fprintf(w, "  No key over its hard ceiling %s.\n", where)
	} else {
		fmt.Fprintf(w, "  %d keys over the hard ceiling %s.\n", over, where)
	}
	if !shared {
		worst := 0.0
		for i := range p.Keys {
			worst = max(worst, float64(p.Keys[i].Fleet)/float64(p.Keys[i].Hard))
		}
		fmt.Fprintf(w, "  The fleet as a whole admitted up to %.2f × the hard ceiling in any %s.\n", worst, span)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func fmtRate(x float64) string {
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// fmtSeconds formats an elapsed time: "7s", or "7.4s" when not whole.
func fmtSeconds(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
}

// fmtLatency formats a latency with two or three significant digits.
func fmtLatency(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	switch {
	case d == 0:
		return "-"
	case us < 10:
		return strconv.FormatFloat(us, 'f', 1, 64) + "µs"
	case us < 1000:
		return strconv.FormatFloat(us, 'f', 0, 64) + "µs"
	case us < 10000:
		return strconv.FormatFloat(us/1000, 'f', 2, 64) + "ms"
	case us < 1e6:
		return strconv.FormatFloat(us/1000, 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(us/1e6, 'f', 2, 64) + "s"
}
