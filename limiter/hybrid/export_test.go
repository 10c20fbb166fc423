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
