// Package cleanup is the safety net beside sluice's Redis providers: it
// walks the keys limiters write under a prefix and reclaims what expiry
// missed, without ever losing a live count and without hogging Redis.
//
//	cl, err := cleanup.New(client, cleanup.WithPrefix("myapp"))
//	...
//	r, err := cl.Run(ctx) // one pass now; or cl.Start() … cl.Stop(ctx)
//
// Every limiter hash carries a TTL and leaves Redis by itself, so a healthy
// deployment needs no cleanup. A Cleaner finds what does not follow that
// rule (a hash whose TTL was removed, a restore from an old RDB file, dead
// buckets under a longer TTL, keys of a layout this version does not read)
// and hands each key to one atomic script: a dead hash is deleted, a live
// one without a TTL gets the one its newest bucket implies, many dead
// buckets are trimmed. Every hash records its own window, so the cleaner
// needs none; a window given (WithWindow, WithSet) can only make it more
// careful. Keys it does not read are reported and left alone.
//
// The costs and limits: a pass is paced by a budget of keys per second
// (WithRate, DefaultRate), so a large prefix takes minutes; one cleaner
// per prefix runs at a time, under a lease lock (Run returns ErrLocked
// while another holds it), and in a fleet where every instance calls Start
// one cleans and another takes over within about a lease. WithDryRun
// reports what a pass would do. docs/operations.md (Cleanup) says when to
// run it, what a pass does and what it costs.
package cleanup
