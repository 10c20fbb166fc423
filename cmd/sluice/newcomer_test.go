package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// firstLine is the first line of s, without its newline.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// TestFirstLines runs the commands a newcomer tries first (issue 21) and
// checks each one's exit status and the first line it prints: on stdout
// for a command that works, on stderr for one that does not.
func TestFirstLines(t *testing.T) {
	t.Parallel()
	version := regexp.MustCompile(`^sluice (\(devel\)|v\S+)( \(revision [0-9a-f]+(, modified)?\))?, go\S+ \S+/\S+$`)
	short := []string{"--provider", "local", "--duration", "200ms", "--window", "1s", "--keys", "1", "--clients", "1"}
	tests := []struct {
		name   string
		args   []string
		status int
		stderr bool           // the first line is stderr's
		want   string         // the first line, or its start when prefix is set
		re     *regexp.Regexp // instead of want
		prefix bool
	}{
		{name: "--version", args: []string{"--version"}, re: version},
		{name: "-version", args: []string{"-version"}, re: version},
		{name: "version", args: []string{"version"}, re: version},
		{name: "version with an argument", args: []string{"version", "now"}, status: exitUsage, stderr: true,
			want: `sluice version: unexpected argument "now"`},
		{name: "load --strategy abs", args: append([]string{"load", "--strategy", "abs"}, short...),
			want: "sluice load: local absolute; 3 instances, 1 clients, 1 keys, cost 1."},
		{name: "load --strategy sup", args: append([]string{"load", "--strategy", "sup"}, short...),
			want: "sluice load: local suppressed; 3 instances, 1 clients, 1 keys, cost 1."},
		{name: "load --strategy suppressed", args: append([]string{"load", "--strategy", "suppressed"}, short...),
			want: "sluice load: local suppressed; 3 instances, 1 clients, 1 keys, cost 1."},
		{name: "load --strategy fuzzy", args: []string{"load", "--strategy", "fuzzy"}, status: exitUsage, stderr: true,
			want: `sluice load: --strategy "fuzzy": want absolute or suppressed (abs, sup)`},
		{name: "bad rate: one prefix", args: []string{"load", "--rate", "0/s"}, status: exitUsage, stderr: true,
			want: `sluice load: --rate: invalid rate: parse "0/s": count "0" is zero`},
		{name: "unknown flag", args: []string{"load", "--bogus"}, status: exitUsage, stderr: true,
			want: "sluice load: unknown flag --bogus"},
		{name: "5/h over 10s", args: []string{"load", "--rate", "5/h", "--window", "10s"}, status: exitUsage, stderr: true,
			want: "sluice load: --rate 5/h over --window 10s: capacity below one unit: 5/h over 10s is 0.0138889 units; raise --window to 12m0s or more, or --rate"},
		{name: "5/h over 12m", args: append([]string{"load", "--rate", "5/h"}, append(short, "--window", "12m")...),
			want: "sluice load: local absolute; 3 instances, 1 clients, 1 keys, cost 1."},
		{name: "cost above the capacity", args: []string{"load", "--rate", "2/s", "--window", "10s", "--cost", "50"}, status: exitUsage, stderr: true,
			want: "sluice load: --cost 50 can never fit: the capacity is 20 units per --window 10s at --rate 2/s, so every request would be refused with Never set; lower --cost or raise --rate or --window"},
		{name: "cost at the capacity", args: append([]string{"load", "--rate", "2/s", "--cost", "2"}, short...),
			want: "sluice load: local absolute; 3 instances, 1 clients, 1 keys, cost 2."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st, stdout, stderr := runArgs(t, tt.args...)
			out := stdout
			if tt.stderr {
				out = stderr
			}
			got := firstLine(out)
			if st != tt.status {
				t.Errorf("sluice %s: exit status %d, want %d; stderr:\n%s", strings.Join(tt.args, " "), st, tt.status, stderr)
			}
			switch {
			case tt.re != nil:
				if !tt.re.MatchString(got) {
					t.Errorf("sluice %s: first line %q, want it to match %v", strings.Join(tt.args, " "), got, tt.re)
				}
			case got != tt.want:
				t.Errorf("sluice %s: first line\n%q, want\n%q", strings.Join(tt.args, " "), got, tt.want)
			}
		})
	}
}

