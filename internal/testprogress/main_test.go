package main

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuilder is a strings.Builder safe for the heartbeat's goroutine.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(b)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const events = `{"Action":"start","Package":"github.com/sluice-go/sluice/a"}
{"Action":"run","Package":"github.com/sluice-go/sluice/a","Test":"TestOK"}
{"Action":"output","Package":"github.com/sluice-go/sluice/a","Test":"TestOK","Output":"quiet\n"}
{"Action":"pass","Package":"github.com/sluice-go/sluice/a","Test":"TestOK","Elapsed":1.5}
{"Action":"run","Package":"github.com/sluice-go/sluice/a","Test":"TestBad"}
{"Action":"run","Package":"github.com/sluice-go/sluice/a","Test":"TestBad/sub"}
{"Action":"output","Package":"github.com/sluice-go/sluice/a","Test":"TestBad/sub","Output":"    x_test.go:9: want 1, got 2\n"}
{"Action":"fail","Package":"github.com/sluice-go/sluice/a","Test":"TestBad/sub","Elapsed":0.1}
{"Action":"fail","Package":"github.com/sluice-go/sluice/a","Test":"TestBad","Elapsed":0.2}
{"Action":"fail","Package":"github.com/sluice-go/sluice/a","Elapsed":2}
{"Action":"start","Package":"github.com/sluice-go/sluice/b"}
{"Action":"pass","Package":"github.com/sluice-go/sluice/b","Elapsed":0.3}
`

// TestReport: a failed test's output is printed, a passing test's is not,
// each package gets its line, and the run fails.
func TestReport(t *testing.T) {
	var out syncBuilder
	p := &progress{out: &out, pkgs: map[string]*pkgState{}, begun: time.Now()}
	if p.read(strings.NewReader(events)) {
		t.Error("read = true for a run with a failed test, want false")
	}
	p.summary()
	got := out.String()
	for _, want := range []string{
		"--- FAIL a TestBad (0.2s)\n",
		"x_test.go:9: want 1, got 2",
		"FAIL github.com/sluice-go/sluice/a 2.0s\n",
		"ok   github.com/sluice-go/sluice/b 0.3s\n",
		"Slowest packages: a 2s, b 0s",
		"Slowest tests: a TestOK 2s, a TestBad 0s",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output has no %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}
}

// TestParallelTimes: a test whose subtests are parallel is timed by its
// events' times, not go test's Elapsed (which leaves them out), and a
// parallel test from when it continues, not from when it paused.
func TestParallelTimes(t *testing.T) {
	const parallel = `{"Time":"2026-01-01T00:00:00Z","Action":"start","Package":"github.com/sluice-go/sluice/p"}
{"Time":"2026-01-01T00:00:00Z","Action":"run","Package":"github.com/sluice-go/sluice/p","Test":"TestSuite"}
{"Time":"2026-01-01T00:00:00Z","Action":"run","Package":"github.com/sluice-go/sluice/p","Test":"TestLater"}
{"Time":"2026-01-01T00:00:00Z","Action":"pause","Package":"github.com/sluice-go/sluice/p","Test":"TestLater"}
{"Time":"2026-01-01T00:00:00Z","Action":"run","Package":"github.com/sluice-go/sluice/p","Test":"TestSuite/a"}
{"Time":"2026-01-01T00:00:42Z","Action":"pass","Package":"github.com/sluice-go/sluice/p","Test":"TestSuite/a","Elapsed":42}
{"Time":"2026-01-01T00:00:42Z","Action":"pass","Package":"github.com/sluice-go/sluice/p","Test":"TestSuite","Elapsed":0}
{"Time":"2026-01-01T00:00:42Z","Action":"cont","Package":"github.com/sluice-go/sluice/p","Test":"TestLater"}
{"Time":"2026-01-01T00:00:49Z","Action":"pass","Package":"github.com/sluice-go/sluice/p","Test":"TestLater","Elapsed":7}
{"Time":"2026-01-01T00:00:49Z","Action":"pass","Package":"github.com/sluice-go/sluice/p","Elapsed":49}
`
	var out syncBuilder
	p := &progress{out: &out, pkgs: map[string]*pkgState{}, begun: time.Now()}
	if !p.read(strings.NewReader(parallel)) {
		t.Error("read = false for a run that passed")
	}
	p.summary()
	if want := "Slowest tests: p TestSuite 42s, p TestLater 7s"; !strings.Contains(out.String(), want) {
		t.Errorf("output has no %q:\n%s", want, out.String())
	}
}

// TestTimedOut: a package that fails while a test still runs (go test's
// -timeout panics inside it) prints that test's output, where test2json
// files the panic, and not only the package's FAIL line.
func TestTimedOut(t *testing.T) {
	const timedOut = `{"Action":"start","Package":"github.com/sluice-go/sluice/c"}
{"Action":"run","Package":"github.com/sluice-go/sluice/c","Test":"TestHang"}
{"Action":"output","Package":"github.com/sluice-go/sluice/c","Test":"TestHang","Output":"panic: test timed out after 10m0s\n"}
{"Action":"output","Package":"github.com/sluice-go/sluice/c","Test":"TestHang","Output":"goroutine 7 [chan receive]:\n"}
{"Action":"fail","Package":"github.com/sluice-go/sluice/c","Elapsed":600}
`
	var out syncBuilder
	p := &progress{out: &out, pkgs: map[string]*pkgState{}, begun: time.Now()}
	if p.read(strings.NewReader(timedOut)) {
		t.Error("read = true for a package that timed out, want false")
	}
	got := out.String()
	for _, want := range []string{"--- FAIL c TestHang (did not end)\n", "panic: test timed out after 10m0s", "goroutine 7 [chan receive]", "FAIL github.com/sluice-go/sluice/c 600.0s\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output has no %q:\n%s", want, got)
		}
	}
}

// TestHeartbeat: before any package runs, a line says the tests are
// being built; while a package runs, a line names it and its running
// test; a run that ends before the package does fails.
func TestHeartbeat(t *testing.T) {
	var out syncBuilder
	p := &progress{out: &out, pkgs: map[string]*pkgState{}, begun: time.Now()}
	stop := make(chan struct{})
	p.wg.Add(1)
	go p.heartbeat(10*time.Millisecond, stop)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "building (0 packages done)") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	p.event(event{Action: "start", Package: "github.com/sluice-go/sluice/slow"})
	p.event(event{Action: "run", Package: "github.com/sluice-go/sluice/slow", Test: "TestLong"})
	for !strings.Contains(out.String(), "running slow ") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	p.wg.Wait()
	if got := out.String(); !strings.Contains(got, "running slow 0s (TestLong 0s)") || !strings.Contains(got, "building (0 packages done)") {
		t.Errorf("no heartbeat naming the package and its test:\n%s", got)
	}
	if p.read(strings.NewReader("")) {
		t.Error("read = true with a package that never ended, want false")
	}
}

// TestNoPackages: input without a package result (go test could not run)
// fails.
func TestNoPackages(t *testing.T) {
	var out syncBuilder
	p := &progress{out: &out, pkgs: map[string]*pkgState{}, begun: time.Now()}
	if p.read(strings.NewReader("go: cannot find main module\n")) {
		t.Errorf("read = true for input with no package, want false; output:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "go: cannot find main module") {
		t.Errorf("the non-JSON line was not passed on:\n%s", out.String())
	}
}
