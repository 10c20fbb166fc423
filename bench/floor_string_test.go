package bench

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/redisprov"
	win "github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/scripts"
)

// abs_string.lua, the prototype floor/instr.sh measures: one string value
// instead of abs_inc.lua's hash.
func absString(t *testing.T) *redis.Script {
	t.Helper()
	src, err := os.ReadFile("floor/abs_string.lua")
	if err != nil {
		t.Fatal(err)
	}
	return redis.NewScript(string(src))
}

// TestAbsStringMatchesAbsInc runs abs_inc.lua and floor/abs_string.lua side
// by side on the same random traces, the clock an argument: several keys,
// costs 0 (a peek), within and above the capacity, IsAllowed (capacity 0),
// capacities that change, gaps from 0 to several W + B, and steps back
// (less and more than W + B), at W/B = 100 and 10. Every reply must be the
// same value, and both keys must exist with the same TTL after each call:
// the TTL argument differs per call, so a write one script makes and the
// other does not shows.
func TestAbsStringMatchesAbsInc(t *testing.T) {
	c := requireServer(t)
	proto := absString(t)
	outcomes := []int64{win.OutcomeAllowed, win.OutcomeRejected}
	for _, wb := range [][2]int64{{1000, 10}, {1000, 100}} {
		w, b := wb[0], wb[1]
		for seed := uint64(1); seed <= 4; seed++ {
			rng := rand.New(rand.NewPCG(seed, uint64(b)))
			pre := fmt.Sprintf("floorstr:%d:%d:", b, seed)
			const keys = 3
			for k := 0; k < keys; k++ {
				c.Del(ctx, fmt.Sprintf("%s{%d}:abs:h", pre, k), fmt.Sprintf("%s{%d}:abs:s", pre, k))
			}
			capOf := [keys]int64{5, 12, 40}
			now := int64(1732270000000)
			seen := map[string]int{}
			for i := 0; i < 1500; i++ {
				k := rng.IntN(keys)
				now += gap(rng, w, b)
				if rng.IntN(10) == 0 {
					capOf[k] = []int64{3, 5, 12, 40}[rng.IntN(4)]
				}
				capa := capOf[k]
				var n int64
				switch r := rng.IntN(20); {
				case r < 2:
					n = 0 // a peek
				case r < 3:
					n, capa = 0, 0 // IsAllowed: the stored capacity
				case r < 4:
					n = capa + 1 + rng.Int64N(3) // never
				case r < 10:
					n = 1 + rng.Int64N(capa)
				default:
					n = 1
				}
				ttl := 3600000 + int64(i)*1000 // as W + B, distinct per call
				args := []any{strconv.FormatInt(now, 10), w, b, capa, n, ttl}
				hk, sk := fmt.Sprintf("%s{%d}:abs:h", pre, k), fmt.Sprintf("%s{%d}:abs:s", pre, k)
				want, err := scripts.AbsInc.Run(ctx, c, []string{hk}, args...).Result()
				if err != nil {
					t.Fatalf("W %d B %d seed %d call %d: abs_inc.lua: %v", w, b, seed, i, err)
				}
				got, err := proto.Run(ctx, c, []string{sk}, args...).Result()
				if err != nil {
					t.Fatalf("W %d B %d seed %d call %d: abs_string.lua: %v", w, b, seed, i, err)
				}
				if os.Getenv("FLOORSTR_TRACE") != "" {
					t.Logf("call %d key %d args %v: %v %v", i, k, args, got, want)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("W %d B %d seed %d call %d, args %v: abs_string.lua %v, abs_inc.lua %v", w, b, seed, i, args, got, want)
				}
				r, err := redisprov.Decision(want, capa, outcomes...)
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				ht, st := c.PTTL(ctx, hk).Val(), c.PTTL(ctx, sk).Val()
				if (ht < 0) != (st < 0) || ht-st > 50*time.Millisecond || st-ht > 50*time.Millisecond {
					t.Fatalf("W %d B %d seed %d call %d, args %v: PTTL abs_string.lua %v, abs_inc.lua %v", w, b, seed, i, args, st, ht)
				}
				switch {
				case r.Never:
					seen["never"]++
				case !r.Allowed && r.RetryAfter > 0:
					seen["refused"]++
				case r.Allowed && n == 0:
					seen["peek"]++
				case r.Allowed:
					seen["admitted"]++
				}
				if capa == 0 {
					seen["isallowed"]++
				}
			}
			for _, p := range []string{"never", "refused", "peek", "admitted", "isallowed"} {
				if seen[p] < 10 {
					t.Errorf("W %d B %d seed %d: %d calls %s, want 10 or more: %v", w, b, seed, seen[p], p, seen)
				}
			}
		}
	}
}

// gap is the ms between two calls of a trace: mostly within a bucket or a
// few, sometimes up to W + 2B (where buckets die), sometimes past W + B
// (the key dies), and sometimes back (less or more than W + B).
func gap(rng *rand.Rand, w, b int64) int64 {
	switch r := rng.IntN(100); {
	case r < 40:
		return rng.Int64N(b)
	case r < 75:
		return rng.Int64N(4 * b)
	case r < 90:
		return rng.Int64N(w / 4)
	case r < 95:
		return w - b + rng.Int64N(3*b)
	case r < 97:
		return w + b + rng.Int64N(2*w)
	case r < 99:
		return -rng.Int64N(2 * b)
	default:
		return -(w + b) - rng.Int64N(w)
	}
}

// TestAbsStringTime checks the prototype under Redis TIME against
// abs_inc.lua: the same decisions (ms of the two calls may differ by one)
// and the TTL a join keeps (the write opens no bucket).
func TestAbsStringTime(t *testing.T) {
	c := requireServer(t)
	proto := absString(t)
	hk, sk := "floorstr:time:{1}:abs:h", "floorstr:time:{1}:abs:s"
	c.Del(ctx, hk, sk)
	outcomes := []int64{win.OutcomeAllowed, win.OutcomeRejected}
	for i, n := range []int64{1, 1, 2, 0, 3, 1, 5} {
		args := []any{"", 60000, 600, 4, n, 60600 - int64(i)*1000}
		want, err := scripts.AbsInc.Run(ctx, c, []string{hk}, args...).Result()
		if err != nil {
			t.Fatal(err)
		}
		got, err := proto.Run(ctx, c, []string{sk}, args...).Result()
		if err != nil {
			t.Fatal(err)
		}
		wr, err1 := redisprov.Decision(want, 4, outcomes...)
		gr, err2 := redisprov.Decision(got, 4, outcomes...)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		d := wr.ResetAfter - gr.ResetAfter
		e := wr.RetryAfter - gr.RetryAfter
		wr.ResetAfter, gr.ResetAfter, wr.RetryAfter, gr.RetryAfter = 0, 0, 0, 0
		if wr != gr || d < -2 || d > 2 || e < -2 || e > 2 {
			t.Fatalf("call %d: abs_string.lua %+v (%v), abs_inc.lua %+v (%v)", i, gr, got, wr, want)
		}
		ht, st := c.PTTL(ctx, hk).Val(), c.PTTL(ctx, sk).Val()
		if ht-st > 20*time.Millisecond || st-ht > 20*time.Millisecond {
			t.Fatalf("call %d: PTTL abs_string.lua %v, abs_inc.lua %v", i, st, ht)
		}
	}
}
