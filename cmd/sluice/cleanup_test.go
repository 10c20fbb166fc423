package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

func TestCleanupUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no redis", []string{"cleanup"}, "--redis is required"},
		{"argument", []string{"cleanup", "--redis", "redis://127.0.0.1:1", "now"}, `unexpected argument "now"`},
		{"zero rate", []string{"cleanup", "--redis", "redis://127.0.0.1:1", "--keys-per-second", "0"}, "--keys-per-second 0"},
		{"NaN rate", []string{"cleanup", "--redis", "redis://127.0.0.1:1", "--keys-per-second", "NaN"}, "--keys-per-second NaN"},
		{"rate is not cleanup's", []string{"cleanup", "--redis", "redis://127.0.0.1:1", "--rate", "5"}, "unknown flag --rate"},
		{"zero window", []string{"cleanup", "--redis", "redis://127.0.0.1:1", "--window", "0s"}, "--window 0s: want a positive window"},
		{"bucket alone", []string{"cleanup", "--redis", "redis://127.0.0.1:1", "--bucket", "1s"}, "--bucket needs --window"},
		{"bad window", []string{"cleanup", "--redis", "redis://127.0.0.1:1", "--window", "1us"}, "window"},
		{"bad bucket", []string{"cleanup", "--redis", "redis://127.0.0.1:1", "--window", "1h", "--bucket", "1ms"}, "W/B"},
		{"bad prefix", []string{"cleanup", "--redis", "redis://127.0.0.1:1", "--prefix", "a{b"}, "prefix"},
		{"bad threshold", []string{"cleanup", "--redis", "redis://127.0.0.1:1", "--trim-threshold", "-1"}, "trim threshold"},
		{"bad url", []string{"cleanup", "--redis", "http://x"}, "--redis"},
		{"unknown flag", []string{"cleanup", "--bogus"}, "sluice cleanup: unknown flag --bogus\nRun 'sluice cleanup --help' for usage.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, stderr := runArgs(t, tc.args...)
			if st != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("%q = %d, stderr:\n%s\nwant %d and %q", tc.args, st, stderr, exitUsage, tc.want)
			}
		})
	}
}

func TestCleanupUnreachable(t *testing.T) {
	t.Parallel()
	st, _, stderr := runArgs(t, "cleanup", "--redis", "redis://127.0.0.1:1")
	if st != exitFailure || !strings.Contains(stderr, "cannot reach Redis") {
		t.Errorf("cleanup on a closed port = %d, stderr:\n%s", st, stderr)
	}
}

// TestCleanupRun: the command deletes the dead hashes of its prefix,
// judged by the window each records (no --window needed), and prints the
// report; --dry-run lists them and changes nothing; a held lease is exit 1.
func TestCleanupRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Real(t)
	c := srv.Client(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	old, err := redisabs.New(c, limiter.WithPrefix(prefix), limiter.WithClock(fixedClock(now.Add(-time.Hour)).Now))
	if err != nil {
		t.Fatal(err)
	}
	live, err := redisabs.New(c, limiter.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		old.Inc(ctx, "dead"+itoa(int64(i)), limiter.PerMinute(10), 1)
		live.Inc(ctx, "live"+itoa(int64(i)), limiter.PerMinute(10), 1)
	}
	url := "redis://" + srv.Addr
	count := func() int { return len(c.Keys(ctx, prefix+":{*").Val()) }

	// The dry run, with or without a window, lists each hash it would
	// delete with the window it records.
	for _, extra := range [][]string{{"--window", "1m"}, nil} {
		args := append([]string{"cleanup", "--redis", url, "--prefix", prefix, "--dry-run"}, extra...)
		st, out, stderr := runArgs(t, args...)
		if st != exitOK || !strings.Contains(out, "deleted  5 hashes with no live bucket (dry run: would be)") ||
			strings.Count(out, "window 1m0s, bucket 600ms, TTL ") != 5 || !strings.Contains(out, `"`+prefix+":{dead0}:abs:h") || count() != 10 {
			t.Fatalf("dry run %q = %d, %d keys left, stdout:\n%s\nstderr:\n%s", extra, st, count(), out, stderr)
		}
	}
	st, out, stderr := runArgs(t, "cleanup", "--redis", url, "--prefix", prefix, "--keys-per-second", "inf")
	for _, want := range []string{"scanned  10 keys", "live     5 hashes kept", "deleted  5 hashes with no live bucket\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if st != exitOK || count() != 5 {
		t.Fatalf("cleanup = %d, %d keys left, stdout:\n%s\nstderr:\n%s", st, count(), out, stderr)
	}
	c.Set(ctx, prefix+":cleanup:lock", "someone", time.Minute)
	st, _, stderr = runArgs(t, "cleanup", "--redis", url, "--prefix", prefix, "--window", "1m")
	if st != exitFailure || !strings.Contains(stderr, "another cleaner holds the lease") {
		t.Fatalf("cleanup with the lease held = %d, stderr:\n%s", st, stderr)
	}
}

// TestCleanupCluster: --cluster walks every master.
func TestCleanupCluster(t *testing.T) {
	t.Parallel()
	cc := redistest.Cluster(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	l, err := redisabs.New(cc, limiter.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		l.Inc(ctx, "k"+itoa(int64(i)), limiter.PerMinute(10), 1)
	}
	st, out, stderr := runArgs(t, "cleanup", "--cluster", "--redis", "redis://"+redistest.ClusterMasters(t)[0], "--prefix", prefix, "--window", "1m")
	if st != exitOK || !strings.Contains(out, "3 node(s)") || !strings.Contains(out, "live     30 hashes kept") {
		t.Fatalf("cleanup --cluster = %d, stdout:\n%s\nstderr:\n%s", st, out, stderr)
	}
}

// fixedClock reads one instant.
type fixedClock time.Time

func (f fixedClock) Now() time.Time { return time.Time(f) }