// TestDemoIntroOfferedRates: the demo's intro gives each key its own
// offered rate (it used to print the first key's rate for every key of a
// tier).
func TestDemoIntroOfferedRates(t *testing.T) {
	t.Parallel()
	st, stdout, stderr := runArgs(t, "demo", "--duration", "200ms")
	if st != exitOK {
		t.Fatalf("demo = %d, stderr:\n%s", st, stderr)
	}
	if want := "sluice demo: 3 application instances share one Redis (an embedded miniredis at "; !strings.HasPrefix(firstLine(stdout), want) {
		t.Errorf("demo: first line %q, want it to start with %q", firstLine(stdout), want)
	}
	for _, k := range demoKeys() {
		row := ""
		for _, l := range strings.Split(stdout, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == k.Name && strings.Contains(l, "capacity") {
				row = l
				break
			}
		}
		want := fmt.Sprintf("offered %s/s", fmtRate(k.Offered))
		if !strings.Contains(row, want) {
			t.Errorf("demo intro: %s's row %q, want %q", k.Name, row, want)
		}
	}
}

// TestLocalFleetSentence: the report's "But the fleet…" sentence says the
// fleet went over capacity only when it did.
func TestLocalFleetSentence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"--instances", "1"}, "With one instance, the fleet is that instance.", "But the fleet"},
		{[]string{"--instances", "3", "--offer", "0.2", "--bursts=false"}, "The fleet as a whole stayed within capacity in this run", "But the fleet"},
	} {
		args := append([]string{"load", "--provider", "local", "--duration", "300ms", "--window", "1s", "--rate", "20/s"}, tc.args...)
		st, stdout, stderr := runArgs(t, args...)
		if st != exitOK || !strings.HasPrefix(firstLine(stdout), "sluice load: local absolute;") {
			t.Fatalf("sluice %s = %d, first line %q, stderr:\n%s", strings.Join(args, " "), st, firstLine(stdout), stderr)
		}
		if !strings.Contains(stdout, tc.want) || strings.Contains(stdout, tc.not) {
			t.Errorf("sluice %s: want %q and no %q in\n%s", strings.Join(args, " "), tc.want, tc.not, stdout)
		}
	}
}

// TestUsageNamesEveryFlag: the top-level usage gives every command's
// flags (or says [flags]), as the command's --help lists them.
func TestUsageNamesEveryFlag(t *testing.T) {
	t.Parallel()
	st, top, _ := runArgs(t, "help")
	if st != exitOK {
		t.Fatalf("help = %d", st)
	}
	flagRe := regexp.MustCompile(`(?m)^  (--[a-z-]+)`)
	for _, c := range commands {
		_, help, _ := runArgs(t, c.name, "--help")
		if want := strings.TrimSpace("Usage: sluice " + c.name + " " + synopsis[c.name]); firstLine(help) != want {
			t.Errorf("sluice %s --help: first line %q, want %q", c.name, firstLine(help), want)
		}
		if synopsis[c.name] == "[flags]" {
			continue
		}
		line := ""
		for _, l := range strings.Split(top, "\n") {
			if strings.HasPrefix(l, "  sluice "+c.name) {
				line = l
			}
		}
		for _, m := range flagRe.FindAllStringSubmatch(help, -1) {
			if !strings.Contains(line+" ", m[1]+" ") && !strings.Contains(line, m[1]+"]") {
				t.Errorf("top-level usage of %s (%q) does not name %s", c.name, line, m[1])
			}
		}
	}
}

