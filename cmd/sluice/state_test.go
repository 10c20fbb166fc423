package main

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// TestCleanupKeepsSpentDayQuota: a day quota in a set ({100/s, 150/day},
// spent) stays spent through a default cleanup.Run, a cleanup.Run given
// a one-minute window, and `sluice cleanup` with and without --window 1m;
// each of those passes, told no window of its own, deletes a dead
// single-limit hash whose TTL was removed (PERSIST) and a dead set hash.
func TestCleanupKeepsSpentDayQuota(t *testing.T) {
	t.Parallel()
	srv := redistest.Real(t)
	c := srv.Client(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	free, err := limiter.NewSet(
		limiter.Limit{Name: "per-second", Rate: limiter.PerSecond(100), Window: time.Second},
		limiter.Limit{Name: "per-day", Rate: limiter.PerDay(150), Window: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	l, err := redisabs.New(c, limiter.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.IncSet(ctx, "user:3", free, 100); err != nil || !d.Allowed {
		t.Fatalf("IncSet(100) = %+v, %v", d, err)
	}
	time.Sleep(1100 * time.Millisecond) // the second's 100 expire
	if d, err := l.IncSet(ctx, "user:3", free, 50); err != nil || !d.Allowed || d.Limits[1].Remaining != 0 {
		t.Fatalf("IncSet(50) = %+v, %v; want admitted with the day spent", d, err)
	}
	spent := func(pass string) {
		t.Helper()
		d, err := l.IncSet(ctx, "user:3", free, 1)
		if err != nil || d.Allowed || !d.Limits[1].Refused {
			t.Fatalf("after %s: IncSet = %+v, %v; want refused by the spent day", pass, d, err)
		}
		u, err := l.GetSet(ctx, "user:3", free)
		if err != nil || u[1].Used != 150 {
			t.Fatalf("after %s: GetSet = %+v, %v; want 150 used of the day", pass, u, err)
		}
	}
	spent("spending")

	// The dead hashes each pass must delete, written an hour ago.
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	old, err := redisabs.New(c, limiter.WithPrefix(prefix), limiter.WithClock(fixedClock(now.Add(-time.Hour)).Now))
	if err != nil {
		t.Fatal(err)
	}
	single, err := key.Name(prefix, "dead-single", key.Absolute, key.Hash)
	if err != nil {
		t.Fatal(err)
	}
	setHash, err := key.LimitName(prefix, "dead-set", key.Absolute, "per-second")
	if err != nil {
		t.Fatal(err)
	}
	seedDead := func() {
		t.Helper()
		if _, err := old.Inc(ctx, "dead-single", limiter.PerMinute(10), 1); err != nil {
			t.Fatal(err)
		}
		if err := c.Persist(ctx, single).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := old.IncSet(ctx, "dead-set", free, 1); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(pass string) {
		t.Helper()
		if n := c.Exists(ctx, single, setHash).Val(); n != 0 {
			t.Fatalf("after %s: %d of the dead hashes left, want 0", pass, n)
		}
	}
	url := "redis://" + srv.Addr
	passes := []struct {
		name string
		run  func() error
	}{
		{"cleanup.Run", func() error {
			cl, err := cleanup.New(c, cleanup.WithPrefix(prefix))
			if err != nil {
				return err
			}
			_, err = cl.Run(ctx)
			return err
		}},
		{"cleanup.Run with a 1-minute window", func() error {
			cl, err := cleanup.New(c, cleanup.WithPrefix(prefix), cleanup.WithWindow(time.Minute, 0), cleanup.WithRate(math.Inf(1)))
			if err != nil {
				return err
			}
			_, err = cl.Run(ctx)
			return err
		}},
		{"sluice cleanup", func() error {
			if st, out, stderr := runArgs(t, "cleanup", "--redis", url, "--prefix", prefix); st != exitOK || !strings.Contains(out, "deleted  2 hashes") {
				t.Fatalf("sluice cleanup = %d\n%s\n%s", st, out, stderr)
			}
			return nil
		}},
		{"sluice cleanup --window 1m", func() error {
			if st, out, stderr := runArgs(t, "cleanup", "--redis", url, "--prefix", prefix, "--window", "1m"); st != exitOK || !strings.Contains(out, "deleted  2 hashes") {
				t.Fatalf("sluice cleanup --window 1m = %d\n%s\n%s", st, out, stderr)
			}
			return nil
		}},
	}
	for _, p := range passes {
		seedDead()
		if err := p.run(); err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		spent(p.name)
		gone(p.name)
	}
}

// TestInspectSetsAndSingles: `sluice inspect KEY` shows every state the
// key has, a single limit and each limit of a set, each with the window it
// records, its usage and its life; --limit narrows it to one limit.
func TestInspectSetsAndSingles(t *testing.T) {
	t.Parallel()
	mr, c := redistest.Mini(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	// No per-call timeout: this test checks what inspect prints of the
	// states the calls wrote, and a call shed on a loaded machine would
	// write nothing; it certifies no bound.
	l, err := redisabs.New(c, limiter.WithPrefix(prefix), limiter.WithTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	free, err := limiter.NewSet(
		limiter.Limit{Name: "per-second", Rate: limiter.PerSecond(10), Window: time.Second},
		limiter.Limit{Name: "per-day", Rate: limiter.PerDay(1000), Window: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.IncSet(ctx, "user:3", free, 7); err != nil || !d.Allowed {
		t.Fatalf("IncSet = %+v, %v", d, err)
	}
	if d, err := l.Inc(ctx, "user:3", limiter.PerMinute(100), 4); err != nil || !d.Allowed {
		t.Fatalf("Inc = %+v, %v", d, err)
	}
	url := "redis://" + mr.Addr()
	st, out, stderr := runArgs(t, "inspect", "--redis", url, "--prefix", prefix, "user:3")
	if st != exitOK {
		t.Fatalf("inspect = %d, stderr:\n%s", st, stderr)
	}
	for _, want := range []string{
		prefix + ":{user%3A3}:abs:h\n",
		`key "user:3", single limit, absolute strategy`,
		`record "a2 60000 600": window 1m0s, bucket 600ms`,
		"4 units admitted in the live window of capacity 100.",
		prefix + ":{user%3A3}:abs:h:per-day\n",
		`key "user:3", limit "per-day" of a set, absolute strategy`,
		`record "a2 86400000 864000": window 24h0m0s, bucket 14m24s`,
		"life 24h14m", // W + B less the few ms since the write
		"7 units admitted in the live window of capacity 1000.",
		prefix + ":{user%3A3}:abs:h:per-second\n",
		`key "user:3", limit "per-second" of a set, absolute strategy`,
		"7 units admitted in the live window of capacity 10.",
	} {
		if !strings.Contains(out, want) && !containsLine(out, want) {
			t.Errorf("inspect output has no %q:\n%s", want, out)
		}
	}
	st, out, stderr = runArgs(t, "inspect", "--redis", url, "--prefix", prefix, "--limit", "per-day", "user:3")
	if st != exitOK || !strings.Contains(out, ":abs:h:per-day\n") || strings.Contains(out, "per-second") || strings.Contains(out, "single limit") {
		t.Fatalf("inspect --limit per-day = %d, stdout:\n%s\nstderr:\n%s", st, out, stderr)
	}
	st, out, _ = runArgs(t, "inspect", "--redis", url, "--prefix", prefix, "--limit", "per-week", "user:3")
	if st != exitOK || !strings.Contains(out, ":abs:h:per-week: no such key") {
		t.Fatalf("inspect --limit per-week = %d, stdout:\n%s", st, out)
	}
}
