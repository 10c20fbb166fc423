package cleanup_test

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// admission is one recorded Inc: the units admitted or declined and the
// start of the bucket they went into.
type admission struct {
	at, start         int64 // ms
	admitted, refused int64
}

// TestRace: cleanup passes run back to back, deleting and trimming with a
// threshold of 0, while 16 goroutines Inc the same keys of both strategies
// as their buckets die and their hashes die and reopen. Every 25 rounds and
// at the end, Get of every key equals the units admitted (and, suppressed,
// declined) into its live buckets, so no count was lost; and no span of W
// ever holds more than C admitted units.
func TestRace(t *testing.T) {
	c := redistest.Real(t).Client(t)
	prefix := redistest.Prefix(t)
	const (
		w       = 150 * time.Millisecond
		b       = 3 * time.Millisecond
		capa    = 200
		workers = 16
		keysPer = 3 // keys per strategy
		rounds  = 800
		tick    = 3 * time.Millisecond // a bucket per round
	)
	span := (w + b).Milliseconds()
	rate := limiter.Every(capa, w)
	clk := &stepClock{now: time.UnixMilli(1_800_000_000_000)}
	opts := []limiter.Option{limiter.WithWindow(w), limiter.WithBucket(b), limiter.WithPrefix(prefix), limiter.WithClock(clk.Now)}
	ls := map[string]limiter.Limiter{}
	for _, s := range strategies {
		o := opts
		if s == key.Suppressed { // the random source is the suppressed strategy's alone
			o = append(opts[:len(opts):len(opts)], limiter.WithRandom(func() float64 { return 0.5 }))
		}
		ls[s] = newLimiter(t, s, c, o...)
	}

	var passes, deleted, trimmed atomic.Int64
	cl := newCleaner(t, c, cleanup.WithPrefix(prefix), cleanup.WithWindow(w, b), cleanup.WithClock(clk.Now),
		cleanup.WithRate(math.Inf(1)), cleanup.WithPeriod(0), cleanup.WithTrimThreshold(0),
		cleanup.WithReports(func(r cleanup.Report, err error) {
			if err != nil {
				t.Errorf("pass: %v", err)
			}
			passes.Add(1)
			deleted.Add(r.Deleted)
			trimmed.Add(r.Trimmed)
		}))
	cl.Start()

	type keyRef struct{ strategy, user string }
	var keys []keyRef
	for _, s := range strategies {
		for i := 0; i < keysPer; i++ {
			keys = append(keys, keyRef{s, fmt.Sprintf("race:%d", i)})
		}
	}
	var mu sync.Mutex
	log := map[keyRef][]admission{}

	// active: key j's traffic runs in cycles of 160 rounds: 50 rounds of
	// traffic, 25 idle (75 ms: its oldest buckets die, more than the 8
	// the script follows by their links, while the newest live on), 25 of
	// traffic, and 60 idle (180 ms > W + B: the hash dies and reopens).
	active := func(j, r int) bool {
		p := (r + 37*j) % 160
		return p < 50 || p >= 75 && p < 100
	}
	check := func(at int64) {
		t.Helper()
		for _, k := range keys {
			var used, declined int64
			for _, a := range log[k] {
				if at-a.start < span {
					used += a.admitted
					declined += a.refused
				}
			}
			u, err := ls[k.strategy].Get(ctx, k.user)
			if err != nil {
				t.Fatal(err)
			}
			if k.strategy == key.Absolute {
				declined = 0
			}
			if u.Used != used || u.Declined != declined {
				t.Fatalf("%s %q at %d: Get = used %d, declined %d; the live admissions hold %d, %d",
					k.strategy, k.user, at, u.Used, u.Declined, used, declined)
			}
		}
	}
	for r := 0; r < rounds; r++ {
		now := clk.Now().UnixMilli()
		var wg sync.WaitGroup
		for g := 0; g < workers; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				j := (g + r) % len(keys)
				if !active(j, r) {
					return
				}
				k := keys[j]
				n := int64(1 + (g+r)%3)
				d, err := ls[k.strategy].Inc(ctx, k.user, rate, n)
				if err != nil {
					t.Errorf("Inc: %v", err)
					return
				}
				// The units went into the newest bucket, which the
				// decision's ResetAfter dates: start = now + reset − (W + B).
				a := admission{at: now, start: now + d.ResetAfter.Milliseconds() - span}
				if d.Allowed {
					a.admitted = n
				} else if k.strategy == key.Suppressed {
					a.refused = n
				}
				mu.Lock()
				log[k] = append(log[k], a)
				mu.Unlock()
			}(g)
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if r%25 == 24 {
			check(now)
		}
		clk.Advance(tick)
	}
	check(clk.Now().UnixMilli())
	if err := cl.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	// No span of W holds more than C admitted units.
	for k, as := range log {
		for _, a := range as {
			var in int64
			for _, o := range as {
				if o.at >= a.at && o.at < a.at+w.Milliseconds() {
					in += o.admitted
				}
			}
			if in > capa {
				t.Fatalf("%v: %d units admitted in [%d, %d), capacity %d", k, in, a.at, a.at+w.Milliseconds(), capa)
			}
		}
	}
	t.Logf("%d passes, %d hashes deleted, %d trimmed during the run", passes.Load(), deleted.Load(), trimmed.Load())
	if passes.Load() < 10 || deleted.Load() == 0 || trimmed.Load() == 0 {
		t.Errorf("the cleaner did too little to race: %d passes, %d deleted, %d trimmed", passes.Load(), deleted.Load(), trimmed.Load())
	}
}
