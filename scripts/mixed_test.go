package scripts_test

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/scripts"
)

// v1 loads a script as the release before the record (layout 1: no "v")
// shipped it, kept in testdata/v1.
func v1(t *testing.T, name string) *redis.Script {
	t.Helper()
	src, err := os.ReadFile("testdata/v1/" + name + ".lua")
	if err != nil {
		t.Fatal(err)
	}
	return redis.NewScript(string(src))
}

// TestMixedVersions: a rolling upgrade has both layouts on one prefix.
// Hashes written by the new scripts are read and written by the previous
// release's scripts (testdata/v1) without misreading a count, and they
// keep the record; hashes written by the previous release are read by the
// new scripts as they are, and get the record with their first new
// write; a record of a layout the new scripts do not know is an error
// reply, never a misread count (docs/data-model.md, Layout versions).
func TestMixedVersions(t *testing.T) {
	c := redistest.Real(t).Client(t)
	ctx := context.Background()
	p := redistest.Prefix(t)
	const ttl = "3600000" // the clock is an argument near 0: a TTL of W + B would expire the keys
	run := func(s *redis.Script, keys []string, args ...any) any {
		t.Helper()
		v, err := s.Run(ctx, c, keys, args...).Result()
		if err != nil {
			t.Fatalf("%v %v: %v", keys, args, err)
		}
		return v
	}
	ints := func(v any) []int64 {
		t.Helper()
		arr, ok := v.([]any)
		if !ok {
			t.Fatalf("reply %v, want an array", v)
		}
		out := make([]int64, len(arr))
		for i, x := range arr {
			out[i] = x.(int64)
		}
		return out
	}
	record := func(h string) string { return c.HGet(ctx, h, "v").Val() }
	// remaining reads an admission's integer reply: remaining × 2^32 + reset.
	remaining := func(v any) int64 {
		t.Helper()
		r, ok := v.(int64)
		if !ok || r < 0 {
			t.Fatalf("reply %v, want an admission", v)
		}
		return r >> 32
	}
	oldAbsInc, oldAbsGet, oldAbsSet := v1(t, "abs_inc"), v1(t, "abs_get"), v1(t, "abs_set")
	oldSupInc, oldSupGet, oldSupSet, oldSupSetGet := v1(t, "sup_inc"), v1(t, "sup_get"), v1(t, "sup_set"), v1(t, "sup_set_get")

	t.Run("absolute", func(t *testing.T) {
		for _, newFirst := range []bool{true, false} {
			h := p + ":{abs" + map[bool]string{true: "new", false: "old"}[newFirst] + "}:abs:h"
			first, second := scripts.AbsInc, oldAbsInc
			if !newFirst {
				first, second = oldAbsInc, scripts.AbsInc
			}
			run(first, []string{h}, "1000", "1000", "10", "10", "3", ttl)
			run(first, []string{h}, "1050", "1000", "10", "10", "2", ttl) // opens a bucket
			if got := ints(run(scripts.AbsGet, []string{h}, "1055", "1000", "10")); !reflect.DeepEqual(got, []int64{5, 10}) {
				t.Fatalf("new first %v: new Get = %v, want 5 of 10", newFirst, got)
			}
			if got := ints(run(oldAbsGet, []string{h}, "1055", "1000", "10")); !reflect.DeepEqual(got, []int64{5, 10}) {
				t.Fatalf("new first %v: old Get = %v, want 5 of 10", newFirst, got)
			}
			if r := remaining(run(second, []string{h}, "1060", "1000", "10", "10", "1", ttl)); r != 4 {
				t.Fatalf("new first %v: the other version's Inc leaves %d, want 4", newFirst, r)
			}
			if r := remaining(run(first, []string{h}, "1070", "1000", "10", "10", "4", ttl)); r != 0 {
				t.Fatalf("new first %v: Inc leaves %d, want 0", newFirst, r)
			}
			for _, s := range []*redis.Script{scripts.AbsInc, oldAbsInc} {
				if v, ok := run(s, []string{h}, "1080", "1000", "10", "10", "1", ttl).(int64); !ok || v >= 0 {
					t.Fatalf("new first %v: Inc on a full key = %v, want a refusal", newFirst, v)
				}
			}
			// the old scripts keep the record; the new write added it to an old hash
			if got := record(h); got != "a2 1000 10" {
				t.Fatalf("new first %v: record %q, want \"a2 1000 10\"", newFirst, got)
			}
		}
	})

	t.Run("suppressed", func(t *testing.T) {
		for _, newFirst := range []bool{true, false} {
			h := p + ":{sup" + map[bool]string{true: "new", false: "old"}[newFirst] + "}:sup:h"
			first, second := scripts.SupInc, oldSupInc
			if !newFirst {
				first, second = oldSupInc, scripts.SupInc
			}
			inc := func(s *redis.Script, now, n string) any {
				return run(s, []string{h}, now, "1000", "10", "10", "15", n, "0", "999999", ttl)
			}
			inc(first, "1000", "3")
			inc(first, "1050", "2")
			inc(second, "1060", "1")
			for _, g := range []*redis.Script{scripts.SupGet, oldSupGet} {
				if got := ints(run(g, []string{h}, "1065", "1000", "10")); !reflect.DeepEqual(got, []int64{6, 0, 10}) {
					t.Fatalf("new first %v: Get = %v, want 6 accepted, 0 declined, of 10", newFirst, got)
				}
			}
			if got := record(h); got != "s2 1000 10" {
				t.Fatalf("new first %v: record %q, want \"s2 1000 10\"", newFirst, got)
			}
		}
	})

	t.Run("sets", func(t *testing.T) {
		for _, newFirst := range []bool{true, false} {
			tag := map[bool]string{true: "new", false: "old"}[newFirst]
			ha := []string{p + ":{seta" + tag + "}:abs:h:x", p + ":{seta" + tag + "}:abs:h:y"}
			hs := []string{p + ":{sets" + tag + "}:sup:h:x", p + ":{sets" + tag + "}:sup:h:y"}
			absSet := func(s *redis.Script, now, n string) any {
				return run(s, ha, now, n, "1000", "10", "10", ttl, "5000", "50", "20", ttl)
			}
			supSet := func(s *redis.Script, now, n string) any {
				return run(s, hs, now, "0", "999999", "1000", "10", "10", "10", n, ttl, "5000", "50", "20", "20", n, ttl)
			}
			firstA, secondA, firstS, secondS := scripts.AbsSet, oldAbsSet, scripts.SupSet, oldSupSet
			if !newFirst {
				firstA, secondA, firstS, secondS = oldAbsSet, scripts.AbsSet, oldSupSet, scripts.SupSet
			}
			absSet(firstA, "1000", "3")
			absSet(secondA, "1050", "2")
			supSet(firstS, "1000", "3")
			supSet(secondS, "1050", "2")
			for _, g := range []*redis.Script{scripts.AbsGet, oldAbsGet} {
				if got := ints(run(g, ha, "1055", "1000", "10", "5000", "50")); !reflect.DeepEqual(got, []int64{5, 10, 5, 20}) {
					t.Fatalf("new first %v: absolute GetSet = %v, want 5 of 10, 5 of 20", newFirst, got)
				}
			}
			for _, g := range []*redis.Script{scripts.SupSetGet, oldSupSetGet} {
				if got := ints(run(g, hs, "1055", "1000", "10", "5000", "50")); !reflect.DeepEqual(got, []int64{5, 0, 10, 5, 0, 20}) {
					t.Fatalf("new first %v: suppressed GetSet = %v, want 5 of 10, 5 of 20", newFirst, got)
				}
			}
			if got := record(ha[1]) + ", " + record(hs[1]); got != "a2 5000 50, s2 5000 50" {
				t.Fatalf("new first %v: records %s", newFirst, got)
			}
		}
	})

	t.Run("newer layout", func(t *testing.T) {
		h := p + ":{newer}:abs:h"
		c.HSet(ctx, h, "m", "10 1 1000 1000 1", "v", "a3 1000 10")
		for _, call := range []func() error{
			func() error {
				return scripts.AbsInc.Run(ctx, c, []string{h}, "1010", "1000", "10", "10", "1", ttl).Err()
			},
			func() error { return scripts.AbsGet.Run(ctx, c, []string{h}, "1010", "1000", "10").Err() },
		} {
			if err := call(); err == nil || !strings.Contains(err.Error(), "SLUICELAYOUT a3 1000 10") {
				t.Fatalf("a call on a hash of layout a3 = %v, want the SLUICELAYOUT error", err)
			}
		}
		if got := c.HGet(ctx, h, "m").Val(); got != "10 1 1000 1000 1" {
			t.Fatalf("m = %q after the refused calls, want it untouched", got)
		}
	})
}
