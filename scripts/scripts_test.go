package scripts

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestScriptRules checks the rules every script must keep (docs/data-model.md and
// the package doc): bounded work on any hash (HLEN before HGETALL); a header comment that lists KEYS, ARGV and the reply;
// every key it touches is KEYS[1], bound to h, and no key is built inside
// the script; no math.random, so a result depends on the arguments alone.
// The code rules hold for the text sent to Redis, its includes in place.
func TestScriptRules(t *testing.T) {
	files, err := filepath.Glob("*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts found: %v", err)
	}
	// Package cleanup's scripts keep the same rules (they include no file).
	cleanup, err := filepath.Glob("../cleanup/*.lua")
	if err != nil || len(cleanup) == 0 {
		t.Fatalf("no cleanup scripts found: %v", err)
	}
	files = append(files, cleanup...)
	call := regexp.MustCompile(`redis\.call\(([^)]*\)?)`)
	for _, f := range files {
		if strings.Contains(header(t, f), "-- Included by: ") {
			continue // a shared file, checked as part of each script that includes it
		}
		head := header(t, f) // fails the test when f cannot be read
		var src string
		if filepath.Dir(f) == "." {
			src, _ = source(f)
		} else {
			b, _ := os.ReadFile(f)
			src = string(b)
		}
		if !strings.Contains(head, "-- KEYS[1]") && !strings.Contains(head, "-- KEYS[i]") {
			t.Errorf("%s: header comment lacks KEYS[1] or KEYS[i]", f)
		}
		for _, want := range []string{"-- ARGV[1]", "Reply"} {
			if !strings.Contains(head, want) {
				t.Errorf("%s: header comment lacks %q", f, want)
			}
		}
		// The rules below are about code: drop comments (no script has "--"
		// inside a string).
		var code strings.Builder
		for _, line := range strings.Split(src, "\n") {
			if i := strings.Index(line, "--"); i >= 0 {
				line = line[:i]
			}
			code.WriteString(line + "\n")
		}
		src = code.String()
		// A script that reads the hashes of a set's limits touches one
		// hash per limit, KEYS[i] for 1 <= i <= #KEYS; every other script
		// touches KEYS[1] alone.
		set := strings.Contains(src, "KEYS[i]")
		if set {
			// Keys come from KEYS[i] only, bound to h (a local, or the
			// field h of a limit's state, L.h, l.h or L[H], which is set
			// from KEYS[i] alone).
			if m := regexp.MustCompile(`KEYS\[[^i]`).FindString(src); m != "" {
				t.Errorf("%s: uses %s...]: a set script takes its keys as KEYS[i]", f, m)
			}
			for _, m := range regexp.MustCompile(`local h = ([^\n,]*)`).FindAllStringSubmatch(src, -1) {
				if v := strings.TrimSpace(m[1]); v != "KEYS[i]" && v != "L.h" && v != "l.h" && v != "L[H]" {
					t.Errorf("%s: binds h to %s, want KEYS[i] or a limit's h", f, v)
				}
			}
			for _, m := range regexp.MustCompile(`\bh = ([^\n,}]*)`).FindAllStringSubmatch(src, -1) {
				if v := strings.TrimSpace(m[1]); v != "KEYS[i]" && v != "L.h" && v != "l.h" && v != "L[H]" && v != "h" {
					t.Errorf("%s: sets h to %s, want KEYS[i]", f, v)
				}
			}
		} else if !strings.Contains(src, "local h = KEYS[1]") {
			t.Errorf("%s: does not bind KEYS[1] to h", f)
		}
		bads := []string{"math.random", "redis.sha1hex"}
		if !set {
			bads = append(bads, "KEYS[2]")
		}
		for _, bad := range bads {
			if strings.Contains(src, bad) {
				t.Errorf("%s: uses %s", f, bad)
			}
		}
		// Bounded work on any hash: a hash is read whole (HGETALL) only
		// after HLEN says it holds at most 4,096 fields (internal/redisprov
		// MaxFields; the cleaner: SCANMAX, beyond which it scans in
		// pages), so a hash another client padded fails its own call at
		// once instead of holding Redis for every key.
		lines := strings.Split(src, "\n")
		for i, line := range lines {
			if !strings.Contains(line, "'HGETALL'") {
				continue
			}
			guard := strings.Join(lines[max(0, i-12):i], "\n")
			if !strings.Contains(guard, "nf > 4096 then error(") && !(filepath.Base(f) == "clean.lua" && strings.Contains(src, "if hlen > SCANMAX then return")) {
				t.Errorf("%s:%d: HGETALL without an HLEN bound before it", f, i+1)
			}
		}
		calls := call.FindAllStringSubmatch(src, -1)
		if len(calls) == 0 {
			t.Errorf("%s: no redis.call found", f)
		}
		for _, m := range calls {
			args := m[1]
			switch {
			case strings.HasPrefix(args, "'TIME'"):
			case regexp.MustCompile(`^'[A-Z]+', h[,)]`).MatchString(args):
			case set && regexp.MustCompile(`^'[A-Z]+', [Ll]\.h[,)]`).MatchString(args):
			case strings.HasPrefix(args, "unpack(args"):
				// abs_inc.lua builds its HSET in a table when the capacity moved
				if !strings.Contains(src, "local args = {'HSET', h,") {
					t.Errorf("%s: redis.call(unpack(args)) without args = {'HSET', h, ...}", f)
				}
			default:
				t.Errorf("%s: redis.call(%s: the key must be h (KEYS[1])", f, args)
			}
		}
	}
}

// header returns the comment lines that open file f.
func header(t *testing.T, f string) string {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var h strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "--") {
			break
		}
		h.WriteString(line + "\n")
	}
	return h.String()
}

// TestIncludes checks that each shared file's header names the scripts
// that include it, and that it is included once where it is.
func TestIncludes(t *testing.T) {
	files, err := filepath.Glob("*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts found: %v", err)
	}
	shared, included := map[string]string{}, map[string][]string{}
	for _, f := range files {
		if v := headerValue(header(t, f), "-- Included by: "); v != "" {
			shared[f] = v
			continue
		}
		_, inc := source(f)
		seen := map[string]bool{}
		for _, n := range inc {
			if seen[n] {
				t.Errorf("%s includes %s twice", f, n)
			}
			seen[n] = true
			included[n] = append(included[n], f)
		}
	}
	for f, users := range included {
		if _, ok := shared[f]; !ok {
			t.Errorf("%v include %s, whose header names no script that includes it", users, f)
		}
	}
	for f, named := range shared {
		users := included[f]
		sort.Strings(users)
		names := strings.Split(named, ", ")
		sort.Strings(names)
		if strings.Join(names, ", ") != strings.Join(users, ", ") {
			t.Errorf("%s: header says it is included by %v, the scripts that include it are %v", f, names, users)
		}
	}
}

// headerValue returns the .lua file names that follow prefix in a header
// line, joined by ", " ("" without the line).
func headerValue(head, prefix string) string {
	for _, line := range strings.Split(head, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			var names []string
			for _, w := range strings.Fields(v) {
				w = strings.TrimSuffix(w, ",")
				if !strings.HasSuffix(w, ".lua") {
					break
				}
				names = append(names, w)
			}
			return strings.Join(names, ", ")
		}
	}
	return ""
}
