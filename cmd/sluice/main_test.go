package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
)

func TestMain(m *testing.M) {
	// Re-executed by TestBinary: be the sluice command.
	if args, ok := os.LookupEnv("SLUICE_TEST_MAIN_ARGS"); ok {
		os.Args = append([]string{"sluice"}, strings.Fields(args)...)
		main()
		return
	}
	redistest.Main(m)
}

// TestBinary runs main in a child process, as a user would: an unreachable
// Redis is one line on stderr (go-redis' own dial logs silenced) and exit
// status 1; a bad flag is exit status 2.
func TestBinary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args  string
		want  int
		lines int // on stderr; 0 means do not count
	}{
		{"demo --redis redis://" + deadAddr(t), exitFailure, 1},
		{"inspect --redis redis://" + deadAddr(t) + " user:1", exitFailure, 1},
		{"demo --bogus", exitUsage, 2},
		{"help", exitOK, 0},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), "SLUICE_TEST_MAIN_ARGS="+tt.args)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			st := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				st = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if st != tt.want {
				t.Errorf("sluice %s: exit status %d, want %d; stderr:\n%s", tt.args, st, tt.want, stderr.String())
			}
			if n := strings.Count(stderr.String(), "\n"); tt.lines > 0 && n != tt.lines {
				t.Errorf("sluice %s: %d lines on stderr, want %d:\n%s", tt.args, n, tt.lines, stderr.String())
			}
		})
	}
}

// runArgs runs the command with args and returns its exit status, stdout
// and stderr.
func runArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runArgsContext(t, context.Background(), args...)
}

