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
// # Algorithm
//
// The window is the absolute strategy's, in the hash redisabs uses
// (docs/data-model.md), so hybrid and redisabs instances may share keys.
// An Inc that finds no usable lease makes one call of scripts/abs_inc.lua,
// which decides for its n units exactly as redisabs would and, when it
// admits, reserves a few more units in the same bucket: the lease. Later
// calls take units from the lease in memory while the bucket that holds
// them is still open (less than B after its start), so every unit counts
// in Redis for at least W after it was admitted, as a Redis admission
// does, and no commit is ever needed for the window guarantee. A key
// called less often than a lease of B lives gets forward-dated leases
// (WithLeaseAhead): their units go into a bucket that starts up to D
// after now (min(W/20, 1 s) by default), so the lease serves up to
// D + B, still with no commit; the script uses less D as the key fills
// and none once the grant leaves a quarter of the capacity or less. Unused
// units are given back to their bucket: by the next lease request of the
// key, or by the background sync (every WithSyncInterval, default 50 ms),
// which also renews the expiring leases of busy keys in pipelined batches,
// and by Close. Lease sizes follow each key's local rate; near its
// capacity a key gets leases of one unit, then one Redis call per
// decision. The suppressed hybrid (NewSuppressed) leases accepted units
// the same way, forward-dated leases included (its D shrinks with the
// soft capacity), and a key whose calls come further apart than a lease
// lives, or that it has no history of, takes no lease: one call per
// decision, as redissup. A refusal asks Redis once and is repeated from memory, for the
// same n, until the RetryAfter Redis gave has passed or for the longer of
// the sync interval and B, while the breaker is closed: hot-key relief,
// the Redis providers' mechanism (docs/algorithms.md, Hot-key relief).
// docs/algorithms.md, "Hybrid leases", has the protocol, the proof of the
// guarantee, and where and by how much it under-admits.
//
// # Decisions
//
// Admissions and refusals are never looser than redisabs'. Remaining and
// ResetAfter of an answer from memory date from the latest Redis reply;
// Get counts other instances' unused leases as used; a cached refusal's
// RetryAfter may be longer than needed when another instance gives units
// back. WithMaxLease(1) makes every admission a Redis decision.
//
// # Failure modes
//
// The failure policy is redisabs' (limiter.WithFailurePolicy, WithTimeout
// and the breaker; docs/operations.md, When Redis fails): a lease keeps
// serving while its bucket is open and it has units, whatever Redis'
// state, and then the policy answers — by default a local limiter in the
// process, with Degraded set and no error; its admissions are written to
// Redis as admitted when Redis answers again. Get and Reset return an
// error wrapping limiter.ErrUnavailable meanwhile. The first failed call
// and each outage are logged through slog.Default() unless
// limiter.WithLogger says otherwise; Ping checks the address at start-up. Units an instance leased and never
// gave back (a crash, a lost connection) stay counted until their bucket
// dies, at most W + B + D after the grant: the fleet admits less
// meanwhile, never more.
//
// # Concurrency
//
// An Absolute or a Suppressed is safe for concurrent use: one mutex per
// key guards its lease, and one Redis call per key is in flight at a time.
// Its sync goroutine runs from NewAbsolute (NewSuppressed) to Close.
//
// # The suppressed strategy
//
// NewSuppressed keeps each key in the hash redissup uses, so hybrid and
// redissup instances may share keys. Its leases are accepted units,
// reserved in Redis against the hard capacity H as the absolute leases are
// against C, so no span of W ever holds more than H accepted units across
// the fleet. Each Inc draws once from the random source (WithRandom) and,
// while the key's lease is open and has the units, decides in memory:
// below the soft capacity S it admits, above it admits with probability
// 1 − f, f computed from the fleet's accepted and observed units that
// Redis gave with the latest lease or sync (refreshed every
// WithSyncInterval for every key in use), with this instance's declines
// since added; those declines go to Redis with the key's next call, so
// every instance sees the fleet's rate. A lease request decides its n in
// Redis, exactly as redissup, and reserves the lease beside it, admitted
// or not. The soft target holds within the tolerance docs/algorithms.md
// gives (Hybrid leases, The suppressed hybrid), which also lists where
// its answers differ from redissup's.
package hybrid
