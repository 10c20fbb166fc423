package window

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// keymap maps keys to their entries: shards by the top bits of the key's
// hash, each an open-addressed table with linear probing, read without a
// lock and written under the shard's mutex. A slot is written once, its
// entry before its hash (atomically), so a reader that loads a key's hash
// may read its entry. A removed key's slot gets the hash tomb and keeps its
// entry for earlier readers until the shard's next rehash publishes a new
// table.
type keymap struct {
	seed   maphash.Seed
	tables [mapShards]atomic.Pointer[table] // read by every lookup
	shards [mapShards]shard                 // written by inserts and removals
}

const (
	mapShardBits = 6
	mapShards    = 1 << mapShardBits
	minSlots     = 8
)

// table is one shard's slots; len(slots) is a power of two and at most
// half hold a key or a tombstone, so every probe ends.
type table struct{ slots []slot }

// slot is one key's place in a table. Once the table is published, h is
// accessed atomically: 0 for an empty slot, tomb for a removed key, else
// the key's hash (odd).
type slot struct {
	h uint64
	e *entry
}

// tomb is the hash of a slot whose key was removed: even, so no key's.
const tomb = 2

// shard holds what writers of one shard share, on a cache line of its own.
type shard struct {
	mu   sync.Mutex
	used int // slots holding a key or a tombstone
	live int // slots holding a key
	_    [40]byte
}

func newKeymap() *keymap { return &keymap{seed: maphash.MakeSeed()} }

// hash returns k's hash, never 0 and odd.
func (m *keymap) hash(k string) uint64 { return maphash.String(m.seed, k) | 1 }

// load returns k's entry (h is m.hash(k)), or nil.
func (m *keymap) load(h uint64, k string) *entry {
	t := m.tables[h>>(64-mapShardBits)].Load()
	if t == nil {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		switch atomic.LoadUint64(&s.h) {
		case 0:
			return nil
		case h:
			if e := s.e; e.k == k {
				return e
			}
		}
	}
}

// loadOrStore returns k's entry, storing the new e (and its key) when k has
// none.
func (m *keymap) loadOrStore(h uint64, k string, e *entry) *entry {
	i := h >> (64 - mapShardBits)
	sh := &m.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old := m.load(h, k); old != nil {
		return old
	}
	t := m.tables[i].Load()
	if t == nil || (sh.used+1)*2 > len(t.slots) {
		t = m.rehash(i, sh.live+1)
	}
	mask := uint64(len(t.slots) - 1)
	j := h & mask
	for t.slots[j].h != 0 { // slots are written under the shard's mutex only
		j = (j + 1) & mask
	}
	s := &t.slots[j]
	e.k, s.e = k, e
	atomic.StoreUint64(&s.h, h) // publishes e and its key
	sh.used++
	sh.live++
	return e
}

// compareAndDelete removes k when its entry is e.
func (m *keymap) compareAndDelete(h uint64, k string, e *entry) {
	i := h >> (64 - mapShardBits)
	sh := &m.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := m.tables[i].Load()
	if t == nil {
		return
	}
	mask := uint64(len(t.slots) - 1)
	for j := h & mask; ; j = (j + 1) & mask {
		s := &t.slots[j]
		switch s.h {
		case 0:
			return
		case h:
			if s.e == e {
				atomic.StoreUint64(&s.h, tomb)
				sh.live--
				return
			}
		}
	}
}

// rehash publishes and returns a new table of shard i's live slots, sized
// for n keys (at most 3/8 full), under the shard's mutex.
func (m *keymap) rehash(i uint64, n int) *table {
	size := minSlots
	for size*3 < 8*n {
		size *= 2
	}
	nt := &table{slots: make([]slot, size)}
	mask := uint64(size - 1)
	live := 0
	if old := m.tables[i].Load(); old != nil {
		for _, s := range old.slots {
			if s.h == 0 || s.h == tomb {
				continue
			}
			j := s.h & mask
			for nt.slots[j].h != 0 {
				j = (j + 1) & mask
			}
			nt.slots[j] = s
			live++
		}
	}
	m.tables[i].Store(nt)
	sh := &m.shards[i]
	sh.used, sh.live = live, live
	return nt
}

// shrink rehashes shard i when it is mostly empty slots or its tombstones
// outnumber a quarter of its keys, so removed entries are not held long.
func (m *keymap) shrink(i uint64) {
	sh := &m.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := m.tables[i].Load()
	if t == nil {
		return
	}
	if len(t.slots) > minSlots && sh.live*12 < len(t.slots) || sh.used-sh.live > sh.live/4+minSlots {
		m.rehash(i, sh.live)
	}
}

// snapshot returns shard i's table as it is now (read with slotEntry).
func (m *keymap) snapshot(i uint64) *table { return m.tables[i].Load() }

// slotEntry returns slot j's key and entry, ok false for none.
func (t *table) slotEntry(j int) (k string, h uint64, e *entry, ok bool) {
	s := &t.slots[j]
	h = atomic.LoadUint64(&s.h)
	if h == 0 || h == tomb {
		return "", 0, nil, false
	}
	return s.e.k, h, s.e, true
}
