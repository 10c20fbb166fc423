// Package hybrid is sluice's leased limiter: it answers from memory, at
// nearly the local provider's speed, and keeps each key's sliding window
// in Redis, so that the instances sharing a Redis and a prefix never admit
// more than the capacity (the hard capacity, for the suppressed strategy:
// NewSuppressed) in any window between them.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", MaxRetries: -1})
//	l, err := hybrid.NewAbsolute(client, limiter.WithWindow(time.Minute))
//	...
//	defer l.Close(ctx) // gives back the units it holds
//	d, err := l.Inc(ctx, "user:42", limiter.PerMinute(100), 1)
//
// A call that finds no usable lease asks Redis, which decides its units
// exactly as redisabs (or redissup) would and reserves a few more: the
// lease. Later calls take units from the lease in memory while the bucket
// that holds them is open. Unused units go back by the background sync
// (WithSyncInterval) and by Close. The keys are redisabs' and redissup's,
// so hybrid and Redis-provider instances may share them.
//
// The trade-off: a hot key costs Redis about one call per lease instead of
// one per decision, at the price of some under-admission (units leased by
// one instance and unused count against the others until given back, or,
// after a crash, until their bucket dies). Near its capacity a key gets
// leases of one unit, so one Redis call per decision; WithMaxLease(1)
// makes that the rule. A key called further apart than a lease lives (B,
// or up to B + WithLeaseAhead for a slow key) takes none: each call is the
// Redis provider's own. A refusal from Redis is repeated from memory for a
// short while (hot-key relief). At most MaxKeys keys are held in memory
// (docs/benchmarks.md has their size); an Inc of another key is decided by
// Redis, as redisabs (redissup) decides it. A key leaves memory about a
// second after its latest call, later if its lease is yet to go back.
// While Redis is down a lease keeps serving, then the failure policy
// answers, as in redisabs.
// docs/algorithms.md (Hybrid leases) has the protocol, the proof of the
// guarantee, and where and by how much it under-admits.
//
// Sets of limits (limiter.SetLimiter) are not leased: IncSet, GetSet and
// ResetSet ask Redis on every call, as redisabs (or redissup) does, under
// the same failure policy. A set's limits have hashes of their own, apart
// from the key's single limit and its lease, so set decisions are exact (docs/algorithms.md, Hybrid sets).
package hybrid
