package scripts_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/scripts"
)

// TestSupHybridRecentAtSoft checks sup_inc.lua's hybrid reply: the units
// observed in the last second, which need a read of the whole hash once
// the oldest live bucket is older than that, are read only when the call
// leaves the key at or above its soft capacity (below it the instance
// decides nothing with them), and are then exact. W = 1 min, B = 600 ms,
// S = 100, H = 150; buckets at 0 (10 units) and 5,000 ms. On miniredis and
// a real server, whose HGETALLs are counted.
func TestSupHybridRecentAtSoft(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		_, c := redistest.Mini(t)
		testSupHybridRecentAtSoft(t, c, false)
	})
	t.Run("redis-server", func(t *testing.T) { testSupHybridRecentAtSoft(t, redistest.Counted(t), true) })
}

func testSupHybridRecentAtSoft(t *testing.T, c *redis.Client, real bool) {
	ctx := context.Background()
	const k = "rec:{a}:sup:h"
	// call makes a hybrid call (a lease of n alone, nothing released or
	// pushed) at now and returns its 16 integers.
	call := func(now, n int64) []any {
		t.Helper()
		ns := strconv.FormatInt(n, 10)
		v, err := scripts.SupInc.Run(ctx, c, []string{k}, strconv.FormatInt(now, 10), "60000", "600", "100", "150", ns,
			"0", "500000", "60600", ns, "0", "0", "0", "0").Result()
		if err != nil {
			t.Fatalf("at %d: %v", now, err)
		}
		r, ok := v.([]any)
		if !ok || len(r) != 16 || r[1] != int64(1) {
			t.Fatalf("at %d: reply %v, want an admission of 16 values", now, v)
		}
		return r
	}
	hgetalls := func() int {
		if !real {
			return 0
		}
		return redistest.CommandCalls(t, c, "hgetall")
	}
	call(0, 10)
	call(5000, 10)
	before := hgetalls()
	if r := call(5100, 1); r[11] != int64(21) || r[13] != int64(0) || hgetalls() != before {
		t.Errorf("below S: accepted %v, recent %v after %d HGETALLs; want 21, 0 (not read) after none", r[11], r[13], hgetalls()-before)
	}
	// 79 more: at S. The last second holds the bucket at 5,000 alone:
	// 10 + 1 + 79 units.
	if r := call(5200, 79); r[11] != int64(100) || r[13] != int64(90) || real && hgetalls() != before+1 {
		t.Errorf("at S: accepted %v, recent %v after %d HGETALLs; want 100, 90 after 1", r[11], r[13], hgetalls()-before)
	}
}
