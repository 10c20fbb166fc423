package clusterit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// The TTL test runs in real time with a short window.
const (
	ttlWindow = 600 * time.Millisecond
	ttlBucket = 60 * time.Millisecond
	ttlKeys   = 90 // limiter keys, each used under both strategies
	// ttlGrace bounds how long Redis may take to drop a key after its
	// expiry: SCAN never returns an expired key, so this only absorbs a
	// slow machine.
	ttlGrace = 3 * time.Second
)

// ttlRate gives capacity 10 in ttlWindow: small enough that the workload
// sees refusals.
var ttlRate = limiter.Every(10, ttlWindow)

// ttlScript is what the workload does to key i, in two rounds ttlBucket
// apart, under both strategies. present says whether the key's hashes must
// exist after the workload; each of those opens a bucket in round 2,
// except the absolute hash of a script with absFull, refused in round 2:
// its newest bucket is round 1's. A key's TTL runs from its newest
// bucket (W + B after it opened), not from its last write.
type ttlScript struct {
	name    string
	present bool
	absFull bool
	rounds  [2]func(t *testing.T, l limiter.Limiter, k string)
}

func inc(t *testing.T, l limiter.Limiter, k string, rate limiter.Rate, n int64) limiter.Decision {
	t.Helper()
	d, err := l.Inc(ctx, k, rate, n)
	if err != nil {
		t.Errorf("Inc(%q, %d): %v", k, n, err)
	}
	return d
}

func read(t *testing.T, l limiter.Limiter, k string) {
	t.Helper()
	if _, err := l.IsAllowed(ctx, k); err != nil {
		t.Errorf("IsAllowed(%q): %v", k, err)
	}
	if _, err := l.Get(ctx, k); err != nil {
		t.Errorf("Get(%q): %v", k, err)
	}
	inc(t, l, k, ttlRate, 0)
}

func reset(t *testing.T, l limiter.Limiter, k string) {
	t.Helper()
	if err := l.Reset(ctx, k); err != nil {
		t.Errorf("Reset(%q): %v", k, err)
	}
}

var ttlScripts = []ttlScript{
	{"coalesce", true, false, [2]func(*testing.T, limiter.Limiter, string){
		func(t *testing.T, l limiter.Limiter, k string) {
			inc(t, l, k, ttlRate, 1)
			inc(t, l, k, ttlRate, 1)
			read(t, l, k)
		},
		func(t *testing.T, l limiter.Limiter, k string) { inc(t, l, k, ttlRate, 2); read(t, l, k) },
	}},
	{"costs", true, false, [2]func(*testing.T, limiter.Limiter, string){
		func(t *testing.T, l limiter.Limiter, k string) {
			inc(t, l, k, ttlRate, 5)
			inc(t, l, k, ttlRate, 0)
			inc(t, l, k, ttlRate, 1000) // never fits
		},
		func(t *testing.T, l limiter.Limiter, k string) { inc(t, l, k, ttlRate, 3); read(t, l, k) },
	}},
	{"overflow", true, true, [2]func(*testing.T, limiter.Limiter, string){
		func(t *testing.T, l limiter.Limiter, k string) {
			for i := 0; i < 4; i++ {
				inc(t, l, k, ttlRate, 4) // two admitted, two refused
			}
		},
		func(t *testing.T, l limiter.Limiter, k string) {
			inc(t, l, k, ttlRate, 4)
			inc(t, l, k, limiter.Every(2, ttlWindow), 4) // refused at a new capacity
			read(t, l, k)
		},
	}},
	{"reset", false, false, [2]func(*testing.T, limiter.Limiter, string){
		func(t *testing.T, l limiter.Limiter, k string) { inc(t, l, k, ttlRate, 2); reset(t, l, k) },
		func(t *testing.T, l limiter.Limiter, k string) { read(t, l, k); reset(t, l, k) },
	}},
	{"readonly", false, false, [2]func(*testing.T, limiter.Limiter, string){
		func(t *testing.T, l limiter.Limiter, k string) { read(t, l, k) },
		func(t *testing.T, l limiter.Limiter, k string) { read(t, l, k) },
	}},
	{"reset-reuse", true, false, [2]func(*testing.T, limiter.Limiter, string){
		func(t *testing.T, l limiter.Limiter, k string) { inc(t, l, k, ttlRate, 9); reset(t, l, k) },
		func(t *testing.T, l limiter.Limiter, k string) { inc(t, l, k, ttlRate, 1); read(t, l, k) },
	}},
}

