package redisprov

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/scripts"
)

// luaSources reads every script of packages scripts and cleanup by file
// name, as it is sent to Redis: each line "-- include <file>" replaced by
// that file's text (package scripts, source).
func luaSources(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../../scripts/*.lua")
	if err != nil || len(files) < 8 {
		t.Fatalf("found %d scripts (%v), want the scripts of package scripts", len(files), err)
	}
	cleanup, err := filepath.Glob("../../cleanup/*.lua")
	if err != nil || len(cleanup) == 0 {
		t.Fatalf("found %d scripts (%v), want the scripts of package cleanup", len(cleanup), err)
	}
	files = append(files, cleanup...)
	read := func(f string) string {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	include := regexp.MustCompile(`(?m)^[ \t]*-- include ([a-z_]+\.lua)$`)
	src := map[string]string{}
	for _, f := range files {
		src[filepath.Base(f)] = include.ReplaceAllStringFunc(read(f), func(line string) string {
			return read(filepath.Join(filepath.Dir(f), include.FindStringSubmatch(line)[1]))
		})
	}
	return src
}

func dec(v int64) string { return strconv.FormatInt(v, 10) }

// TestLayoutsMatchScripts checks the scripts against the layouts of
// layout.go: every read of a packed field takes its decimals into the
// variables named after the layout, in its order (the scripts' convention:
// the value u read as the string us), with a pattern of as many numbers;
// and every multiplier and bound of a bucket value or a one-integer reply
// is the power of two the Go side decodes with.
func TestLayoutsMatchScripts(t *testing.T) {
	src := luaSources(t)

	// The write-back's mode: every script a reconciler calls reads it as
	// the one explicit argument WriteBack, not a sentinel value.
	for f, arg := range map[string]string{"abs_inc.lua": "ARGV[11]", "abs_set.lua": "ARGV[3 + 4 * nk]", "sup_inc.lua": "ARGV[15]", "sup_set.lua": "ARGV[4 + 6 * nk]"} {
		if !strings.Contains(src[f], arg+" == '"+WriteBack+"'") {
			t.Errorf("%s does not read the write-back mode as %s == '%s'", f, arg, WriteBack)
		}
	}

	// Reads of the packed fields: "a, b, c = string.match(x, PATTERN)",
	// PATTERN a literal or a local holding one.
	read := regexp.MustCompile(`(?m)^\s*(?:if [^\n]* then )?(?:local )?([a-z0-9]+(?:, [a-z0-9]+)*) = string\.match\([^,]+, ('[^']*'|[A-Z0-9]+)\)`)
	numbers := regexp.MustCompile(`%d\+`)
	for _, c := range []struct {
		layout FieldLayout
		extra  string // a variable after the layout's values: the rest of the field
		files  []string
	}{
		{AbsMeta, "", []string{"abs_inc.lua", "abs_get.lua"}},
		{AbsMetaZero, "", []string{"abs_inc.lua"}},
		{AbsSetMeta, "", []string{"abs_set.lua"}},
		{SupMeta, "", []string{"sup_inc.lua", "sup_allowed.lua", "sup_get.lua", "sup_set.lua", "sup_set_get.lua", "clean.lua"}},
		{SupRate, "kt", []string{"sup_inc.lua"}},
		{SupRate, "", []string{"sup_allowed.lua"}},
		{SupSetRate, "", []string{"sup_set.lua"}},
	} {
		vars := make([]string, len(c.layout.Names))
		for i, n := range c.layout.Names {
			vars[i] = n + "s"
		}
		want := strings.Join(vars, ", ")
		if c.extra != "" {
			want += ", " + c.extra
		}
		for _, f := range c.files {
			found := 0
			for _, m := range read.FindAllStringSubmatch(src[f], -1) {
				if m[1] != want {
					continue
				}
				pat := m[2]
				if !strings.HasPrefix(pat, "'") { // a local holding the pattern
					def := regexp.MustCompile(`local ` + pat + ` = ('[^']*')`).FindStringSubmatch(src[f])
					if def == nil {
						t.Errorf("%s: pattern %s of %q is not a local of the script", f, pat, want)
						continue
					}
					pat = def[1]
				}
				if n := len(numbers.FindAllString(pat, -1)); n != len(c.layout.Names) {
					t.Errorf("%s: %q reads %q with %s: %d numbers, the layout %v has %d", f, c.layout.Field, want, pat, n, c.layout.Names, len(c.layout.Names))
				}
				found++
			}
			if found == 0 {
				t.Errorf("%s reads no %q into %s: the script and the layout %v disagree", f, c.layout.Field, want, c.layout.Names)
			}
		}
	}
	// The cursor: read as four numbers after "k"'s own, written as rs - o,
	// rb, ra, rl.
	if !strings.Contains(src["sup_inc.lua"], `string.match(kt, '^`+strings.Repeat(` (%d+)`, len(SupCursor.Names))+`$')`) ||
		!strings.Contains(src["sup_inc.lua"], `fmt('`+strings.Repeat(` %d`, len(SupCursor.Names))+`', rs - oldest, rb, ra, rl)`) {
		t.Errorf("sup_inc.lua does not read and write the cursor %v as four decimals after %v", SupCursor.Names, SupRate.Names)
	}

	// Bucket values: count × LinkUnit + link, below LinkMaxCount.
	for _, f := range []string{"abs_inc.lua", "abs_get.lua", "abs_set.lua", "sup_inc.lua", "sup_get.lua", "sup_allowed.lua", "sup_set.lua", "sup_set_get.lua", "clean.lua"} {
		if !regexp.MustCompile(`\bP\b[^\n]*= [^\n]*\b` + dec(LinkUnit) + `\b`).MatchString(src[f]) {
			t.Errorf("%s has no P = %d (LinkUnit)", f, LinkUnit)
		}
	}
	closing := regexp.MustCompile(`ncount < (\d+) and (\w+) - newest < P then closed = ncount \* P \+ \((\w+) - newest\)`)
	for _, f := range []string{"abs_inc.lua", "abs_set.lua", "sup_inc.lua", "sup_set.lua"} {
		ms := closing.FindAllStringSubmatch(src[f], -1)
		if len(ms) == 0 {
			t.Errorf("%s closes no bucket as count * P + link", f)
		}
		for _, m := range ms {
			if m[1] != dec(LinkMaxCount) || m[2] != m[3] {
				t.Errorf("%s: %q, want ncount < %d (LinkMaxCount) and the link it tests", f, m[0], LinkMaxCount)
			}
		}
	}

	// The one-integer replies.
	short, absR, sup := dec(1<<ShortShift), dec(1<<AbsRetryShift), dec(1<<SupFieldBits)
	for f, want := range map[string][]string{
		"abs_inc.lua": {
			`remaining < ` + dec(ShortMaxRemaining) + ` and reset < P then`,
			`return remaining * ` + short + ` + reset`,
			`retry < ` + absR + ` and reset < ` + absR + ` then`,
			`return -(retry * ` + absR + ` + reset) - 1`,
		},
		"sup_inc.lua": {
			`local P = ` + short,
			`if remaining < ` + dec(ShortMaxRemaining) + ` and reset < P then return remaining * P + reset end`,
			`retry < ` + sup + ` and reset < ` + sup + ` then`,
			`return -(((f * 2 + a) * ` + sup + ` + retry) * ` + sup + ` + reset) - 1`,
		},
		"abs_set.lua": {
			`local P = ` + short,
			`if remaining >= ` + dec(ShortMaxRemaining) + ` or reset >= P then`,
			`S[r + i] = remaining * P + reset`,
		},
	} {
		for _, w := range want {
			if !strings.Contains(src[f], w) {
				t.Errorf("%s does not contain %q (layout.go)", f, w)
			}
		}
	}
}

// TestReplyLayouts: the bit fields of the one-integer replies fit where
// Decision reads them, every packed value stays an integer a Lua double
// holds exactly, and a value packed as the scripts pack it (in doubles)
// reads back whole at the ends of every field's range.
func TestReplyLayouts(t *testing.T) {
	const exact = 1 << 53 // doubles hold every integer below
	if SupAllowedBit != 2*SupFieldBits || SupFactorShift != SupAllowedBit+1 {
		t.Fatalf("suppressed reply: allowed at bit %d, factor from %d; want 32 and 33 after two 16-bit fields", SupAllowedBit, SupFactorShift)
	}
	if ShortMaxRemaining<<ShortShift > exact || (window.PPM*2+1)<<SupAllowedBit >= exact || 1<<(2*AbsRetryShift) > exact {
		t.Fatalf("a packed reply passes 2^53")
	}
	if LinkMaxCount*LinkUnit > exact {
		t.Fatalf("a bucket value passes 2^53")
	}
	pack := func(parts ...float64) int64 { // as Lua computes it, in doubles
		v := 0.0
		for i := 0; i < len(parts); i += 2 {
			v = v*parts[i] + parts[i+1]
		}
		return int64(v)
	}
	for _, rem := range []int64{0, 1, ShortMaxRemaining - 1} {
		for _, reset := range []int64{0, 1, 1<<ShortShift - 1} {
			r := pack(1, float64(rem), math.Exp2(ShortShift), float64(reset))
			d, err := Decision(r, 1<<40, window.OutcomeAllowed)
			if err != nil || d.Remaining != rem || d.ResetAfter != reset || !d.Allowed {
				t.Errorf("admission remaining %d reset %d packed %d: %+v, %v", rem, reset, r, d, err)
			}
		}
	}
	for _, retry := range []int64{0, 1, 1<<AbsRetryShift - 1} {
		for _, reset := range []int64{0, 1<<AbsRetryShift - 1} {
			r := -pack(1, float64(retry), math.Exp2(AbsRetryShift), float64(reset)) - 1
			d, err := Decision(r, 10, window.OutcomeAllowed, window.OutcomeRejected)
			if err != nil || d.Outcome != window.OutcomeRejected || d.RetryAfter != retry || d.ResetAfter != reset || d.Allowed {
				t.Errorf("absolute refusal retry %d reset %d packed %d: %+v, %v", retry, reset, r, d, err)
			}
		}
	}
	for _, f := range []int64{0, 1, window.PPM} {
		for _, a := range []int64{0, 1} {
			for _, retry := range []int64{0, 1<<SupFieldBits - 1} {
				for _, reset := range []int64{0, 1<<SupFieldBits - 1} {
					r := -pack(1, float64(f*2+a), math.Exp2(SupFieldBits), float64(retry), math.Exp2(SupFieldBits), float64(reset)) - 1
					d, err := Decision(r, 10, window.OutcomeAllowed, window.OutcomeSuppressed)
					if err != nil || d.Outcome != window.OutcomeSuppressed || d.FactorPPM != f || d.Allowed != (a == 1) || d.RetryAfter != retry || d.ResetAfter != reset {
						t.Errorf("suppressed f %d allowed %d retry %d reset %d packed %d: %+v, %v", f, a, retry, reset, r, d, err)
					}
				}
			}
		}
	}
	for _, c := range []int64{1, LinkMaxCount - 1} {
		for _, link := range []int64{1, LinkUnit - 1} {
			if n, l := BucketValue(pack(1, float64(c), float64(LinkUnit), float64(link))); n != c || l != link {
				t.Errorf("bucket count %d link %d: read %d, %d", c, link, n, l)
			}
		}
	}
}

// TestHashLayouts runs the scripts on Redis and reads the fields they
// write with the layouts: the meta fields of both strategies, of a set's
// limits, and a suppressed hash's "k" parse, and the values land where
// the layouts name them.
func TestHashLayouts(t *testing.T) {
	_, mini := redistest.Mini(t)
	for name, c := range map[string]*redis.Client{"real": redistest.Real(t).Client(t), "mini": mini} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			p := redistest.Prefix(t)
			const now, w, b = 1_000_000, 60_000, 600
			field := func(h, f string) string {
				v, err := c.HGet(ctx, h, f).Result()
				if err != nil {
					t.Fatalf("HGET %s %s: %v", h, f, err)
				}
				return v
			}

			abs := p + ":{a}:abs:h"
			// now, W, B, capacity, n, TTL
			if _, err := scripts.AbsInc.Run(ctx, c, []string{abs}, now, w, b, 10, 3, w+b).Result(); err != nil {
				t.Fatal(err)
			}
			m, ok := AbsMeta.Parse(field(abs, "m"))
			if !ok || m["c"] != 10 || m["u"] != 3 || m["o"] != now || m["n"] != now || m["nc"] != 3 {
				t.Errorf("absolute m %q read as %v, want c 10, u 3, o = n = %d, nc 3", field(abs, "m"), m, now)
			}

			sup := p + ":{s}:sup:h"
			// now, W, B, S, H, n, cache ms, draw ppm, TTL
			if _, err := scripts.SupInc.Run(ctx, c, []string{sup}, now, w, b, 10, 15, 2, 100, 0, w+b).Result(); err != nil {
				t.Fatal(err)
			}
			sm, ok := SupMeta.Parse(field(sup, "m"))
			if !ok || sm["u"] != 2 || sm["x"] != 0 || sm["o"] != now || sm["n"] != now || sm["nc"] != 2 || sm["nd"] != 0 {
				t.Errorf("suppressed m %q read as %v, want u 2, x 0, o = n = %d, nc 2, nd 0", field(sup, "m"), sm, now)
			}
			k, ok := SupRate.Parse(field(sup, "k"))
			if !ok || k["c"] != 10 || k["hc"] != 15 {
				t.Errorf("suppressed k %q read as %v, want c 10, hc 15", field(sup, "k"), k)
			}

			// A set's hash records its TTL span t, 0 when the call gives the
			// clock (docs/data-model.md).
			as := []string{p + ":{b}:abs:h:x", p + ":{b}:abs:h:y"}
			// now, n, then per limit W, B, C, TTL
			if _, err := scripts.AbsSet.Run(ctx, c, as, now, 4, w, b, 10, w+b, 2*w, b, 20, 2*w+b).Result(); err != nil {
				t.Fatal(err)
			}
			for i, h := range as {
				m, ok := AbsSetMeta.Parse(field(h, "m"))
				if !ok || m["c"] != int64(10*(i+1)) || m["u"] != 4 || m["n"] != now || m["nc"] != 4 || m["t"] != 0 {
					t.Errorf("set limit %d: m %q read as %v, want c %d, u 4, n %d, nc 4, t 0 (the clock given)", i, field(h, "m"), m, 10*(i+1), now)
				}
			}

			ss := []string{p + ":{c}:sup:h:x", p + ":{c}:sup:h:y"}
			// now, cache ms, draw ppm, then per limit W, B, S, H, n, TTL
			if _, err := scripts.SupSet.Run(ctx, c, ss, now, 100, 0, w, b, 10, 15, 4, w+b, 2*w, b, 20, 30, 4, 2*w+b).Result(); err != nil {
				t.Fatal(err)
			}
			for i, h := range ss {
				m, ok1 := SupMeta.Parse(field(h, "m"))
				k, ok2 := SupSetRate.Parse(field(h, "k"))
				if !ok1 || !ok2 || m["u"] != 4 || m["nc"] != 4 || k["c"] != int64(10*(i+1)) || k["hc"] != int64(15*(i+1)) || k["t"] != 0 {
					t.Errorf("suppressed set limit %d: m %q, k %q read as %v, %v", i, field(h, "m"), field(h, "k"), m, k)
				}
			}
		})
	}
}