func runArgsContext(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	st := runContext(ctx, args, &stdout, &stderr)
	return st, stdout.String(), stderr.String()
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"help unknown command", []string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{"flag before command", []string{"--bogus"}, "unknown flag --bogus"},
		{"demo unknown flag", []string{"demo", "--bogus"}, "unknown flag --bogus"},
		{"demo unknown short flag", []string{"demo", "-bogus"}, "unknown flag --bogus"},
		{"demo flag without value", []string{"demo", "--duration"}, "--duration needs a value"},
		{"demo argument", []string{"demo", "now"}, `unexpected argument "now"`},
		{"demo bad duration", []string{"demo", "--duration", "soon"}, `--duration: "soon" is not valid`},
		{"demo zero duration", []string{"demo", "--duration", "0s"}, "--duration 0s"},
		{"demo bad url", []string{"demo", "--redis", "http://x"}, "--redis"},
		{"load provider", []string{"load", "--provider", "memcached"}, `--provider "memcached"`},
		{"load strategy", []string{"load", "--strategy", "fuzzy"}, `--strategy "fuzzy"`},
		{"load rate", []string{"load", "--rate", "fast"}, `--rate: invalid rate: parse "fast"`},
		{"load rate unit", []string{"load", "--rate", "5/fortnight"}, `unit "fortnight"`},
		{"load negative rate", []string{"load", "--rate", "-5/s"}, "invalid rate"},
		{"load capacity too small", []string{"load", "--rate", "1/d", "--window", "1s"}, "capacity below one unit"},
		{"load window not whole ms", []string{"load", "--window", "1500us"}, "whole number of milliseconds"},
		{"load bucket above window", []string{"load", "--window", "1s", "--bucket", "2s"}, "bucket"},
		{"load hard limit", []string{"load", "--hard-limit", "0.5"}, "hard limit factor"},
		{"load keys", []string{"load", "--keys", "0"}, "--keys 0"},
		{"load clients", []string{"load", "--keys", "4", "--clients", "3"}, "--clients 3"},
		{"load instances", []string{"load", "--instances", "0"}, "--instances 0"},
		{"load cost", []string{"load", "--cost", "0"}, "--cost 0"},
		// Counts past their bound are refused before anything is built
		// (they used to run the machine out of memory).
		{"load keys bound", []string{"load", "--keys", "10001", "--clients", "20000"}, "--keys 10001: want 1 to 10000"},
		{"load clients bound", []string{"load", "--clients", "100000000"}, "--clients 100000000: want at most 100000"},
		{"load instances bound", []string{"load", "--instances", "10000000"}, "--instances 10000000: want 1 to 100"},
		{"load clients overflow", []string{"load", "--clients", "99999999999999999999"}, "--clients"},
		{"cleanup trim threshold bound", []string{"cleanup", "--redis", "redis://127.0.0.1:1", "--trim-threshold", "100000000"}, "trim threshold 100000000"},
		{"load offer", []string{"load", "--offer", "0"}, "--offer 0"},
		{"load prefix", []string{"load", "--prefix", "a{b}"}, "prefix"},
		{"inspect no key", []string{"inspect", "--redis", "redis://127.0.0.1:1"}, "missing KEY"},
		{"inspect two keys", []string{"inspect", "--redis", "redis://127.0.0.1:1", "a", "b"}, "one KEY"},
		{"inspect flag after key", []string{"inspect", "--redis", "redis://127.0.0.1:1", "k", "--prefix", "p"}, `--prefix after KEY "k": flags go before KEY`},
		{"load window not a duration", []string{"load", "--window", "1x"}, `--window: "1x" is not valid: parse error; want a duration such as 500ms, 10s, 1m or 1h30m`},
		{"demo window", []string{"demo", "--window", "0s"}, "--window 0s"},
		{"inspect no redis", []string{"inspect", "user:1"}, "--redis is required"},
		{"inspect strategy", []string{"inspect", "--redis", "redis://127.0.0.1:1", "--strategy", "both", "k"}, `--strategy "both"`},
		{"inspect bad url", []string{"inspect", "--redis", "localhost:6379", "k"}, "--redis"},
		{"inspect prefix", []string{"inspect", "--redis", "redis://127.0.0.1:1", "--prefix", "", "k"}, "prefix"},
		{"inspect window", []string{"inspect", "--redis", "redis://127.0.0.1:1", "--window", "-1s", "k"}, "--window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, stdout, stderr := runArgs(t, tt.args...)
			if st != exitUsage {
				t.Errorf("run(%q) = %d, want %d; stderr:\n%s", tt.args, st, exitUsage, stderr)
			}
			if stdout != "" {
				t.Errorf("run(%q) wrote to stdout:\n%s", tt.args, stdout)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("run(%q) stderr = %q, want it to contain %q", tt.args, stderr, tt.want)
			}
			// One line naming the command and what is wrong, then a hint.
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			cmd := "sluice"
			if len(tt.args) > 0 && (lookup(tt.args[0]) != nil || tt.args[0] == "help") {
				cmd += " " + tt.args[0]
			}
			if len(lines) != 2 || !strings.HasPrefix(lines[0], cmd+": ") || !strings.HasPrefix(lines[1], "Run '") ||
				!strings.Contains(lines[1], "help") {
				t.Errorf("run(%q) stderr = %q, want a line starting %q and a hint to --help", tt.args, stderr, cmd+": ")
			}
			if strings.Contains(strings.TrimPrefix(lines[0], cmd+": "), "sluice: ") {
				t.Errorf("run(%q) stderr %q: a second \"sluice: \" prefix", tt.args, lines[0])
			}
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "sluice demo"},
		{[]string{"help"}, "sluice inspect"},
		{[]string{"help", "load"}, "--hard-limit"},
		{[]string{"demo", "--help"}, "Usage: sluice demo"},
		{[]string{"demo", "-h"}, "--redis URL"},
		{[]string{"load", "--help"}, "--provider local|redis|both"},
		{[]string{"inspect", "--help"}, "--strategy absolute|suppressed"},
		{[]string{"help", "inspect"}, "[--window W [--bucket B]]"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			st, stdout, stderr := runArgs(t, tt.args...)
			if st != exitOK || stderr != "" {
				t.Fatalf("run(%q) = %d, stderr %q; want 0 and nothing", tt.args, st, stderr)
			}
			if !strings.Contains(stdout, tt.want) {
				t.Errorf("run(%q) stdout = %q, want it to contain %q", tt.args, stdout, tt.want)
			}
		})
	}
}