// TestEverythingExpires runs a mixed workload (many keys, both strategies,
// Inc with several costs, peeks, IsAllowed, Get, Reset) in two rounds B
// apart, with W = 600 ms and B = 60 ms. Then it checks on every node that
// exactly the expected hashes exist, each with 0 < PTTL ≤ W + B and no
// less than what its last write set; and that W + B after the last call
// nothing under the test's prefix is left on any node.
func TestEverythingExpires(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c, each := b.open(t)
			prefix := redistest.Prefix(t)
			opts := []limiter.Option{
				limiter.WithPrefix(prefix),
				limiter.WithWindow(ttlWindow),
				limiter.WithBucket(ttlBucket),
			}
			ls := make([]limiter.Limiter, len(strategies))
			for i, s := range strategies {
				ls[i] = s.limiter(t, c, opts...)
			}
			want := make(map[string]int)   // hash that must exist → its key's index
			newest := make(map[string]int) // hash → the round that opened its newest bucket
			for i := 0; i < ttlKeys; i++ {
				sc := ttlScripts[i%len(ttlScripts)]
				if sc.present {
					for _, s := range strategies {
						h := hashName(t, prefix, userKey(i), s.name)
						want[h], newest[h] = i, 1
						if sc.absFull && s.name == key.Absolute {
							newest[h] = 0
						}
					}
				}
			}

			// A hash expires no earlier than W + B after the start of
			// the round that opened its newest bucket, roundStart[r][i].
			roundStart := [2][]time.Time{make([]time.Time, ttlKeys), make([]time.Time, ttlKeys)}
			start := time.Now()
			for round := 0; round < 2; round++ {
				if round > 0 {
					time.Sleep(ttlBucket) // a second bucket for every key
				}
				var wg sync.WaitGroup
				for i := 0; i < ttlKeys; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						roundStart[round][i] = time.Now()
						for _, l := range ls {
							ttlScripts[i%len(ttlScripts)].rounds[round](t, l, userKey(i))
						}
					}(i)
				}
				wg.Wait()
			}
			end := time.Now()
			if t.Failed() {
				return
			}

			limit := ttlWindow + ttlBucket
			found := pttls(t, each, key.Pattern(prefix))
			scanned := time.Now()
			t.Logf("workload %v, then %d hashes with a TTL", end.Sub(start), len(found))
			for name, ttl := range found {
				i, ok := want[name]
				if !ok {
					t.Errorf("%q exists, want no hash for it", name)
					continue
				}
				// PTTL was read before scanned, so it is at least
				// roundStart + W + B - scanned (less 2 ms of rounding).
				least := limit - scanned.Sub(roundStart[newest[name]][i]) - 2*time.Millisecond
				if ttl <= 0 || ttl > limit || ttl < least {
					t.Errorf("PTTL %q = %v, want in [%v, %v]", name, ttl, max(least, 1), limit)
				}
			}
			for name, i := range want {
				// Missing is an error unless it may have expired already.
				if _, ok := found[name]; !ok && scanned.Before(roundStart[newest[name]][i].Add(limit)) {
					t.Errorf("%q is missing %v after its newest bucket opened, want it until W + B = %v",
						name, scanned.Sub(roundStart[newest[name]][i]), limit)
				}
			}

			// W + B after the last write, nothing is left.
			time.Sleep(time.Until(end.Add(limit)))
			deadline := time.Now().Add(ttlGrace)
			for {
				left := scan(t, each, key.Pattern(prefix))
				var names []string
				for _, keys := range left {
					names = append(names, keys...)
				}
				if len(names) == 0 {
					t.Logf("all gone %v after the last write", time.Since(end))
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%v after the last write (W + B = %v), %d hashes are left: %q", time.Since(end), limit, len(names), names)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func userKey(i int) string {
	return fmt.Sprintf("u:%d:%s", i, ttlScripts[i%len(ttlScripts)].name)
}

// pttls returns the PTTL of every key matching pattern on every node. A key
// without an expiry reports -1 ns, as redis.DurationCmd does; a key that
// expired between SCAN and PTTL is left out.
func pttls(t *testing.T, each nodes, pattern string) map[string]time.Duration {
	t.Helper()
	var mu sync.Mutex
	out := make(map[string]time.Duration)
	err := each(ctx, func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.PTTL(ctx, k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for i, cmd := range cmds {
			if d := cmd.(*redis.DurationCmd).Val(); d != -2 { // -2: gone since SCAN
				out[keys[i]] = d
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("PTTL of every key matching %q: %v", pattern, err)
	}
	return out
}
