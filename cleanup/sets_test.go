package cleanup_test

import (
	"math"
	"reflect"
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
			l := newLimiter(t, strategy, c, limiter.WithPrefix(prefix), limiter.WithClock(clk)).(limiter.SetLimiter)
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
				cleanup.WithSet(set), cleanup.WithClock(clk), cleanup.WithTrimThreshold(0)).Run(ctx)
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
