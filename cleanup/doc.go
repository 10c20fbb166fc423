// Package cleanup is the safety net beside sluice's Redis providers: it
// walks the keys limiters write under a prefix and reclaims what expiry
// missed, without ever losing a live count and without hogging Redis.
//
//	cl, err := cleanup.New(client, cleanup.WithPrefix("myapp"))
//	...
//	r, err := cl.Run(ctx) // one pass now; or cl.Start() … cl.Stop(ctx)
//
// Every limiter hash carries a TTL, so a healthy deployment needs no
// cleanup. A Cleaner finds what does not follow that rule (a hash whose
// TTL was removed, a restore from an old RDB file, dead buckets under a
// longer TTL) and hands each key to one atomic script: a dead hash is
// deleted, a live one without a TTL gets one, many dead buckets are
// trimmed. Every hash records its own window; a window given (WithWindow,
// WithSet) can only make the cleaner more careful. Keys it does not read
// are reported and left alone.
//
// A pass is paced by a budget of keys per second (WithRate), and one
// cleaner per prefix runs at a time, under a lease lock: in a fleet where
// every instance calls Start, one cleans and another takes over within
// about a lease. docs/operations.md (Cleanup) says when to run it and
// what it costs.
package cleanup
