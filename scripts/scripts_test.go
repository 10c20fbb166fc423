package scripts

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestScriptRules checks the rules every script must keep (docs/data-model.md and
// the package doc): a header comment that lists KEYS, ARGV and the reply;
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
		for _, want := range []string{"-- KEYS[1]", "-- ARGV[1]", "Reply"} {
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
		if !strings.Contains(src, "local h = KEYS[1]") {
			t.Errorf("%s: does not bind KEYS[1] to h", f)
		}
		for _, bad := range []string{"KEYS[2]", "math.random", "redis.sha1hex"} {
			if strings.Contains(src, bad) {
				t.Errorf("%s: uses %s", f, bad)
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
