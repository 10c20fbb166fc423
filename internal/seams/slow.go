package seams

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/window"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// slowFields is how many foreign fields RunSlowKey writes into a key's
// hashes: enough that one HGETALL of them holds this machine's
// redis-server 0.5 s or more (measured 0.6–0.9 s), twice the timeout.
const slowFields = 800_000

// RunSlowKey: another client pads one key's hashes with slowFields fields
// while the instance calls that key (Inc, IsAllowed, Get, IncSet, GetSet,
// each of which may read a hash whole) and 8 goroutines call other keys.
// A script reads a hash whole only after HLEN says it holds at most
// redisprov.MaxFields fields, so the padded key's calls fail at once with
// ErrLayout naming its hash, and the breaker never opens: one slow key is
// not an outage of Redis for every other key. Without the HLEN check the
// scans held Redis for longer than the confirming probe's deadline and
// redissup's and the suppressed hybrid's breakers opened (every key then
// answered by the fallback).
func RunSlowKey(t *testing.T) {
	// The key at its limit, its last unit spent more than a second after
	// the others: the suppressed scripts read its hashes whole for the
	// factor.
	set, err := limiter.NewSet(limiter.Limit{Name: "short", Rate: limiter.PerMinute(10), Window: time.Minute},
		limiter.Limit{Name: "hour", Rate: limiter.PerHour(100), Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range fleetProviders {
		t.Run(p.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			ctx := context.Background()
			states := newStateLog()
			pfx := redistest.Prefix(t)
			l, err := p.new(readmeClient(t, srv.Addr), limiter.WithPrefix(pfx), limiter.WithObserver(window.StateObserver(states.hook)),
				window.WithLogger(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close(ctx)
			sl := l.(limiter.SetLimiter)
			must := func(_ any, err error) {
				if err != nil {
					t.Fatal(err)
				}
			}
			rate := limiter.PerMinute(10)
			for i := 0; i < 11; i++ {
				if i == 10 {
					time.Sleep(1100 * time.Millisecond)
				}
				must(l.Inc(ctx, "slow", rate, 1))
				must(sl.IncSet(ctx, "slow", set, 1))
			}
			from := time.Now()
			padded := pad(t, srv.Client(t), pfx, "{slow}")
			t.Logf("padded in %v", time.Since(from).Round(time.Millisecond))

			stop := make(chan struct{})
			var wg sync.WaitGroup
			var mu sync.Mutex
			var others, degraded, failed int
			var slowCalls, layoutErrs int
			var longest time.Duration
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					var err error
					switch i % 5 {
					case 0:
						_, err = l.Inc(ctx, "slow", rate, 1)
					case 1:
						_, err = l.IsAllowed(ctx, "slow")
					case 2:
						_, err = l.Get(ctx, "slow")
					case 3:
						_, err = sl.IncSet(ctx, "slow", set, 1)
					case 4:
						_, err = sl.GetSet(ctx, "slow", set)
					}
					el := time.Since(start)
					mu.Lock()
					slowCalls++
					longest = max(longest, el)
					if errors.Is(err, limiter.ErrLayout) && strings.Contains(err.Error(), "fields") {
						layoutErrs++
					}
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
				}
			}()
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						d, err := l.Inc(ctx, fmt.Sprintf("other:%d", (w*1000+i)%200), limiter.PerSecond(1000), 1)
						mu.Lock()
						others++
						if d.Degraded {
							degraded++
						}
						if err != nil {
							failed++
						}
						mu.Unlock()
						time.Sleep(2 * time.Millisecond)
					}
				}(w)
			}
			time.Sleep(4 * time.Second)
			close(stop)
			wg.Wait()
			t.Logf("%d hashes padded; slow key: %d calls, %d ErrLayout, longest %v; other keys: %d calls, %d degraded, %d errors",
				padded, slowCalls, layoutErrs, longest.Round(time.Millisecond), others, degraded, failed)
			if opened := states.wait(true, from, 0); !opened.IsZero() {
				t.Errorf("the breaker opened %v after the padding: one slow key is not an outage", opened.Sub(from))
			}
			if degraded > 0 || failed > 0 {
				t.Errorf("other keys: %d of %d calls degraded, %d failed; want none", degraded, others, failed)
			}
			// The suppressed scripts read the hashes whole here (the
			// factor); the absolute ones walk their buckets' links and read
			// a hash whole only when a link is broken, never on this key.
			if layoutErrs == 0 && (strings.HasSuffix(p.name, "sup") || strings.HasSuffix(p.name, "Suppressed")) {
				t.Errorf("no call on the padded key failed with ErrLayout naming its fields (%d calls)", slowCalls)
			}
			if bound := 2 * onsetTimeout; longest > bound+onsetSlack() {
				t.Errorf("a call on the padded key took %v, want at most %v", longest, bound+onsetSlack())
			}
		})
	}
}

var padScript = redis.NewScript(`local a = {}
for i = 1, tonumber(ARGV[2]) do
  a[#a + 1], a[#a + 2] = 'pad' .. (ARGV[1] + i), 'xxxxxxxx'
  if #a == 2000 then redis.call('HSET', KEYS[1], unpack(a)); a = {} end
end
if #a > 0 then redis.call('HSET', KEYS[1], unpack(a)) end`)

// pad writes slowFields foreign fields into every hash of prefix whose
// name holds tag and returns how many hashes it padded.
func pad(t *testing.T, c *redis.Client, prefix, tag string) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	for _, h := range c.Keys(ctx, prefix+"*").Val() {
		if !strings.Contains(h, tag) || c.Type(ctx, h).Val() != "hash" {
			continue
		}
		n++
		// in Redis, 50,000 fields a script (about 50 ms each): no
		// megabytes on the wire, and less CPU taken from other tests
		for i := 0; i < slowFields; i += 50_000 {
			if err := padScript.Run(ctx, c, []string{h}, i, 50_000).Err(); err != nil && err != redis.Nil {
				t.Fatal(err)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no hash of %s holds %s", prefix, tag)
	}
	return n
}