// deadAddr returns a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestUnreachableRedis(t *testing.T) {
	t.Parallel()
	url := "redis://" + deadAddr(t)
	for _, args := range [][]string{
		{"demo", "--redis", url},
		{"load", "--redis", url, "--provider", "redis"},
		{"inspect", "--redis", url, "user:1"},
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			st, stdout, stderr := runArgs(t, args...)
			if st != exitFailure {
				t.Errorf("run(%q) = %d, want %d", args, st, exitFailure)
			}
			if stdout != "" {
				t.Errorf("run(%q) wrote to stdout:\n%s", args, stdout)
			}
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(stderr, "cannot reach Redis at "+strings.TrimPrefix(url, "redis://")) {
				t.Errorf("run(%q) stderr = %q, want one line saying Redis cannot be reached", args, stderr)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("run(%q) took %v to give up", args, d)
			}
		})
	}
}

// TestLocalNeedsNoRedis: a local-only load never connects to Redis, even
// to an unreachable one.
func TestLocalNeedsNoRedis(t *testing.T) {
	t.Parallel()
	st, stdout, stderr := runArgs(t, "load", "--redis", "redis://"+deadAddr(t), "--provider", "local",
		"--duration", "300ms", "--window", "1s", "--rate", "50/s")
	if st != exitOK {
		t.Fatalf("load --provider local = %d, stderr:\n%s", st, stderr)
	}
	if !strings.Contains(stdout, "Every instance within capacity") {
		t.Errorf("load --provider local: no per-instance verdict in\n%s", stdout)
	}
}

func TestDemoShort(t *testing.T) {
	t.Parallel()
	st, stdout, stderr := runArgs(t, "demo", "--duration", "1500ms")
	if st != exitOK {
		t.Fatalf("demo = %d, stderr:\n%s\nstdout:\n%s", st, stderr, stdout)
	}
	for _, want := range []string{
		"embedded miniredis",
		"Requests decided in each second:",
		"local absolute", "redis absolute", "redis suppressed",
		"Totals over 1.5s",
		"the most units admitted in any window of 4s",
		"No key over capacity fleet-wide.",
		"Every instance within capacity.",
		"No key over its hard ceiling fleet-wide.",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output has no %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "\x1b[") {
		t.Errorf("demo wrote ANSI escapes to a non-terminal:\n%q", stdout)
	}
}

// TestDemoReport is the regression test of issue 12: the demo's report,
// run on the embedded miniredis for longer than its 4 s window, shows every
// key of the Redis absolute provider at most at its capacity in any window
// of 4 s (before the window guarantee, user:dave showed 206 of 200), and
// every key of the Redis suppressed provider at most at its hard capacity.
func TestDemoReport(t *testing.T) {
	t.Parallel()
	st, stdout, stderr := runArgs(t, "demo", "--duration", "6s")
	if st != exitOK {
		t.Fatalf("demo = %d, stderr:\n%s\nstdout:\n%s", st, stderr, stdout)
	}
	if strings.Contains(stdout, "came from the local fallback") {
		t.Errorf("demo decisions came from the local fallback, not the embedded Redis:\n%s", stdout)
	}
	rows := reportRows(t, stdout, "redis absolute: ")
	if len(rows) != len(demoKeys()) {
		t.Fatalf("redis absolute section has %d rows, want %d:\n%s", len(rows), len(demoKeys()), stdout)
	}
	for _, r := range rows {
		// key, tier, capacity, admitted, most in any 4s, verdict
		if len(r) != 6 {
			t.Fatalf("redis absolute row %q: want 6 columns", r)
		}
		capacity, most := atoi(t, r[2]), atoi(t, r[4])
		if most > capacity || r[5] != "ok" {
			t.Errorf("redis absolute %s: most in any window of 4s %d, capacity %d (%s)", r[0], most, capacity, r[5])
		}
	}
	rows = reportRows(t, stdout, "redis suppressed: ")
	if len(rows) != len(demoKeys()) {
		t.Fatalf("redis suppressed section has %d rows, want %d:\n%s", len(rows), len(demoKeys()), stdout)
	}
	for _, r := range rows {
		// key, tier, target/s, offered/s, accepted/s, soft, hard, most in any 4s, verdict
		if len(r) != 9 {
			t.Fatalf("redis suppressed row %q: want 9 columns", r)
		}
		if hard, most := atoi(t, r[6]), atoi(t, r[7]); most > hard || r[8] != "ok" {
			t.Errorf("redis suppressed %s: most in any window of 4s %d, hard capacity %d (%s)", r[0], most, hard, r[8])
		}
	}
}

