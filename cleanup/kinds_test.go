package cleanup_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/scripts"
)

// write records n units on the hash name at now (ms) with the layout of
// strategy, W and B in ms, and a TTL of an hour, by the providers' own
// scripts.
func write(t testing.TB, c redis.Scripter, strategy, name string, now, w, b, n int64) {
	t.Helper()
	var err error
	if strategy == key.Absolute {
		err = scripts.AbsInc.Run(ctx, c, []string{name}, now, w, b, 1000, n, 3_600_000).Err()
	} else {
		err = scripts.SupInc.Run(ctx, c, []string{name}, now, w, b, 1000, 1000, n, 0, 0, 3_600_000).Err()
	}
	if err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
}

func limitName(t testing.TB, prefix, k, strategy, limit string) string {
	t.Helper()
	n, err := key.LimitName(prefix, k, strategy, limit)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestKinds: which window judges which hash (WithWindowFunc over WithSet
// over WithWindow), what happens without one, which keys are left alone
// and why, WithDeleteUnknown, and the dry run.
func TestKinds(t *testing.T) {
	c := redistest.Real(t).Client(t)
	prefix := redistest.Prefix(t)
	now := redisNow(t, c).UnixMilli()
	const hour = 3_600_000
	set, err := limiter.NewSet(
		limiter.Limit{Name: "second", Rate: limiter.PerSecond(10), Window: time.Second},
		limiter.Limit{Name: "daily", Rate: limiter.PerDay(1000), Window: 24 * time.Hour},
	)
	if err != nil {
		t.Fatal(err)
	}
	n := func(k, s string) string { return hashName(t, prefix, k, s) }
	hashes := map[string]string{ // Redis key → what it is
		n("dead", key.Absolute):                             "dead under W = 1 min",
		n("dead", key.Suppressed):                           "dead under W = 1 min",
		n("live", key.Absolute):                             "live",
		n("func", key.Absolute):                             "live under the WindowFunc's 2 h, dead under 1 min",
		limitName(t, prefix, "u", key.Absolute, "second"):   "dead under its limit",
		limitName(t, prefix, "u", key.Suppressed, "daily"):  "live under its limit of a day, dead under 1 min",
		limitName(t, prefix, "u", key.Absolute, "unlisted"): "a limit of no set: W = 1 min",
		n("persisted", key.Suppressed):                      "live, no TTL",
	}
	write(t, c, key.Absolute, n("dead", key.Absolute), now-hour, 60_000, 600, 1)
	write(t, c, key.Suppressed, n("dead", key.Suppressed), now-hour, 60_000, 600, 1)
	write(t, c, key.Absolute, n("live", key.Absolute), now-1000, 60_000, 600, 1)
	write(t, c, key.Absolute, n("func", key.Absolute), now-hour, 2*hour, 72_000, 1)
	write(t, c, key.Absolute, limitName(t, prefix, "u", key.Absolute, "second"), now-hour, 1000, 10, 1)
	write(t, c, key.Suppressed, limitName(t, prefix, "u", key.Suppressed, "daily"), now-hour, 24*hour, 864_000, 1)
	write(t, c, key.Absolute, limitName(t, prefix, "u", key.Absolute, "unlisted"), now-hour, 60_000, 600, 1)
	write(t, c, key.Suppressed, n("persisted", key.Suppressed), now-1000, 60_000, 600, 1)
	c.Persist(ctx, n("persisted", key.Suppressed))
	// Keys left alone.
	unknown := map[string]cleanup.Reason{
		prefix + ":{k}:xyz:h":       cleanup.UnknownStrategy,
		prefix + ":{k}:abs:a":       cleanup.UnknownLayout,
		prefix + ":{old}:abs:h":     cleanup.UnknownLayout, // an earlier layout: no "m"
		prefix + ":{str}:sup:h":     cleanup.UnknownLayout, // a string
		prefix + ":{bad}:abs:h":     cleanup.UnknownLayout, // "m" unreadable
		prefix + ":{nonc}:sup:h":    cleanup.UnknownLayout, // an earlier layout: no "m"
		prefix + ":{k}":             cleanup.Foreign,
		prefix + ":{k}:abs:h:Upper": cleanup.Foreign,
		prefix + ":{k}:abs:h:x:y":   cleanup.Foreign,
		prefix + ":{%zz}:abs:h":     cleanup.Foreign,
	}
	c.HSet(ctx, prefix+":{k}:xyz:h", "m", "1 1 1 1 1")
	c.HSet(ctx, prefix+":{k}:abs:a", "1", "1")
	c.HSet(ctx, prefix+":{old}:abs:h", "1767268800000", "3")
	c.Set(ctx, prefix+":{str}:sup:h", "x", 0)
	c.HSet(ctx, prefix+":{bad}:abs:h", "m", "1 2 three")
	c.HSet(ctx, prefix+":{nonc}:sup:h", "n", "1", "o", "1", "u", "1")
	for k, why := range unknown {
		if why == cleanup.Foreign {
			c.Set(ctx, k, "x", 0)
		}
	}
	all := func() map[string]string {
		out := map[string]string{}
		keys, _ := c.Keys(ctx, prefix+":*").Result()
		for _, k := range keys {
			d, _ := c.Dump(ctx, k).Result()
			ttl, _ := c.PTTL(ctx, k).Result()
			out[k] = fmt.Sprintf("%s/%v", d, ttl > 0)
		}
		return out
	}
	before := all()
	if len(before) != len(hashes)+len(unknown) {
		t.Fatalf("seeded %d keys, want %d", len(before), len(hashes)+len(unknown))
	}

	fn := func(p key.Parsed) (time.Duration, time.Duration, bool) {
		return 2 * time.Hour, 0, p.Key == "func"
	}
	opts := []cleanup.Option{cleanup.WithPrefix(prefix), cleanup.WithRate(math.Inf(1)),
		cleanup.WithWindow(time.Minute, 0), cleanup.WithSet(set), cleanup.WithWindowFunc(fn),
		cleanup.WithDeleteUnknown(func(k string) bool { return strings.Contains(k, ":xyz:") })}
	wantSkipped := map[cleanup.Reason]int64{cleanup.UnknownLayout: 5, cleanup.Foreign: 4}
	want := cleanup.Report{CleanupReport: limiter.CleanupReport{Scanned: int64(len(before)), Deleted: 4},
		Prefix: prefix, Nodes: 1, Live: 4, TTLSet: 1, Unlinked: 1, Skipped: wantSkipped}

	// A dry run reports what a pass would do and writes nothing.
	r, err := newCleaner(t, c, append(opts, cleanup.WithDryRun())...).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dry := want
	dry.DryRun = true
	checkDeletions(t, r, 4)
	r.Examples, r.Duration, r.Deletions = nil, 0, nil
	if !reflect.DeepEqual(r, dry) {
		t.Errorf("dry run:\n%v\nwant:\n%v", r, dry)
	}
	if got := all(); !reflect.DeepEqual(got, before) {
		t.Errorf("the dry run changed keys")
	}

	r, err = newCleaner(t, c, opts...).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for why, ks := range r.Examples {
		for _, k := range ks {
			if unknown[k] != why {
				t.Errorf("example %q of %v, want %v", k, why, unknown[k])
			}
		}
	}
	checkDeletions(t, r, 4)
	r.Examples, r.Duration, r.Deletions = nil, 0, nil
	if !reflect.DeepEqual(r, want) {
		t.Errorf("report:\n%v\nwant:\n%v", r, want)
	}
	after := all()
	for k, what := range hashes {
		_, ok := after[k]
		if gone := strings.HasPrefix(what, "dead") || strings.HasPrefix(what, "a limit of no set"); ok == gone {
			t.Errorf("%q (%s): exists %v", k, what, ok)
		}
	}
	for k, why := range unknown {
		if strings.Contains(k, ":xyz:") {
			if _, ok := after[k]; ok {
				t.Errorf("%q named by WithDeleteUnknown still exists", k)
			}
		} else if after[k] != before[k] {
			t.Errorf("%q (%v) changed", k, why)
		}
	}
	if ttl := c.PTTL(ctx, n("persisted", key.Suppressed)).Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("persisted key: PTTL %v, want the rest of its minute", ttl)
	}
}

// TestNoWindow: a hash without a record (written before the record:
// "v" removed here) has an unknown window: with or without a window
// option it is never deleted or trimmed, and without a TTL it gets the
// longest one a configuration can need, counted from its newest bucket:
// n + 2 × 31 days − now. The same hash with its record is deleted with
// no window option.
func TestNoWindow(t *testing.T) {
	c := redistest.Real(t).Client(t)
	prefix := redistest.Prefix(t)
	now := redisNow(t, c).UnixMilli()
	dead, persisted := hashName(t, prefix, "dead", key.Absolute), hashName(t, prefix, "p", key.Suppressed)
	recorded := hashName(t, prefix, "recorded", key.Absolute)
	write(t, c, key.Absolute, dead, now-3_600_000, 60_000, 600, 1)
	write(t, c, key.Suppressed, persisted, now-3_600_000, 60_000, 600, 1)
	write(t, c, key.Absolute, recorded, now-3_600_000, 60_000, 600, 1)
	c.HDel(ctx, dead, "v")
	c.HDel(ctx, persisted, "v")
	c.Persist(ctx, persisted)
	r, err := newCleaner(t, c, cleanup.WithPrefix(prefix), cleanup.WithRate(math.Inf(1)),
		cleanup.WithWindow(time.Minute, 0)).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Deleted != 1 || r.Live != 0 || r.TTLSet != 1 || r.Skipped[cleanup.NoWindow] != 2 {
		t.Errorf("report:\n%v\nwant 1 deleted, 2 skipped for no window, 1 given a TTL", r)
	}
	if n := c.Exists(ctx, dead).Val(); n != 1 {
		t.Errorf("a hash of unknown window was deleted")
	}
	if n := c.Exists(ctx, recorded).Val(); n != 0 {
		t.Errorf("a dead hash with its record was kept")
	}
	span := (62 * 24 * time.Hour).Milliseconds()
	want := now - 3_600_000 + span - redisNow(t, c).UnixMilli()
	if got := c.PTTL(ctx, persisted).Val().Milliseconds(); got > want+50 || got < want-1000 {
		t.Errorf("PTTL %d ms, want about %d", got, want)
	}
}

// TestWithClock: under WithClock the cleaner judges by the clock and
// adds the providers' 60 s of slack to the TTLs it gives.
func TestWithClock(t *testing.T) {
	c := redistest.Real(t).Client(t)
	prefix := redistest.Prefix(t)
	at := time.UnixMilli(1_000_000_000_000)
	h := hashName(t, prefix, "k", key.Absolute)
	write(t, c, key.Absolute, h, at.UnixMilli(), 60_000, 600, 1)
	c.Persist(ctx, h)
	opts := []cleanup.Option{cleanup.WithPrefix(prefix), cleanup.WithWindow(time.Minute, 0)}
	r, err := newCleaner(t, c, append(opts, cleanup.WithClock(fixed(at.Add(10*time.Second)).Now))...).Run(ctx)
	if err != nil || r.Live != 1 || r.TTLSet != 1 {
		t.Fatalf("Run at 10 s = %v, %v; want the key live, given a TTL", r, err)
	}
	if ttl := c.PTTL(ctx, h).Val(); ttl < 110*time.Second || ttl > 110600*time.Millisecond {
		t.Errorf("PTTL %v, want 50.6 s + 60 s", ttl)
	}
	r, err = newCleaner(t, c, append(opts, cleanup.WithClock(fixed(at.Add(time.Minute+600*time.Millisecond)).Now))...).Run(ctx)
	if err != nil || r.Deleted != 1 {
		t.Fatalf("Run at W + B = %v, %v; want the key deleted", r, err)
	}
}

// TestNew: bad options and clients are ErrInvalidConfig.
func TestNew(t *testing.T) {
	_, c := redistest.Mini(t)
	for _, tc := range []struct {
		name string
		c    cleanup.Client
		opts []cleanup.Option
	}{
		{"nil client", nil, nil},
		{"typed nil client", (*redis.Client)(nil), nil},
		{"prefix", c, []cleanup.Option{cleanup.WithPrefix("a{b")}},
		{"empty prefix", c, []cleanup.Option{cleanup.WithPrefix("")}},
		{"window", c, []cleanup.Option{cleanup.WithWindow(0, 0)}},
		{"bucket", c, []cleanup.Option{cleanup.WithWindow(time.Second, time.Microsecond)}},
		{"W/B", c, []cleanup.Option{cleanup.WithWindow(time.Hour, time.Millisecond)}},
		{"negative bucket", c, []cleanup.Option{cleanup.WithWindow(time.Second, -1)}},
		{"empty set", c, []cleanup.Option{cleanup.WithSet(nil)}},
		{"nil func", c, []cleanup.Option{cleanup.WithWindowFunc(nil)}},
		{"zero rate", c, []cleanup.Option{cleanup.WithRate(0)}},
		{"NaN rate", c, []cleanup.Option{cleanup.WithRate(math.NaN())}},
		{"negative period", c, []cleanup.Option{cleanup.WithPeriod(-1)}},
		{"short lease", c, []cleanup.Option{cleanup.WithLease(time.Millisecond)}},
		{"fractional lease", c, []cleanup.Option{cleanup.WithLease(10*time.Millisecond + 1)}},
		{"threshold", c, []cleanup.Option{cleanup.WithTrimThreshold(-1)}},
		{"threshold high", c, []cleanup.Option{cleanup.WithTrimThreshold(cleanup.MaxTrimThreshold + 1)}},
		{"nil clock", c, []cleanup.Option{cleanup.WithClock(nil)}},
		{"nil delete", c, []cleanup.Option{cleanup.WithDeleteUnknown(nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := cleanup.New(tc.c, tc.opts...); !errors.Is(err, limiter.ErrInvalidConfig) {
				t.Errorf("New = %v, want ErrInvalidConfig", err)
			}
		})
	}
	if _, err := cleanup.New(c, nil, cleanup.WithRate(math.Inf(1)), cleanup.WithPeriod(0), cleanup.WithTrimThreshold(0)); err != nil {
		t.Errorf("New with edge values = %v", err)
	}
}

// TestRing: a Ring is walked shard by shard.
func TestRing(t *testing.T) {
	ring := redistest.Ring(t)
	prefix := redistest.Prefix(t)
	now := redisNow(t, ring)
	old := newLimiter(t, key.Absolute, ring, limiter.WithPrefix(prefix), limiter.WithClock(fixed(now.Add(-time.Hour)).Now))
	live := newLimiter(t, key.Suppressed, ring, limiter.WithPrefix(prefix))
	var keys []string
	for i := 0; i < 40; i++ {
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	incAll(t, old, keys)
	incAll(t, live, keys)
	r, err := newCleaner(t, ring, cleanup.WithPrefix(prefix), cleanup.WithWindow(time.Minute, 0), cleanup.WithRate(math.Inf(1))).Run(ctx)
	if err != nil || r.Nodes != 2 || r.Scanned != 80 || r.Deleted != 40 || r.Live != 40 {
		t.Fatalf("Run on a ring = %v, %v; want 2 shards, 40 of 80 keys deleted", r, err)
	}
	for _, k := range keys {
		if ring.Exists(ctx, hashName(t, prefix, k, key.Absolute)).Val() != 0 {
			t.Fatalf("%q still exists", k)
		}
	}
}

// checkDeletions checks that r lists n deletions, each with the window
// and bucket its hash records.
func checkDeletions(t *testing.T, r cleanup.Report, n int) {
	t.Helper()
	if len(r.Deletions) != n {
		t.Fatalf("Deletions = %+v, want %d", r.Deletions, n)
	}
	for _, d := range r.Deletions {
		if d.Window <= 0 || d.Bucket <= 0 || d.TTL == 0 {
			t.Errorf("deletion %+v: want its recorded window, bucket and TTL", d)
		}
	}
}
