package cleanup_test

import (
	"math"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// TestTrimKeepsSets: trimming the dead buckets of a set's limit hashes
// leaves every limit's usage as it was, for both strategies. A set's limit
// keeps its TTL span in its meta (the sixth value of an absolute "m", the
// fifth of a suppressed "k"), and a hash without it reads as absent: a
// trim that rewrote the suppressed "k" as a single hash's (dropping what
// follows its four values) once lost every limit's count.
func TestTrimKeepsSets(t *testing.T) {
	c := redistest.Real(t).Client(t)
	set, err := limiter.NewSet(
		limiter.Limit{Name: "second", Rate: limiter.PerSecond(100), Window: time.Second, Bucket: 10 * time.Millisecond},
		limiter.Limit{Name: "minute", Rate: limiter.PerMinute(1000), Window: time.Minute},
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, strategy := range strategies {
		t.Run(strategy, func(t *testing.T) {
			prefix := redistest.Prefix(t)
			clk := &stepClock{now: time.UnixMilli(1_767_268_800_000)}
			l := newLimiter(t, strategy, c, limiter.WithPrefix(prefix), limiter.WithClock(clk.Now)).(limiter.SetLimiter)
			for i := 0; i < 10; i++ { // ten buckets of "second", 100 ms apart
				if d, err := l.IncSet(ctx, "u", set, 1); err != nil || !d.Allowed {
					t.Fatalf("IncSet #%d = %+v, %v; want admitted", i, d, err)
				}
				clk.Advance(100 * time.Millisecond)
			}
			clk.Advance(600 * time.Millisecond) // "second"'s first six buckets dead
			before, err := l.GetSet(ctx, "u", set)
			if err != nil {
				t.Fatal(err)
			}
			if before[0].Used != 4 || before[1].Used != 10 {
				t.Fatalf("GetSet before the pass = %+v, want 4 and 10 used", before)
			}
			r, err := newCleaner(t, c, cleanup.WithPrefix(prefix), cleanup.WithRate(math.Inf(1)),
				cleanup.WithSet(set), cleanup.WithClock(clk.Now), cleanup.WithTrimThreshold(0)).Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r.Trimmed != 1 || r.Buckets != 6 {
				t.Errorf("%s: Trimmed %d hashes, %d buckets; want 1 and 6 (the pass did not trim)", strategy, r.Trimmed, r.Buckets)
			}
			after, err := l.GetSet(ctx, "u", set)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(after, before) {
				t.Errorf("%s: GetSet after the trim = %+v, want %+v", strategy, after, before)
			}
			// The limits still count: the minute has 990 units of room.
			if d, err := l.IncSet(ctx, "u", set, 1); err != nil || !d.Allowed || d.Limits[1].Remaining != 1000-11 {
				t.Errorf("%s: IncSet after the trim = %+v, %v; want admitted with %d remaining in the minute", strategy, d, err, 1000-11)
			}
			if n, err := key.LimitName(prefix, "u", strategy, "second"); err == nil {
				if fields := c.HLen(ctx, n).Val(); fields < 2 {
					t.Errorf("%s: %s holds %d fields after the trim", strategy, n, fields)
				}
			}
		})
	}
}

// TestLegacySetRecord: a set's limit written before the record (no "v")
// is judged by its TTL span t: dead under t, it is deleted without any
// window given; live under t (a day's), a one-minute window given to the
// cleaner does not delete it.
func TestLegacySetRecord(t *testing.T) {
	c := redistest.Real(t).Client(t)
	prefix := redistest.Prefix(t)
	now := redisNow(t, c).UnixMilli()
	hour := now - 3_600_000
	dead, err := key.LimitName(prefix, "u", key.Absolute, "per-second")
	if err != nil {
		t.Fatal(err)
	}
	day, err := key.LimitName(prefix, "u", key.Absolute, "per-day")
	if err != nil {
		t.Fatal(err)
	}
	m := func(t int64) string {
		return "10 3 " + strconv.FormatInt(hour, 10) + " " + strconv.FormatInt(hour, 10) + " 3 " + strconv.FormatInt(t, 10)
	}
	c.HSet(ctx, dead, "m", m(1010))
	c.HSet(ctx, day, "m", m(87_264_000))
	c.Expire(ctx, dead, time.Hour)
	c.Expire(ctx, day, 24*time.Hour)
	for _, opts := range [][]cleanup.Option{nil, {cleanup.WithWindow(time.Minute, 0)}} {
		r, err := newCleaner(t, c, append([]cleanup.Option{cleanup.WithPrefix(prefix), cleanup.WithRate(math.Inf(1))}, opts...)...).Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.Exists(ctx, day).Val() != 1 {
			t.Fatalf("the live day limit was deleted (report:\n%v)", r)
		}
		if c.Exists(ctx, dead).Val() != 0 {
			t.Fatalf("the dead second limit was kept (report:\n%v)", r)
		}
		c.HSet(ctx, dead, "m", m(1010))
		c.Expire(ctx, dead, time.Hour)
	}
}
