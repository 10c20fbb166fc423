package scripts_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/scripts"
)

// TestAbsZeroBucketMark checks abs_inc.lua's sixth meta value z
// (docs/data-model.md, Fields): a refusal that lacks one unit answers with
// the oldest bucket's death without reading it only when no closed bucket
// that may hold 0 units (a hybrid lease's release) is at or after it. On
// miniredis and a real server, W = 1000 ms, B = 10 ms, C = 10.
func TestAbsZeroBucketMark(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		_, c := redistest.Mini(t)
		testAbsZeroBucketMark(t, c, false)
	})
	t.Run("redis-server", func(t *testing.T) { testAbsZeroBucketMark(t, redistest.Counted(t), true) })
}

func testAbsZeroBucketMark(t *testing.T, c *redis.Client, real bool) {
	ctx := context.Background()
	// call runs abs_inc.lua at now with cost n and the optional lease
	// arguments, and returns its reply.
	call := func(key string, now, n int64, lease ...string) any {
		t.Helper()
		args := []any{strconv.FormatInt(now, 10), "1000", "10", "10", strconv.FormatInt(n, 10), costTTL}
		for _, a := range lease {
			args = append(args, a)
		}
		v, err := scripts.AbsInc.Run(ctx, c, []string{key}, args...).Result()
		if err != nil {
			t.Fatalf("%s at %d: %v", key, now, err)
		}
		return v
	}
	// retry reads the RetryAfter of a refusal: one integer, or a table of
	// eight when something remains.
	retry := func(key string, now, n int64) int64 {
		t.Helper()
		v := call(key, now, n)
		if r, ok := v.(int64); ok && r < 0 {
			return (-r - 1) >> 26
		}
		if r, ok := v.([]any); ok && len(r) == 8 && r[0] == int64(1) {
			return r[4].(int64)
		}
		t.Fatalf("%s at %d: reply %v, want a refusal", key, now, v)
		return 0
	}
	meta := func(key string) []string {
		t.Helper()
		return strings.Fields(c.HGet(ctx, key, "m").Val())
	}

	// A closed bucket emptied by a release, the oldest one: bucket 0 holds
	// a lease of 4, bucket 20 three units, the release empties bucket 0,
	// bucket 40 fills the key.
	k := "zero:{a}:abs:h"
	call(k, 0, 1, "4")
	call(k, 20, 3)
	call(k, 30, 0, "0", "0", "4")
	if m := meta(k); len(m) != 6 || m[5] != "0" {
		t.Fatalf("m after the release = %q, want z = 0", m)
	}
	call(k, 40, 7)
	// The first unit to free is in bucket 20, not in the empty bucket 0.
	if got, want := retry(k, 50, 1), int64(20+1010-50); got != want {
		t.Fatalf("RetryAfter at 50 = %d, want %d", got, want)
	}
	// Once bucket 0 dies, the write that deletes it drops z.
	if got, want := retry(k, 1015, 1), int64(20+1010-1015); got != want {
		t.Fatalf("RetryAfter at 1015 = %d, want %d", got, want)
	}
	if m := meta(k); len(m) != 5 {
		t.Fatalf("m after bucket 0 died = %q, want five values", m)
	}

	// The newest bucket emptied by a release, then closed: bucket 0 holds
	// 2, bucket 20 a lease of 3, given back while it is the newest; bucket
	// 40 opens with 8 (full).
	k = "zero:{b}:abs:h"
	call(k, 0, 2)
	call(k, 20, 1, "3")
	call(k, 25, 0, "0", "20", "3")
	call(k, 40, 8)
	if m := meta(k); len(m) != 6 || m[5] != "20" {
		t.Fatalf("m after closing an empty bucket = %q, want z = 20", m)
	}
	if got, want := retry(k, 50, 1), int64(0+1010-50); got != want {
		t.Fatalf("RetryAfter at 50 = %d, want %d", got, want)
	}
	// Bucket 0 dies: the oldest is the empty bucket 20, and the units to
	// free are in bucket 40.
	for _, now := range []int64{1015, 1016} {
		if got, want := retry(k, now, 3), int64(40+1010-now); got != want {
			t.Fatalf("RetryAfter of 3 at %d = %d, want %d", now, got, want)
		}
	}

	// A saturated key without an empty bucket refuses reading "m" alone.
	k = "zero:{c}:abs:h"
	call(k, 0, 4)
	call(k, 20, 6)
	before := hgets(t, c, real)
	for now := int64(30); now < 40; now++ {
		if got, want := retry(k, now, 1), int64(1010-now); got != want {
			t.Fatalf("RetryAfter at %d = %d, want %d", now, got, want)
		}
	}
	if n := hgets(t, c, real) - before; real && n != 10 {
		t.Fatalf("10 refusals made %d HGETs and HMGETs, want 10 (of m and v alone)", n)
	}
	if m := meta(k); len(m) != 5 {
		t.Fatalf("m = %q, want five values", m)
	}
}

// hgets counts the HGETs and HMGETs c's server ran; -1 on miniredis, which does not
// count them.
func hgets(t *testing.T, c *redis.Client, real bool) int {
	t.Helper()
	if !real {
		return -1
	}
	return redistest.CommandCalls(t, c, "hget") + redistest.CommandCalls(t, c, "hmget")
}
