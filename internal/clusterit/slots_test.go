package clusterit_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// trickyKeys are user keys whose bytes would break a naive hash tag: braces
// anywhere, the schema's separator, escapes, glob characters, whitespace,
// non-ASCII and the longest key accepted.
var trickyKeys = []string{
	"user:42",
	"2001:db8::1",
	"bob@example.com",
	"https://example.com/?q={x}&r=}{",
	"{",
	"}",
	"{}",
	"}{",
	"{user}:42",
	"a{b}c",
	"%7B",
	"*?[]\\",
	"tab\tand space",
	"ünïcødé",
	strings.Repeat("k", 512),
}

// TestOneSlotPerKey checks that every Redis key of one limiter key, under
// both strategies and both suffixes, hashes to the slot of its escaped key,
// so a script may touch all of them; that every call of both providers
// works on a cluster for keys full of braces; and, as a control, that a
// script touching two limiter keys in different slots is refused with
// CROSSSLOT.
func TestOneSlotPerKey(t *testing.T) {
	t.Parallel()
	c := redistest.Cluster(t)
	prefix := redistest.Prefix(t)
	rate := limiter.PerMinute(10)
	for _, s := range strategies {
		l := s.limiter(t, c, limiter.WithPrefix(prefix))
		for _, k := range trickyKeys {
			if _, err := l.Inc(ctx, k, rate, 1); err != nil {
				t.Errorf("%s: Inc(%q, 1): %v", s.name, k, err)
			}
			if _, err := l.Inc(ctx, k, rate, 0); err != nil {
				t.Errorf("%s: Inc(%q, 0): %v", s.name, k, err)
			}
			if _, err := l.IsAllowed(ctx, k); err != nil {
				t.Errorf("%s: IsAllowed(%q): %v", s.name, k, err)
			}
			if u, err := l.Get(ctx, k); err != nil || u.Used != 1 {
				t.Errorf("%s: Get(%q) = %+v, %v, want Used 1", s.name, k, u, err)
			}
		}
	}

	// A script that reads every Redis key of one limiter key at once.
	exists := redis.NewScript(`return redis.call('EXISTS', unpack(KEYS))`)
	for _, k := range trickyKeys {
		want, err := c.ClusterKeySlot(ctx, key.Escape(k)).Result()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range []string{key.Absolute, key.Suppressed} {
			for _, suffix := range []string{key.Hash, key.Aux} {
				name, err := key.Name(prefix, k, s, suffix)
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, name)
				got, err := c.ClusterKeySlot(ctx, name).Result()
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("CLUSTER KEYSLOT %q = %d, want %d (the slot of %q)", name, got, want, key.Escape(k))
				}
			}
		}
		// Both hashes exist; the aux suffix is reserved and unused.
		if n, err := exists.Run(ctx, c, names).Int64(); err != nil || n != 2 {
			t.Errorf("EXISTS %q in one script = %d, %v, want 2, no error", names, n, err)
		}
	}

	// Control: two limiter keys in different slots cannot share a script.
	a, b := hashName(t, prefix, "user:42", key.Absolute), hashName(t, prefix, "user:43", key.Absolute)
	sa, _ := c.ClusterKeySlot(ctx, a).Result()
	sb, _ := c.ClusterKeySlot(ctx, b).Result()
	if sa == sb {
		t.Fatalf("CLUSTER KEYSLOT: %q and %q share slot %d; pick keys in different slots for the control", a, b, sa)
	}
	if err := exists.Run(ctx, c, []string{a, b}).Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Errorf("EXISTS %q %q (slots %d, %d) in one script: error %v, want CROSSSLOT", a, b, sa, sb, err)
	}
}

// spreadKeys is how many limiter keys TestSpread writes.
const spreadKeys = 300

// TestSpread writes 300 limiter keys under both strategies and counts
// where their hashes land: every node holds at least 60 % of its fair share
// (20 % of the keys on each of the 3 cluster masters, 30 % on each of the 2
// ring shards), both hashes of a limiter key are on one node, and on the
// cluster every hash is on the master that CLUSTER SLOTS names for its
// slot.
func TestSpread(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c, each := b.open(t)
			prefix := redistest.Prefix(t)
			for _, s := range strategies {
				l := s.limiter(t, c, limiter.WithPrefix(prefix))
				for i := 0; i < spreadKeys; i++ {
					k := fmt.Sprintf("user:%d", i)
					if _, err := l.Inc(ctx, k, limiter.PerMinute(10), 1); err != nil {
						t.Fatalf("%s: Inc(%q, 1): %v", s.name, k, err)
					}
				}
			}

			found := scan(t, each, key.Pattern(prefix))
			if len(found) != b.count {
				t.Fatalf("SCAN visited %d nodes, want %d", len(found), b.count)
			}
			total := 2 * spreadKeys
			home := make(map[string]string) // user key → node
			seen := 0
			for addr, keys := range found {
				seen += len(keys)
				t.Logf("%s holds %d of %d hashes (%.1f %%)", addr, len(keys), total, 100*float64(len(keys))/float64(total))
				if min := total * 6 / 10 / b.count; len(keys) < min {
					t.Errorf("%s holds %d of %d hashes, want at least %d", addr, len(keys), total, min)
				}
				for _, name := range keys {
					p, err := key.Parse(name)
					if err != nil {
						t.Errorf("key.Parse(%q): %v", name, err)
						continue
					}
					if other, ok := home[p.Key]; ok && other != addr {
						t.Errorf("the hashes of %q are on %s and %s, want one node", p.Key, other, addr)
					}
					home[p.Key] = addr
				}
			}
			if seen != total || len(home) != spreadKeys {
				t.Errorf("SCAN found %d hashes of %d limiter keys, want %d of %d", seen, len(home), total, spreadKeys)
			}

			if cc, ok := c.(*redis.ClusterClient); ok {
				checkOwners(t, cc, found)
			}
		})
	}
}

// checkOwners checks that each key in found (node address → keys) lies in
// a slot that CLUSTER SLOTS assigns to that node.
func checkOwners(t *testing.T, c *redis.ClusterClient, found map[string][]string) {
	t.Helper()
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	owner := func(slot int64) string {
		for _, r := range slots {
			if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 {
				return r.Nodes[0].Addr
			}
		}
		return ""
	}
	for addr, keys := range found {
		for _, name := range keys {
			slot, err := c.ClusterKeySlot(ctx, name).Result()
			if err != nil {
				t.Fatal(err)
			}
			if o := owner(slot); o != addr {
				t.Errorf("%q (slot %d) is on %s, but CLUSTER SLOTS gives the slot to %q", name, slot, addr, o)
			}
		}
	}
}
