// Package hybrid is sluice's leased limiter: it answers from memory, at
// nearly the local provider's speed, and keeps each key's sliding window
// in Redis, so that the instances sharing a Redis and a prefix never admit
// more than the capacity (the hard capacity, for NewSuppressed) in any
// window between them.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", MaxRetries: -1})
//	l, err := hybrid.NewAbsolute(client, limiter.WithWindow(time.Minute))
//	...
//	defer l.Close(ctx) // gives back the units it holds
//	d, err := l.Inc(ctx, "user:42", limiter.PerMinute(100), 1)
//
// An Inc that finds no usable lease asks Redis, which decides it exactly
// as redisabs (or redissup) would and reserves a few more units: the
// lease. Later Incs take units from the lease in memory while its bucket
// is open; the background sync (WithSyncInterval) and Close give unused
// units back. The keys are redisabs' and redissup's, so hybrid and
// Redis-provider instances may share them.
//
// The trade-off: a hot key costs about one Redis call per lease instead of
// one per decision, at the price of some under-admission (leased units
// count against the other instances until given back or, after a crash,
// until their bucket dies). A key near its capacity, or called further
// apart than a lease lives, gets no lease: each call is the Redis
// provider's own, and such a key is not held in memory. At most MaxKeys
// keys are held in memory. While Redis is
// down a lease keeps serving, then the failure policy answers. Sets of
// limits (IncSet, GetSet, ResetSet) are not leased: every set call asks
// Redis, as redisabs does. docs/algorithms.md (Hybrid leases, Hybrid sets)
// has the protocol, the proof of the guarantee and its under-admission.
package hybrid
