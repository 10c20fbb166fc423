package window

import (
	"context"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// TestKeymapAgainstMap drives the key map and a Go map with the same
// stores and removals, growing a shard well past its first table and
// emptying it again, and checks that they agree after every step and that
// a shard left nearly empty shrinks.
func TestKeymapAgainstMap(t *testing.T) {
	m := newKeymap()
	want := map[string]*entry{}
	check := func(step string) {
		t.Helper()
		if n := m.len(); n != len(want) {
			t.Fatalf("%s: len = %d, want %d", step, n, len(want))
		}
		for k, e := range want {
			if got := m.load(m.hash(k), k); got != e {
				t.Fatalf("%s: load(%q) = %p, want %p", step, k, got, e)
			}
		}
		seen := 0
		m.each(func(k string, h uint64, e *entry) bool {
			if want[k] != e || h != m.hash(k) {
				t.Fatalf("%s: each gave %q → %p (hash %x), want %p (hash %x)", step, k, e, h, want[k], m.hash(k))
			}
			seen++
			return true
		})
		if seen != len(want) {
			t.Fatalf("%s: each visited %d keys, want %d", step, seen, len(want))
		}
	}
	const n = 20_000
	for i := 0; i < n; i++ {
		k := "k" + strconv.Itoa(i)
		e := &entry{}
		if got := m.loadOrStore(m.hash(k), k, e); got != e {
			t.Fatalf("loadOrStore(%q) on a new key = %p, want the entry given %p", k, got, e)
		}
		if got := m.loadOrStore(m.hash(k), k, &entry{}); got != e {
			t.Fatalf("loadOrStore(%q) on a known key = %p, want the stored %p", k, got, e)
		}
		want[k] = e
	}
	check("after stores")
	if got := m.load(m.hash("absent"), "absent"); got != nil {
		t.Fatalf("load(absent) = %p, want nil", got)
	}
	// Removing with the wrong entry leaves the key.
	m.compareAndDelete(m.hash("k1"), "k1", &entry{})
	check("after a removal with the wrong entry")
	// Remove all but every 100th key, storing new keys in between, so
	// tombstones and inserts mix.
	for i := 0; i < n; i++ {
		k := "k" + strconv.Itoa(i)
		if i%100 != 0 {
			m.compareAndDelete(m.hash(k), k, want[k])
			delete(want, k)
		}
		if i%1000 == 0 {
			k := "new" + strconv.Itoa(i)
			e := &entry{}
			m.loadOrStore(m.hash(k), k, e)
			want[k] = e
		}
	}
	check("after removals")
	slots := func() int {
		total := 0
		for i := range m.tables {
			if tb := m.tables[i].Load(); tb != nil {
				total += len(tb.slots)
			}
		}
		return total
	}
	before := slots()
	for i := uint64(0); i < mapShards; i++ {
		m.shrink(i)
	}
	check("after shrink")
	if after := slots(); after*4 > before || after > 8*len(want)+mapShards*minSlots {
		t.Fatalf("slots after shrink = %d (before %d) for %d keys, want at most a quarter and 8 per key", after, before, len(want))
	}
	// A tombstone keeps its removed entry reachable: shrink left none.
	for i := range m.tables {
		if tb := m.tables[i].Load(); tb != nil {
			for _, s := range tb.slots {
				if s.h == tomb {
					t.Fatalf("shard %d kept a tombstone (entry %p) after shrink", i, s.e)
				}
			}
		}
	}
	// Removing a fifth of a shard's keys leaves its tombstones to the next
	// rehash; removing more than a quarter, plus minSlots, rebuilds it.
	m2 := newKeymap()
	var ks []string
	for i := 0; len(ks) < 200; i++ {
		if k := "s" + strconv.Itoa(i); m2.hash(k)>>(64-mapShardBits) == 0 {
			ks = append(ks, k)
			m2.loadOrStore(m2.hash(k), k, &entry{})
		}
	}
	tombs := func() int {
		n := 0
		for _, s := range m2.tables[0].Load().slots {
			if s.h == tomb {
				n++
			}
		}
		return n
	}
	for _, k := range ks[:40] {
		h := m2.hash(k)
		m2.compareAndDelete(h, k, m2.load(h, k))
	}
	m2.shrink(0)
	if n := tombs(); n != 40 {
		t.Fatalf("tombstones after removing 40 of 200 keys and shrink = %d, want 40 (no rehash)", n)
	}
	for _, k := range ks[40:100] {
		h := m2.hash(k)
		m2.compareAndDelete(h, k, m2.load(h, k))
	}
	m2.shrink(0)
	if n := tombs(); n != 0 {
		t.Fatalf("tombstones after removing 100 of 200 keys and shrink = %d, want 0", n)
	}
}

// TestKeymapConcurrent: lookups of known keys never miss while other
// goroutines store and remove keys in the same shards (rehashing them);
// -race checks the publication of slots.
func TestKeymapConcurrent(t *testing.T) {
	m := newKeymap()
	fixed := make([]*entry, 500)
	for i := range fixed {
		k := "fixed" + strconv.Itoa(i)
		fixed[i] = m.loadOrStore(m.hash(k), k, &entry{})
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := "churn" + strconv.Itoa(g) + "-" + strconv.Itoa(i%5000)
				h := m.hash(k)
				e := m.loadOrStore(h, k, &entry{})
				if i%3 == 0 {
					m.compareAndDelete(h, k, e)
				}
				if i%2000 == 0 {
					m.shrink(h >> (64 - mapShardBits))
				}
			}
		}(g)
	}
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		for i, e := range fixed {
			k := "fixed" + strconv.Itoa(i)
			if got := m.load(m.hash(k), k); got != e {
				close(stop)
				wg.Wait()
				t.Fatalf("load(%q) during churn = %p, want %p", k, got, e)
			}
		}
	}
	close(stop)
	wg.Wait()
}

