package scripts

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestScriptRules checks the rules every script must keep (docs/data-model.md and
// the package doc): bounded work on any hash (HLEN before HGETALL); a header comment that lists KEYS, ARGV and the reply;
// every key it touches is KEYS[1], bound to h, and no key is built inside
// the script; no math.random, so a result depends on the arguments alone.
func TestScriptRules(t *testing.T) {
	files, err := filepath.Glob("*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts found: %v", err)
	}
	call := regexp.MustCompile(`redis\.call\(([^)]*\)?)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		var header strings.Builder
		for _, line := range strings.Split(src, "\n") {
			if !strings.HasPrefix(line, "--") {
				break
			}
			header.WriteString(line + "\n")
		}
		if !strings.Contains(header.String(), "-- KEYS[1]") && !strings.Contains(header.String(), "-- KEYS[i]") {
			t.Errorf("%s: header comment lacks KEYS[1] or KEYS[i]", f)
		}
		for _, want := range []string{"-- ARGV[1]", "Reply"} {
			if !strings.Contains(header.String(), want) {
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
			if !strings.Contains(guard, "nf > 4096 then error(") && !(f == "clean.lua" && strings.Contains(src, "if hlen > SCANMAX then return")) {
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
