package clusterit_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
// exist after the workload; each of those is written in round 2 (the
// absolute strategy writes nothing on a refusal that changes nothing).
type ttlScript struct {
	name    string
	present bool
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
	{"coalesce", true, [2]func(*testing.T, limiter.Limiter, string){
		func(t *testing.T, l limiter.Limiter, k string) {
			inc(t, l, k, ttlRate, 1)
			inc(t, l, k, ttlRate, 1)
			read(t, l, k)
		},
		func(t *testing.T, l limiter.Limiter, k string) { inc(t, l, k, ttlRate, 2); read(t, l, k) },
	}},
	{"costs", true, [2]func(*testing.T, limiter.Limiter, string){
		func(t *testing.T, l limiter.Limiter, k string) {
			inc(t, l, k, ttlRate, 5)
			inc(t, l, k, ttlRate, 0)
			inc(t, l, k, ttlRate, 1000) // never fits
		},
		func(t *testing.T, l limiter.Limiter, k string) { inc(t, l, k, ttlRate, 3); read(t, l, k) },
	}},
	{"overflow", true, [2]func(*testing.T, limiter.Limiter, string){
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
	{"reset", false, [2]func(*testing.T, limiter.Limiter, string){
		func(t *testing.T, l limiter.Limiter, k string) { inc(t, l, k, ttlRate, 2); reset(t, l, k) },
		func(t *testing.T, l limiter.Limiter, k string) { read(t, l, k); reset(t, l, k) },
	}},
	{"readonly", false, [2]func(*testing.T, limiter.Limiter, string){
		func(t *testing.T, l limiter.Limiter, k string) { read(t, l, k) },
		func(t *testing.T, l limiter.Limiter, k string) { read(t, l, k) },
	}},
	{"reset-reuse", true, [2]func(*testing.T, limiter.Limiter, string){
		func(t *testing.T, l limiter.Limiter, k string) { inc(t, l, k, ttlRate, 9); reset(t, l, k) },
		func(t *testing.T, l limiter.Limiter, k string) { inc(t, l, k, ttlRate, 1); read(t, l, k) },
	}},
}

// TestEverythingExpires runs a mixed workload (many keys, both strategies,
// Inc with several costs, peeks, IsAllowed, Get, Reset) in two rounds B
// apart, with W = 600 ms and B = 60 ms. Then it checks on every node that
// exactly the expected hashes exist, each with 0 < PTTL ≤ W + B and no
// less than its newest bucket has to live (a write that opens a bucket
// sets W + B, a join keeps it: docs/data-model.md, Expiry); and that
// W + B after the last call nothing under the test's prefix is left on
// any node.
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
			want := make(map[string]int) // hash that must exist → its key's index
			for i := 0; i < ttlKeys; i++ {
				if ttlScripts[i%len(ttlScripts)].present {
					for _, s := range strategies {
						want[hashName(t, prefix, userKey(i), s.name)] = i
					}
				}
			}

			// Every key whose hashes remain is written in round 1, so its
			// newest bucket opened no earlier than firstRound[i].
			firstRound := make([]time.Time, ttlKeys)
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
						if round == 0 {
							firstRound[i] = time.Now()
						}
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
			for name, e := range found {
				if _, ok := want[name]; !ok {
					t.Errorf("%q exists, want no hash for it", name)
					continue
				}
				if e.newest == 0 {
					t.Errorf("%q: no newest bucket in its meta field", name)
					continue
				}
				// The newest bucket (n in "m") is live until n + W + B;
				// TIME was read after PTTL, so PTTL is at least that
				// less TIME (less 2 ms of rounding).
				least := time.Duration(e.newest-e.now)*time.Millisecond + limit - 2*time.Millisecond
				if e.ttl <= 0 || e.ttl > limit || e.ttl < least {
					t.Errorf("PTTL %q = %v, want in [%v, %v]: its newest bucket opened %v before",
						name, e.ttl, max(least, 1), limit, time.Duration(e.now-e.newest)*time.Millisecond)
				}
			}
			for name, i := range want {
				// Missing is an error unless it may have expired already.
				if _, ok := found[name]; !ok && scanned.Before(firstRound[i].Add(limit)) {
					t.Errorf("%q is missing %v after its first write, want it until W + B = %v",
						name, scanned.Sub(firstRound[i]), limit)
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

// expiry is what pttls reads of one key: its PTTL, the start of its
// newest bucket (n in the meta field "m", 0 when unreadable) and the
// node's TIME read after both, in ms.
type expiry struct {
	ttl         time.Duration
	newest, now int64
}

// pttls returns the PTTL of every key matching pattern on every node, with
// its newest bucket's start and the node's time. A key without an expiry
// reports -1 ns, as redis.DurationCmd does; a key that expired between
// SCAN and PTTL is left out.
func pttls(t *testing.T, each nodes, pattern string) map[string]expiry {
	t.Helper()
	var mu sync.Mutex
	out := make(map[string]expiry)
	err := each(ctx, func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		var tm *redis.TimeCmd
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.PTTL(ctx, k)
				p.HGet(ctx, k, "m")
			}
			tm = p.Time(ctx)
			return nil
		})
		// A hash that expires between SCAN and its PTTL or HGET answers
		// nil, which Pipelined returns as its error: such a key is gone,
		// not a failure.
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		now := tm.Val().UnixMilli()
		mu.Lock()
		defer mu.Unlock()
		for i, k := range keys {
			d := cmds[2*i].(*redis.DurationCmd).Val()
			hm := cmds[2*i+1].(*redis.StringCmd)
			if d == -2 || errors.Is(hm.Err(), redis.Nil) { // gone since SCAN
				continue
			}
			// "m" holds n fourth in both layouts (abs "<c> <u> <o> <n> <nc>",
			// sup "<u> <x> <o> <n> <nc> <nd>").
			var newest int64
			if f := strings.Fields(hm.Val()); len(f) >= 5 {
				newest, _ = strconv.ParseInt(f[3], 10, 64)
			}
			out[k] = expiry{ttl: d, newest: newest, now: now}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("PTTL of every key matching %q: %v", pattern, err)
	}
	return out
}