// TestInspectMissingKeyElsewhere: inspect of a key with no hash under the prefix
// and strategy asked for says where the key's hashes are.
func TestInspectMissingKeyElsewhere(t *testing.T) {
	t.Parallel()
	mr, c := redistest.Mini(t)
	url := "redis://" + mr.Addr()
	prefix := redistest.Prefix(t)
	// No per-call timeout: the test checks exact counts, and a call shed
	// on a loaded machine writes nothing.
	l, err := redissup.New(c, limiter.WithPrefix(prefix), limiter.WithTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Inc(context.Background(), "user:7", limiter.PerMinute(10), 1); err != nil {
		t.Fatal(err)
	}
	name := func(p, strat string, k ...string) string {
		n, err := key.Name(p, append(k, "user:7")[0], strat, key.Hash)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	tests := []struct {
		args  []string
		first string
		want  string
	}{
		{[]string{"--prefix", prefix, "--strategy", "abs", "user:7"},
			name(prefix, key.Absolute) + ": no such key (never written, expired, or reset)",
			"    --prefix " + prefix + " --strategy suppressed"},
		{[]string{"user:7"}, // the default prefix
			name("sluice", key.Absolute) + ": no such key (never written, expired, or reset)",
			"    --prefix " + prefix + " --strategy suppressed"},
		{[]string{"--prefix", prefix, "user:8"},
			name(prefix, key.Absolute, "user:8") + ": no such key (never written, expired, or reset)",
			`  No hash of key "user:8" under any prefix or strategy.`},
		{[]string{"--prefix", prefix, "--strategy", "sup", "user:7"}, name(prefix, key.Suppressed), "  key \"user:7\", single limit, suppressed strategy"},
		{[]string{"--prefix", prefix, "--strategy", "suppressed", "user:7"}, name(prefix, key.Suppressed), "  key \"user:7\", single limit, suppressed strategy"},
	}
	for _, tt := range tests {
		args := append([]string{"inspect", "--redis", url}, tt.args...)
		st, stdout, stderr := runArgs(t, args...)
		if st != exitOK {
			t.Errorf("sluice %s = %d, want %d; stderr:\n%s", strings.Join(args, " "), st, exitOK, stderr)
		}
		if got := firstLine(stdout); got != tt.first {
			t.Errorf("sluice %s: first line\n%q, want\n%q", strings.Join(args, " "), got, tt.first)
		}
		if !containsLine(stdout, tt.want) && !strings.Contains(stdout, tt.want) {
			t.Errorf("sluice %s: no %q in\n%s", strings.Join(args, " "), tt.want, stdout)
		}
	}
}

// TestLoadKeysExpire: the keys a run writes to a Redis server expire W + B
// after its end, as the report says, not W + B plus the minute of slack
// that writes under the run's own clock set.
func TestLoadKeysExpire(t *testing.T) {
	t.Parallel()
	mr, c := redistest.Mini(t)
	url := "redis://" + mr.Addr()
	prefix := redistest.Prefix(t)
	st, stdout, stderr := runArgs(t, "load", "--redis", url, "--provider", "redis", "--prefix", prefix,
		"--duration", "300ms", "--window", "2s", "--keys", "2", "--clients", "2")
	if st != exitOK {
		t.Fatalf("load = %d, stderr:\n%s", st, stderr)
	}
	if want := "They expire by themselves W + B = 2.02s after the"; !strings.Contains(stdout, want) {
		t.Errorf("load output has no %q:\n%s", want, stdout)
	}
	for _, k := range []string{"key-0", "key-1"} {
		n, err := key.Name(prefix, k, key.Absolute, key.Hash)
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := c.PTTL(context.Background(), n).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		if ttl <= 0 || ttl > 2020*time.Millisecond {
			t.Errorf("PTTL %s = %v after the run, want at most W + B = 2.02s", n, ttl)
		}
	}
}

// TestCLIDocExamples runs every "$ sluice …" example of docs/cli.md whose
// output is shown and compares the output (stdout and stderr together)
// with the lines that follow it, up to the end of the code block.
func TestCLIDocExamples(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	n := 0
	for i, l := range lines {
		args, ok := strings.CutPrefix(l, "$ sluice ")
		if !ok {
			continue
		}
		var want []string
		for _, o := range lines[i+1:] {
			if strings.HasPrefix(o, "```") || strings.HasPrefix(o, "$ ") {
				break
			}
			want = append(want, o)
		}
		n++
		_, stdout, stderr := runArgs(t, strings.Fields(args)...)
		if got := strings.TrimSuffix(stdout+stderr, "\n"); got != strings.Join(want, "\n") {
			t.Errorf("docs/cli.md: sluice %s prints\n%s\nthe doc shows\n%s", args, got, strings.Join(want, "\n"))
		}
	}
	if n == 0 {
		t.Error("docs/cli.md has no \"$ sluice\" example")
	}
}