// TestCapacityMatchesLimiter: the provider's capacity fast path (the
// window's seconds computed once) gives limiter.Capacity's and
// HardCapacity's very numbers, and fails exactly where they fail.
func TestCapacityMatchesLimiter(t *testing.T) {
	rates := []limiter.Rate{
		limiter.PerSecond(1), limiter.PerSecond(0.7), limiter.PerSecond(10), limiter.PerSecond(1e7),
		limiter.PerMinute(1000), limiter.PerMinute(7), limiter.PerHour(5), limiter.PerHour(90), limiter.PerDay(20000),
		limiter.Every(3, 10*time.Second), limiter.Every(1, 0), limiter.PerSecond(0), limiter.PerSecond(-1),
		limiter.PerSecond(math.NaN()), limiter.PerSecond(math.Inf(1)), limiter.PerSecond(1e-12),
		limiter.PerSecond(1 << 50), limiter.PerSecond(1<<50 + 1), limiter.PerSecond(0.1), limiter.PerSecond(1.0 / 3),
	}
	windows := []time.Duration{time.Millisecond, 10 * time.Millisecond, 999 * time.Millisecond, time.Second,
		7 * time.Second, 10 * time.Second, time.Minute, time.Hour, 24 * time.Hour, 1234567 * time.Millisecond}
	factors := []float64{1, 1.5, 2, 3.7}
	for _, w := range windows {
		for _, f := range factors {
			s, err := newStore(StrategySuppressed, []limiter.Option{limiter.WithWindow(w), limiter.WithHardLimitFactor(f)})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rates {
				wantC, wantErr := limiter.Capacity(r, w)
				c, ok := capacityOf(r.PerSecondValue() * s.windowSec)
				if ok != (wantErr == nil) || ok && c != wantC {
					t.Errorf("capacityOf(%v over %v) = %d, %v; limiter.Capacity = %d, %v", r, w, c, ok, wantC, wantErr)
				}
				wantH, wantHErr := HardCapacity(r, w, f)
				h, err := s.hardCapacity(r)
				if (err == nil) != (wantHErr == nil) || h != wantH {
					t.Errorf("hardCapacity(%v over %v, factor %v) = %d, %v; HardCapacity = %d, %v", r, w, f, h, err, wantH, wantHErr)
				}
				// The suppressed Inc's preamble: both capacities from one
				// product, limiter's numbers, and the first error.
				_, soft, hard, err := s.supArgs("k", r, 1)
				switch {
				case wantErr != nil || wantHErr != nil:
					first := wantErr
					if first == nil {
						first = wantHErr
					}
					if err == nil || err.Error() != "local: inc: "+first.Error() {
						t.Errorf("supArgs(%v over %v, factor %v) = %v, want %v", r, w, f, err, first)
					}
				case err != nil || soft != wantC || hard != wantH:
					t.Errorf("supArgs(%v over %v, factor %v) = %d, %d, %v; limiter: %d, %d", r, w, f, soft, hard, err, wantC, wantH)
				}
			}
			s.close(context.Background())
		}
	}
}

// len counts the keys held.
func (m *keymap) len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += sh.live
		sh.mu.Unlock()
	}
	return n
}

// each calls f for every key held when it starts (a key stored meanwhile
// may be missed), until f returns false.
func (m *keymap) each(f func(k string, h uint64, e *entry) bool) {
	for i := range m.tables {
		t := m.snapshot(uint64(i))
		if t == nil {
			continue
		}
		for j := range t.slots {
			if k, h, e, ok := t.slotEntry(j); ok && !f(k, h, e) {
				return
			}
		}
	}
}
