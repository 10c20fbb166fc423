// Package cleanup is the safety net beside sluice's Redis providers: it
// walks the keys limiters write under a prefix and reclaims what expiry
// missed, without ever losing a live count and without hogging Redis.
//
// Every limiter hash carries a TTL and leaves Redis by itself W + B after
// its newest bucket opened (docs/data-model.md), so a healthy deployment
// needs no cleanup. A Cleaner finds what does not follow that rule: a hash
// whose TTL was removed (PERSIST, a restore from an RDB file, a bug), a
// hash that holds only dead buckets under a longer TTL, a live hash that
// has kept many dead buckets, keys of a layout or strategy this version
// does not read.
//
// # One pass
//
// A pass walks SCAN MATCH <prefix>:{* with a COUNT hint on every master of
// a *redis.ClusterClient and every shard of a *redis.Ring (or the one
// server of any other client), paced by a golang.org/x/time/rate budget of
// keys per second (WithRate, DefaultRate). Each key whose name key.Parse
// reads (either strategy, a single limit or one limit of a Set) is handed
// to one Lua script (scripts/clean.lua) that decides and acts atomically:
//
//   - no live bucket (now − newest ≥ W + B): the hash is UNLINKed;
//   - no TTL: it gets the one its newest bucket implies, newest + W + B −
//     now;
//   - more dead buckets than the threshold (WithTrimThreshold): they are
//     removed and the running totals rewritten exactly as the provider's
//     own expiry rewrites them, in steps that each cost Redis well under a
//     millisecond, however large the hash.
//
// Removing dead buckets and keeping the totals equal to what the remaining
// buckets hold changes nothing any decision computes, since the providers
// ignore dead buckets; and since each step is one script, a concurrent Inc
// sees it done or not done, never half done.
//
// A bucket is live while now − start < W + B, and every hash records its
// own W and B (its field "v"; a set's limit written before the record, its
// TTL span t), so the cleaner needs no window: cleanup.New(client) judges
// each hash by its record. A window given with WithWindow, WithSet or
// WithWindowFunc can only make it more careful: a hash is judged by the
// longer of its own W + B and the one given, so nothing a hash records as
// live is ever deleted or trimmed. A hash without a record (written before
// it) has an unknown window and is never deleted or trimmed; if it has no
// TTL it gets the longest one any configuration could need (2 × 31 days
// from its newest bucket). A dry run lists each hash it would delete with
// its recorded window and remaining TTL (Report.Deletions). Keys the
// cleaner does not read are reported by reason and left alone, unless
// WithDeleteUnknown names them. The clock is Redis TIME (WithClock for
// limiters given limiter.WithClock).
//
// # One cleaner at a time
//
// A pass holds a lease lock on <prefix>:cleanup:lock: SET NX PX with a
// random token, renewed every third of the lease (WithLease) and released
// by owner-checked scripts, so only the owner can extend or release it.
// A cleaner that loses its lease (paused longer than the lease, its lease
// taken over) stops at its next key and reports it (Report.LeaseLost,
// ErrLeaseLost). The lease makes passes exclusive, not each key: a cleaner
// frozen between its lease check and a key's script may run that one
// script after another cleaner took over, which is harmless, since every
// script is atomic and leaves a correct hash whatever ran before it.
//
// # Running it
//
// Run makes one pass now (operators, cron jobs, `sluice cleanup`). Start
// runs a background loop that takes the lease, makes a pass every
// WithPeriod and keeps the lease between passes, so that in a fleet where
// every instance calls Start one of them cleans and another takes over
// within about a lease when it stops. Stop waits for the pass in flight.
// docs/operations.md (Cleanup) says when to run it and what it costs.
package cleanup
