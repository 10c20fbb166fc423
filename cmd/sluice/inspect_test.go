package main

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

var inspectStart = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// TestInspectAbsolute: inspect shows what two Incs wrote, and changes
// nothing.
func TestInspectAbsolute(t *testing.T) {
	t.Parallel()
	mr, c := redistest.Mini(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	l, err := redisabs.New(c, limiter.WithWindow(10*time.Second), limiter.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	const k = "user:42"
	rate := limiter.PerSecond(10) // C = 100 over 10 s, B = 100 ms
	mr.SetTime(inspectStart)
	if _, err := l.Inc(ctx, k, rate, 3); err != nil {
		t.Fatal(err)
	}
	mr.SetTime(inspectStart.Add(250 * time.Millisecond))
	if _, err := l.Inc(ctx, k, rate, 4); err != nil {
		t.Fatal(err)
	}
	mr.SetTime(inspectStart.Add(10100 * time.Millisecond)) // the first bucket has just expired
	name, _ := key.Name(prefix, k, key.Absolute, key.Hash)
	fields, _ := c.HGetAll(ctx, name).Result()
	ttl, _ := c.PTTL(ctx, name).Result()

	st, out, stderr := runArgs(t, "inspect", "--redis", "redis://"+mr.Addr(), "--prefix", prefix, "--window", "10s", k)
	if st != exitOK {
		t.Fatalf("inspect = %d, stderr:\n%s", st, stderr)
	}
	t0 := inspectStart.UnixMilli()
	for _, want := range []string{
		name,
		`key "user:42", single limit, absolute strategy; Redis time 1772366410100 ms (2026-03-01 12:00:10.100 UTC)`,
		`record "a2 10000 100": window 10s, bucket 100ms`,
		"TTL 10.1s",
		"c  stored capacity                    100  of the latest Inc",
		"u  units in stored buckets              7  buckets sum to 7",
		"o  oldest bucket start      " + itoa(t0) + "  10.100s ago",
		"n  newest bucket start      " + itoa(t0+250) + "  9.850s ago",
		"nc  newest bucket count                 4",
		"2 buckets, oldest first (live while age < W + B = 10.1s, window 10s):",
		itoa(t0) + "  10.100s      3  expired",
		itoa(t0+250) + "   9.850s      4  live",
		"4 units admitted in the live window of capacity 100.",
	} {
		if !containsLine(out, want) {
			t.Errorf("inspect output has no %q:\n%s", want, out)
		}
	}
	after, _ := c.HGetAll(ctx, name).Result()
	ttlAfter, _ := c.PTTL(ctx, name).Result()
	if !reflect.DeepEqual(after, fields) || ttlAfter != ttl {
		t.Errorf("inspect changed the key: %v, TTL %v; was %v, TTL %v", after, ttlAfter, fields, ttl)
	}

	// 1 ms earlier the first bucket is still live: a bucket lives W + B
	// (an inspect that counted to W alone called it expired from 10 s on).
	mr.SetTime(inspectStart.Add(10099 * time.Millisecond))
	st, out, stderr = runArgs(t, "inspect", "--redis", "redis://"+mr.Addr(), "--prefix", prefix, "--window", "10s", k)
	if st != exitOK {
		t.Fatalf("inspect = %d, stderr:\n%s", st, stderr)
	}
	for _, want := range []string{
		itoa(t0) + "  10.099s      3  live",
		"7 units admitted in the live window of capacity 100.",
	} {
		if !containsLine(out, want) {
			t.Errorf("inspect output has no %q:\n%s", want, out)
		}
	}
	// --bucket gives B when it is not W/100.
	st, out, stderr = runArgs(t, "inspect", "--redis", "redis://"+mr.Addr(), "--prefix", prefix, "--window", "10s", "--bucket", "50ms", k)
	if st != exitOK {
		t.Fatalf("inspect --bucket 50ms = %d, stderr:\n%s", st, stderr)
	}
	if want := itoa(t0) + "  10.099s      3  expired"; !containsLine(out, want) {
		t.Errorf("inspect --bucket 50ms output has no %q:\n%s", want, out)
	}
	if st, _, _ := runArgs(t, "inspect", "--redis", "redis://"+mr.Addr(), "--bucket", "50ms", k); st != exitUsage {
		t.Errorf("inspect --bucket without --window = %d, want %d", st, exitUsage)
	}
}

func TestInspectSuppressed(t *testing.T) {
	t.Parallel()
	mr, c := redistest.Mini(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	draws := []float64{0.1} // below any factor above 0.1: refused when suppressed
	l, err := redissup.New(c, limiter.WithWindow(time.Second), limiter.WithPrefix(prefix),
		limiter.WithHardLimitFactor(2), limiter.WithSuppressionCache(0), limiter.WithRandom(func() float64 { return draws[0] }))
	if err != nil {
		t.Fatal(err)
	}
	const k = "tenant 7"
	rate := limiter.PerSecond(5) // S = 5, H = 10 over 1 s
	mr.SetTime(inspectStart)
	for range 9 {
		if _, err := l.Inc(ctx, k, rate, 1); err != nil {
			t.Fatal(err)
		}
	}
	u, err := l.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if u.Declined == 0 {
		t.Fatalf("Get(%q) = %+v: want some declined units for the test", k, u)
	}
	st, out, stderr := runArgs(t, "inspect", "--redis", "redis://"+mr.Addr(), "--prefix", prefix, "--strategy", "sup", k)
	if st != exitOK {
		t.Fatalf("inspect = %d, stderr:\n%s", st, stderr)
	}
	name, _ := key.Name(prefix, k, key.Suppressed, key.Hash)
	for _, want := range []string{
		name,
		`key "tenant 7", single limit, suppressed strategy`,
		`record "s2 1000 10": window 1s, bucket 10ms`,
		"life 1.01s: the newest bucket dies then, and the state with it",
		"TTL 1.01s",
		"c   soft capacity S",
		"hc  hard capacity H",
		"u   units offered in stored buckets   9  buckets sum to 9",
		"units accepted                " + itoa(u.Used),
		"x   units declined                    " + itoa(u.Declined),
		"1 bucket, oldest first (live while age < W + B = 1.01s, window 1s):", // the recorded window
		itoa(inspectStart.UnixMilli()) + "  0.000s        9         " + itoa(u.Declined) + "         " + itoa(u.Used),
	} {
		if !containsLine(out, want) {
			t.Errorf("inspect output has no %q:\n%s", want, out)
		}
	}
}

func TestInspectMissingKey(t *testing.T) {
	t.Parallel()
	mr, _ := redistest.Mini(t)
	st, out, stderr := runArgs(t, "inspect", "--redis", "redis://"+mr.Addr(), "nobody")
	if st != exitOK || stderr != "" {
		t.Fatalf("inspect = %d, stderr %q", st, stderr)
	}
	if !strings.Contains(out, "sluice:{nobody}:abs:h") || !strings.Contains(out, "no such key") {
		t.Errorf("inspect of a missing key:\n%s", out)
	}
}

func TestInspectWrongType(t *testing.T) {
	t.Parallel()
	mr, c := redistest.Mini(t)
	if err := c.Set(context.Background(), "sluice:{str}:abs:h", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	st, _, stderr := runArgs(t, "inspect", "--redis", "redis://"+mr.Addr(), "str")
	if st != exitFailure || !strings.Contains(stderr, "WRONGTYPE") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("inspect of a string = %d, stderr %q; want 1 and one WRONGTYPE line", st, stderr)
	}
}

func TestParseHash(t *testing.T) {
	t.Parallel()
	// A suppressed hash: the newest bucket (200) in "m", an older one as a
	// field with its declined count, the cursor, fields of an earlier
	// layout ("n") and foreign ones.
	h := parseHash(map[string]string{
		"100": "12884901988", "d100": "1", "m": "8 2 100 200 5 1", "k": "50 75 250000 190",
		"r": "100 0 2 100 100", "n": "200", "zz": "9", "c2": "x",
	}, false)
	want := []bucket{{start: 100, count: 3, declined: 1}, {start: 200, count: 5, declined: 1}}
	if !reflect.DeepEqual(h.buckets, want) {
		t.Errorf("buckets = %+v, want %+v", h.buckets, want)
	}
	wantMeta := map[string]int64{"c": 50, "hc": 75, "u": 8, "x": 2, "o": 100, "n": 200, "nc": 5, "nd": 1, "f": 250000, "ft": 190}
	if !reflect.DeepEqual(h.meta, wantMeta) {
		t.Errorf("meta = %v, want %v", h.meta, wantMeta)
	}
	if !reflect.DeepEqual(h.cursor, []int64{100, 0, 2, 100, 100}) {
		t.Errorf("cursor = %v", h.cursor)
	}
	if !reflect.DeepEqual(h.other, map[string]string{"n": "200", "zz": "9", "c2": "x"}) {
		t.Errorf("other = %v", h.other)
	}
}

// containsLine reports whether a line of out contains want, with runs of
// spaces in both taken as one.
func containsLine(out, want string) bool {
	w := strings.Join(strings.Fields(want), " ")
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(strings.Join(strings.Fields(l), " "), w) {
			return true
		}
	}
	return false
}

// TestInspectFactorAge is the regression test for the age of a suppressed
// hash's cached factor, which inspect used to count from 1970 when no
// factor was cached (ft 0): ft 0 is "none cached", and a cached factor's
// age is told from the key's own time, its newest bucket, also when the
// hash was written under a limiter's clock far from Redis TIME.
func TestInspectFactorAge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		cache time.Duration
		want  string
	}{
		{"none cached", 0, "ft  factor computed at  0  none cached"},
		{"cached", 100 * time.Millisecond, "0.000s after the newest bucket opened;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mr, c := redistest.Mini(t)
			mr.SetTime(inspectStart)
			prefix := redistest.Prefix(t)
			// The limiter's clock is a year behind Redis TIME.
			clk := fixedClock(inspectStart.Add(-365 * 24 * time.Hour))
			l, err := redissup.New(c, limiter.WithWindow(time.Second), limiter.WithPrefix(prefix), limiter.WithClock(clk.Now),
				limiter.WithHardLimitFactor(2), limiter.WithSuppressionCache(tc.cache), limiter.WithRandom(func() float64 { return 0.99 }))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close(ctx)
			const k = "k"
			for range 8 { // S = 5: the later calls compute a factor
				if _, err := l.Inc(ctx, k, limiter.PerSecond(5), 1); err != nil {
					t.Fatal(err)
				}
			}
			st, out, stderr := runArgs(t, "inspect", "--redis", "redis://"+mr.Addr(), "--prefix", prefix, "--strategy", "sup", k)
			if st != exitOK {
				t.Fatalf("inspect = %d, stderr:\n%s", st, stderr)
			}
			line := ""
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "factor computed at") {
					line = strings.Join(strings.Fields(l), "  ")
				}
			}
			if !strings.Contains(line, strings.Join(strings.Fields(tc.want), "  ")) {
				t.Errorf("inspect's ft line = %q, want %q in it; output:\n%s", line, tc.want, out)
			}
		})
	}
}
