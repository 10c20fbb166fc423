package scripts_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/scripts"
)

// TestLayoutVersion is the check that makes a mixed fleet safe: every
// script writes the record of its layout ("a2 <W> <B>", "s2 <W> <B>") on
// the hashes it creates, single and a set's, and a record of a layout it
// does not know is an error reply that reads and writes nothing, never a
// misread count (docs/data-model.md, Layout versions and rolling
// upgrades). A release that changes the layout keeps this test, and adds
// one that runs the previous release's scripts, kept under testdata, on
// the new release's hashes and the other way round.
func TestLayoutVersion(t *testing.T) {
	c := redistest.Real(t).Client(t)
	ctx := context.Background()
	p := redistest.Prefix(t)
	const ttl = "3600000" // the clock is an argument near 0: a TTL of W + B would expire the keys
	run := func(s *redis.Script, keys []string, args ...any) {
		t.Helper()
		if err := s.Run(ctx, c, keys, args...).Err(); err != nil {
			t.Fatalf("%v %v: %v", keys, args, err)
		}
	}
	record := func(h string) string { return c.HGet(ctx, h, "v").Val() }

	t.Run("record", func(t *testing.T) {
		abs, sup := p+":{abs}:abs:h", p+":{sup}:sup:h"
		run(scripts.AbsInc, []string{abs}, "1000", "1000", "10", "10", "3", ttl)
		run(scripts.SupInc, []string{sup}, "1000", "1000", "10", "10", "15", "3", "0", "999999", ttl)
		ha := []string{p + ":{seta}:abs:h:x", p + ":{seta}:abs:h:y"}
		hs := []string{p + ":{sets}:sup:h:x", p + ":{sets}:sup:h:y"}
		run(scripts.AbsSet, ha, "1000", "3", "1000", "10", "10", ttl, "5000", "50", "20", ttl)
		run(scripts.SupSet, hs, "1000", "0", "999999", "1000", "10", "10", "10", "3", ttl, "5000", "50", "20", "20", "3", ttl)
		for h, want := range map[string]string{
			abs: "a2 1000 10", sup: "s2 1000 10",
			ha[0]: "a2 1000 10", ha[1]: "a2 5000 50",
			hs[0]: "s2 1000 10", hs[1]: "s2 5000 50",
		} {
			if got := record(h); got != want {
				t.Errorf("%s: record %q, want %q", h, got, want)
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
