// Command testprogress reads the output of go test -json on stdin and
// prints a short report as it goes: one line per package when it ends
// (ok, FAIL or skipped, and its time), the full output of every failed
// test, and every 20 s one line naming the packages that run and their
// running tests (or saying that test binaries are being built), so a long
// run never looks hung. At the end it
// names the slowest packages and tests. It exits 1 if any test or
// package failed, if the input ends before every started package ended,
// or if it holds no package result at all (go test itself failed).
//
//	go test -json ./... | go run ./internal/testprogress
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// event is one line of go test -json (test2json).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type pkgState struct {
	start   time.Time
	running map[string]time.Time // top-level tests in progress, from when they ran or continued
	began   map[string]time.Time // e.Time of each top-level test's run, for its wall time
	output  map[string]*strings.Builder
	pkgOut  strings.Builder // output outside any test (build errors, panics)
}

type timing struct {
	name    string
	seconds float64
}

type progress struct {
	mu       sync.Mutex
	wg       sync.WaitGroup
	out      io.Writer
	pkgs     map[string]*pkgState
	failed   bool
	pkgTimes []timing
	tests    []timing
	begun    time.Time
}

func main() {
	p := &progress{out: os.Stdout, pkgs: map[string]*pkgState{}, begun: time.Now()}
	stop := make(chan struct{})
	p.wg.Add(1)
	go p.heartbeat(20*time.Second, stop)
	ok := p.read(os.Stdin)
	close(stop)
	p.wg.Wait()
	p.summary()
	if !ok {
		os.Exit(1)
	}
}

// read consumes the events; it reports whether everything passed.
func (p *progress) read(r io.Reader) bool {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			// Not an event (go vet or build output): pass it on.
			p.mu.Lock()
			fmt.Fprintln(p.out, sc.Text())
			p.mu.Unlock()
			continue
		}
		p.event(e)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pkgTimes) == 0 && len(p.pkgs) == 0 {
		fmt.Fprintln(p.out, "testprogress: no package result in the input (did go test run?)")
		p.failed = true
	}
	for name, st := range p.pkgs {
		fmt.Fprintf(p.out, "FAIL %s: no result (the run ended while it ran)\n%s", name, st.pkgOut.String())
		p.failed = true
	}
	return !p.failed
}

func (p *progress) event(e event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.pkgs[e.Package]
	if st == nil {
		if e.Action != "start" && e.Action != "run" && e.Action != "output" {
			if e.Test == "" && (e.Action == "pass" || e.Action == "skip" || e.Action == "fail") {
				p.pkgDone(e, &pkgState{})
			}
			return
		}
		st = &pkgState{start: time.Now(), running: map[string]time.Time{}, began: map[string]time.Time{}, output: map[string]*strings.Builder{}}
		p.pkgs[e.Package] = st
	}
	top, _, _ := strings.Cut(e.Test, "/")
	switch {
	case e.Test == "" && e.Action == "output":
		st.pkgOut.WriteString(e.Output)
	case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
		p.pkgDone(e, st)
		delete(p.pkgs, e.Package)
	case e.Action == "run" && e.Test == top:
		st.running[top] = time.Now()
		st.began[top] = e.Time
		st.output[top] = &strings.Builder{}
	case e.Action == "pause" && e.Test == top:
		// A parallel test waits for the package's sequential tests:
		// not running until it continues.
		delete(st.running, top)
	case e.Action == "cont" && e.Test == top:
		st.running[top] = time.Now()
		st.began[top] = e.Time
	case e.Action == "output":
		if b := st.output[top]; b != nil {
			b.WriteString(e.Output)
		}
	case e.Test == top && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
		if e.Action == "fail" {
			p.failed = true
			fmt.Fprintf(p.out, "--- FAIL %s %s (%.1fs)\n%s", short(e.Package), top, e.Elapsed, st.output[top].String())
		}
		// go test's Elapsed of a test whose subtests are parallel leaves
		// them out (0 s for a suite that ran a minute): the wall time
		// from its run, or its continuing if it is parallel, is taken
		// when the events carry their times.
		el := e.Elapsed
		if b := st.began[top]; !b.IsZero() && !e.Time.IsZero() {
			el = max(el, e.Time.Sub(b).Seconds())
		}
		p.tests = append(p.tests, timing{short(e.Package) + " " + top, el})
		delete(st.running, top)
		delete(st.began, top)
		delete(st.output, top)
	}
}

func (p *progress) pkgDone(e event, st *pkgState) {
	word := map[string]string{"pass": "ok  ", "fail": "FAIL", "skip": "skip"}[e.Action]
	if e.Action == "fail" {
		p.failed = true
		// Tests that never ended (a panic, go test's -timeout) hold
		// the reason: test2json files the panic under the test that ran.
		names := make([]string, 0, len(st.output))
		for name := range st.output {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			fmt.Fprintf(p.out, "--- FAIL %s %s (did not end)\n%s", short(e.Package), name, st.output[name].String())
		}
		if out := st.pkgOut.String(); out != "" {
			fmt.Fprint(p.out, out)
		}
	}
	fmt.Fprintf(p.out, "%s %s %.1fs\n", word, e.Package, e.Elapsed)
	if e.Action != "skip" {
		p.pkgTimes = append(p.pkgTimes, timing{short(e.Package), e.Elapsed})
	}
}

// heartbeat prints, every d while packages run, which ones and which of
// their tests have been running longest.
func (p *progress) heartbeat(d time.Duration, stop <-chan struct{}) {
	defer p.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		p.mu.Lock()
		var parts []string
		for name, st := range p.pkgs {
			s := fmt.Sprintf("%s %ds", short(name), int(time.Since(st.start).Seconds()))
			var ts []string
			for tn, at := range st.running {
				ts = append(ts, fmt.Sprintf("%s %ds", tn, int(time.Since(at).Seconds())))
			}
			sort.Strings(ts)
			if len(ts) > 2 {
				ts = append(ts[:2], "…")
			}
			if len(ts) > 0 {
				s += " (" + strings.Join(ts, ", ") + ")"
			}
			parts = append(parts, s)
		}
		sort.Strings(parts)
		if len(parts) > 0 {
			fmt.Fprintf(p.out, "… %ds: running %s\n", int(time.Since(p.begun).Seconds()), strings.Join(parts, "; "))
		} else {
			fmt.Fprintf(p.out, "… %ds: building (%d packages done)\n", int(time.Since(p.begun).Seconds()), len(p.pkgTimes))
		}
		p.mu.Unlock()
	}
}

func (p *progress) summary() {
	p.mu.Lock()
	defer p.mu.Unlock()
	top := func(ts []timing, n int) string {
		ts = slices.Clone(ts)
		sort.Slice(ts, func(i, j int) bool { return ts[i].seconds > ts[j].seconds })
		var s []string
		for _, t := range ts[:min(n, len(ts))] {
			s = append(s, fmt.Sprintf("%s %.0fs", t.name, t.seconds))
		}
		return strings.Join(s, ", ")
	}
	fmt.Fprintf(p.out, "%.0fs in all. Slowest packages: %s\n", time.Since(p.begun).Seconds(), top(p.pkgTimes, 5))
	fmt.Fprintf(p.out, "Slowest tests: %s\n", top(p.tests, 5))
}

// short drops the module path from a package path.
func short(pkg string) string {
	if s, ok := strings.CutPrefix(pkg, "github.com/sluice-go/sluice/"); ok {
		return s
	}
	if pkg == "github.com/sluice-go/sluice" {
		return "."
	}
	return pkg
}
