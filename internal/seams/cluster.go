package seams

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/window"

	"github.com/sluice-go/sluice/internal/redisprov"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// clusterKeys is how many keys RunClusterByNode spreads over the masters.
const clusterKeys = 48

// RunClusterByNode: a real cluster of three masters with one replica each,
// redisabs and redissup on a cluster client with go-redis' defaults (but
// MaxRetries, as the README) and default options, 16 goroutines on keys of
// every master; one master is killed. Keys on the other masters are never
// degraded (a dead master costs its own slots, not the cluster); keys of
// the dead master are back on Redis within 2 s of the replica's promotion
// (the node guard's probe follows the topology); no key admits more than
// the documented bound in its window: C on the healthy masters (no
// outage), C + C (what Redis held, plus the one instance's fallback) on
// the dead one's.
func RunClusterByNode(t *testing.T) {
	rc := redistest.StartReplicatedCluster(t)
	opts := rc.Options()
	opts.MaxRetries = -1
	client := redis.NewClusterClient(opts)
	t.Cleanup(func() { client.Close() })

	keys := make([]string, clusterKeys)
	owner := make(map[string]string) // key → its master before the kill
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
		owner[keys[i]] = rc.MasterOf(redisprov.Slot(key.Escape(keys[i])))
	}
	victim := owner[keys[0]]
	var victimKeys int
	for _, k := range keys {
		if owner[k] == victim {
			victimKeys++
		}
	}
	if victim == "" || victimKeys == len(keys) {
		t.Fatalf("keys not spread over the masters: %v", owner)
	}
	const capacity = 300
	rate := limiter.PerMinute(capacity)
	type provider struct {
		name string
		l    limiter.Limiter
	}
	var ps []provider
	for _, name := range []string{"redisabs", "redissup"} {
		var l limiter.Limiter
		var err error
		o := []limiter.Option{limiter.WithPrefix(redistest.Prefix(t) + name), window.WithLogger(nil)}
		if name == "redisabs" {
			l, err = redisabs.New(client, o...)
		} else {
			l, err = redissup.New(client, o...)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close(context.Background()) })
		ps = append(ps, provider{name, l})
	}

	type call struct {
		p        int
		k        string
		start    time.Time
		degraded bool
		admitted bool
		err      error
	}
	var mu sync.Mutex
	var calls []call
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p, k := (w+i)%len(ps), keys[(w*7+i)%len(keys)]
				start := time.Now()
				d, err := ps[p].l.Inc(context.Background(), k, rate, 1)
				mu.Lock()
				calls = append(calls, call{p, k, start, d.Degraded, err == nil && d.Allowed, err})
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		}(w)
	}
	time.Sleep(time.Second)
	killed := time.Now()
	rc.Kill(victim)
	slot := redisprov.Slot(key.Escape(keys[0]))
	var promoted time.Time
	for deadline := killed.Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := rc.MasterOf(slot); m != "" && m != victim {
			promoted = time.Now()
			break
		}
	}
	if promoted.IsZero() {
		close(stop)
		wg.Wait()
		t.Fatalf("no replica took %s's slots within 20 s of the kill%s", victim, rc.Logs())
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()

	type tally struct{ calls, degraded, errs, admitted int }
	byKey := make(map[string]*tally)
	var lateDegraded []string
	healthy := map[bool]*tally{true: {}, false: {}}
	for _, c := range calls {
		id := ps[c.p].name + "/" + c.k
		tk := byKey[id]
		if tk == nil {
			tk = &tally{}
			byKey[id] = tk
		}
		h := healthy[owner[c.k] != victim]
		for _, x := range []*tally{tk, h} {
			x.calls++
			if c.degraded {
				x.degraded++
			}
			if c.err != nil {
				x.errs++
			}
			if c.admitted {
				x.admitted++
			}
		}
		if owner[c.k] != victim && (c.degraded || c.err != nil) {
			t.Errorf("%s on a healthy master (%s) at kill%+v: degraded %v, error %v", id, owner[c.k],
				c.start.Sub(killed).Round(time.Millisecond), c.degraded, c.err)
		}
		if owner[c.k] == victim && c.start.After(promoted.Add(2*time.Second)) && (c.degraded || c.err != nil) {
			lateDegraded = append(lateDegraded, fmt.Sprintf("%s at promotion%+v", id, c.start.Sub(promoted).Round(time.Millisecond)))
		}
	}
	t.Logf("killed %s (%d of %d keys); a replica took its slots %v after the kill; healthy masters' keys: %+v; dead master's: %+v",
		victim, victimKeys, len(keys), promoted.Sub(killed).Round(time.Millisecond), *healthy[true], *healthy[false])
	if len(lateDegraded) > 0 {
		t.Errorf("%d calls on the dead master's keys still degraded or failing 2 s after the promotion, e.g. %v",
			len(lateDegraded), lateDegraded[:min(5, len(lateDegraded))])
	}
	if healthy[false].degraded == 0 {
		t.Errorf("no call on the dead master's keys was degraded: the kill was not seen")
	}
	for id, tk := range byKey {
		k := id[len(id)-len(keyOf(id)):]
		bound := capacity
		if owner[k] == victim {
			bound = 2 * capacity
		}
		if tk.admitted > bound {
			t.Errorf("%s admitted %d in one window, want at most %d", id, tk.admitted, bound)
		}
	}
}

// keyOf returns the key of a "<provider>/<key>" id.
func keyOf(id string) string {
	for i := len(id) - 1; i >= 0; i-- {
		if id[i] == '/' {
			return id[i+1:]
		}
	}
	return id
}
