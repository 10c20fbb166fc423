package hybrid

// Calls returns the Redis calls l made so far: Inc lease requests, tick
// renewals and tick releases.
func (l *Absolute) Calls() (fetches, renewals, releases int64) {
	return l.fetches.Load(), l.renewals.Load(), l.releases.Load()
}

// SyncErrors returns the calls of ticks that failed.
func (l *Absolute) SyncErrors() int64 { return l.syncErrs.Load() }

// Forwards returns the leases l installed whose bucket starts after the
// script's now (forward-dated).
func (l *Absolute) Forwards() int64 { return l.forwards.Load() }

// Calls returns the Redis calls l made so far: Inc lease requests, tick
// renewals, releases and refreshes.
func (l *Suppressed) Calls() (fetches, renewals, releases, refreshes int64) {
	return l.fetches.Load(), l.renewals.Load(), l.releases.Load(), l.refreshes.Load()
}

// SyncErrors returns the calls of ticks that failed.
func (l *Suppressed) SyncErrors() int64 { return l.syncErrs.Load() }

// Forwards returns the leases l installed whose bucket starts after the
// script's now (forward-dated).
func (l *Suppressed) Forwards() int64 { return l.forwards.Load() }

// Entries returns the keys l holds in memory, as its maps count them.
func (l *Absolute) Entries() int { return l.entries() }

// Holds reports whether l holds k in memory.
func (l *Absolute) Holds(k string) bool { _, ok := l.lookup(k); return ok }

// Holds reports whether l holds k in memory.
func (l *Suppressed) Holds(k string) bool { _, ok := l.lookup(k); return ok }

// Entries returns the keys l holds in memory, as its maps count them.
func (l *Suppressed) Entries() int { return l.entries() }

// entries counts under every shard's lock at once: a count taken a shard
// at a time can add a key inserted in a later shard after one deleted in
// an earlier one was counted, and read more than the table ever held.
func (t *table[E]) entries() int {
	for i := range t.shards {
		t.shards[i].mu.RLock()
	}
	n := 0
	for i := range t.shards {
		n += len(t.shards[i].m)
	}
	for i := range t.shards {
		t.shards[i].mu.RUnlock()
	}
	return n
}

// Full returns the Incs l decided in Redis without an entry, its key
// table holding MaxKeys keys.
func (l *Absolute) Full() int64 { return l.full.Load() }

// Full returns the Incs l decided in Redis without an entry, its key
// table holding MaxKeys keys.
func (l *Suppressed) Full() int64 { return l.full.Load() }

// SetMaxKeys lowers l's bound on keys in memory (MaxKeys) to n; call it
// before l's first Inc.
func (l *Absolute) SetMaxKeys(n int64) { l.maxKeys = n }

// SetMaxKeys lowers l's bound on keys in memory (MaxKeys) to n; call it
// before l's first Inc.
func (l *Suppressed) SetMaxKeys(n int64) { l.maxKeys = n }