// reportRows returns the cells of the key rows of the report's section
// whose first line starts with title.
func reportRows(t *testing.T, out, title string) [][]string {
	t.Helper()
	i := strings.Index(out, "\n"+title)
	if i < 0 {
		t.Fatalf("no section %q in\n%s", title, out)
	}
	var rows [][]string
	seenHeader := false
	for _, l := range strings.Split(out[i+1:], "\n")[1:] {
		f := strings.Fields(l)
		switch {
		case len(f) == 0 || !strings.HasPrefix(l, "  "):
			return rows
		case f[0] == "key":
			seenHeader = true
		case seenHeader && strings.Contains(f[0], ":"):
			rows = append(rows, f)
		}
	}
	return rows
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("report cell %q: %v", s, err)
	}
	return n
}

// TestInterrupt: a cancelled run (Ctrl-C) stops at once, with the report
// so far and status 0.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	start := time.Now()
	st, stdout, stderr := runArgsContext(t, ctx, "demo", "--duration", "30s")
	if st != exitOK {
		t.Fatalf("interrupted demo = %d, stderr:\n%s", st, stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("interrupted demo took %v", d)
	}
	if !strings.Contains(stdout, "Interrupted after") || !strings.Contains(stdout, "No key over capacity fleet-wide.") {
		t.Errorf("interrupted demo output:\n%s", stdout)
	}
}

// TestLoadThenInspect runs load against a Redis given by URL and inspects
// a key it wrote, under the prefix it was given.
func TestLoadThenInspect(t *testing.T) {
	t.Parallel()
	mr, _ := redistest.Mini(t)
	url := "redis://" + mr.Addr()
	prefix := redistest.Prefix(t)
	st, stdout, stderr := runArgs(t, "load", "--redis", url, "--provider", "redis", "--strategy", "suppressed",
		"--prefix", prefix, "--duration", "400ms", "--window", "10s", "--rate", "5/s", "--offer", "200", "--cost", "10",
		"--keys", "1", "--clients", "2", "--instances", "2")
	if st != exitOK {
		t.Fatalf("load = %d, stderr:\n%s", st, stderr)
	}
	hint := "sluice inspect --redis " + url + " --prefix " + prefix + " --strategy suppressed --window 10s key-0"
	if !strings.Contains(stdout, hint) {
		t.Errorf("load output has no %q:\n%s", hint, stdout)
	}
	st, out, stderr := runArgs(t, strings.Fields(hint)[1:]...)
	if st != exitOK {
		t.Fatalf("inspect = %d, stderr:\n%s", st, stderr)
	}
	// Offered about 400 units in requests of 10 against S = 50 and H = 75:
	// every request up to S is accepted, none beyond H.
	var accepted int64 = -1
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 2 && strings.HasPrefix(strings.TrimSpace(l), f[0]+" units accepted in the live window") {
			accepted, _ = strconv.ParseInt(f[0], 10, 64)
		}
	}
	if accepted < 50 || accepted > 75 {
		t.Errorf("inspect after load: %d units accepted, want 50 to 75:\n%s", accepted, out)
	}
}

// TestRun goes through run itself, signal handling included.
func TestRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if st := run([]string{"load", "--cost", "-1"}, &stdout, &stderr); st != exitUsage || stdout.Len() != 0 ||
		!strings.Contains(stderr.String(), "--cost -1") {
		t.Errorf("run(load --cost -1) = %d, stdout %q, stderr %q; want %d and a usage error", st, stdout.String(), stderr.String(), exitUsage)
	}
}
