// Package redissup is sluice's suppressed limiter on Redis: every process
// that shares a Redis (and a key prefix) shares each key's sliding window.
// Up to the key's rate every request is admitted; above it requests are
// admitted with a probability that falls as the offered rate rises, so that
// under a sustained overload the accepted rate settles near the target (a
// little above it; Example_suppressedCurve shows by how much) and is spread
// fairly over the callers; a hard ceiling bounds it.
//
//	client := redis.NewClient(&redis.Options{
//		Addr:                  "localhost:6379",
//		MaxRetries:            -1,   // never re-send an increment (see Failure modes)
//		ContextTimeoutEnabled: true, // let ctx deadlines bound every call
//	})
//	l, err := redissup.New(client, limiter.WithWindow(time.Minute), limiter.WithHardLimitFactor(1.5))
//	...
//	d, err := l.Inc(ctx, "user:42", limiter.PerMinute(100), 1)
//	if err != nil { /* Redis could not be asked: apply your failure policy */ }
//	if !d.Allowed { /* refuse; d.SuppressionFactor says how hard the key is pushed back */ }
//
// # How it decides
//
// The strategy is the suppressed one of docs/algorithms.md, computed by the
// Lua script scripts/sup_inc.lua exactly as package local computes it. With
// the soft capacity S = limiter.Capacity(rate, W) and the hard capacity
// H = limiter.HardCapacity(rate, W, F) (WithHardLimitFactor, default 1),
// a call of n units is admitted while the accepted units plus n stay at or
// below S; above H it is refused (Never when n > H); in between it is
// admitted with probability 1 − f, where the suppression factor f grows
// with the offered rate (about 1 − 1/k under k times the rate) and is
// cached for WithSuppressionCache (default 100 ms). Every offered unit is
// recorded, refused ones too: their count drives the factor. n = 0 is a
// peek that writes nothing.
//
// The random draw is made in Go (WithRandom), once per call, and crosses
// to Redis as an integer, so two providers fed the same seeded source and
// times make the same decisions; the scripts never call math.random.
//
// A key's state is one Redis hash, <prefix>:{<escaped key>}:sup:h, with an
// expiry, so an idle key disappears by itself (docs/data-model.md). A
// common call is one script run that reads and writes one field; a refusal
// may walk the key's buckets, at most W/B + 1 of them. Limiter implements
// limiter.SetLimiter (one hash per limit of the set, all under the key's
// hash tag; docs/algorithms.md, Sets of limits), and concurrent calls are
// sent together as pipelines (limiter.WithBatching, on by default).
//
// A key refused for one unit is remembered for a short while, and later
// one-unit calls at the same rate whose draw Redis would refuse are refused
// from memory; the units declined so go to Redis with the key's next call
// (limiter.WithHotKeyRelief, on by default; docs/algorithms.md, Hot-key
// relief, bounds the difference from asking Redis every time).
//
// # Consistency
//
// A script runs atomically on the Redis server that owns the key, so calls
// from any number of processes are serialised per key and no span of
// length W ever holds more than H accepted units, fleet-wide. The soft
// capacity S is where the accepted rate settles under overload, not a
// bound on a window. The clock is the server's TIME; WithClock replaces it
// for tests and simulations only (Redis still counts TTLs in its own
// time). Replication is asynchronous and sluice does not call WAIT: after a
// failover the new master may have missed the latest increments. An
// evicted key starts again from empty; prefer maxmemory-policy noeviction.
//
// # Failure modes
//
// A refused request is a Decision, not an error. Bad input returns the
// same sentinel errors as package local (key.ErrInvalid,
// limiter.ErrInvalidCost, limiter.ErrInvalidRate,
// limiter.ErrCapacityTooSmall, limiter.ErrClosed) before any call to
// Redis and before any draw, wrapped with the package and operation ("redissup: inc: …").
//
// When Redis cannot be asked (connection refused, a timeout, LOADING,
// OOM and the like), Inc, IsAllowed, IncSet and IsAllowedSet return no
// error by default: after at most WithTimeout (250 ms) the circuit breaker
// opens and a local limiter in the process answers (limiter.FallbackLocal),
// with Decision.Degraded set; when Redis answers again, what it admitted
// is written to Redis as accepted (even above H) before Redis decides
// again. Get, Reset,
// GetSet and ResetSet return an error wrapping limiter.ErrUnavailable
// meanwhile. Other Redis errors (a wrong password, a wrong-type key) come
// back as errors. The first failed call and each outage are logged through
// slog.Default() unless limiter.WithLogger says otherwise, and Ping checks
// the address at start-up. limiter.WithFailurePolicy chooses FailOpen,
// FailClosed or FailError instead (docs/operations.md, When Redis fails).
//
// This package never retries: a call that timed out may or may not have
// been counted. The one
// call sent twice is batching's on a cluster: a call whose pipeline reply
// says it did not run (MOVED, ASK, TRYAGAIN, CLUSTERDOWN) goes again
// through the cluster client, as an unbatched call would have gone. go-redis itself does retry: in v9.18, *redis.Client and
// *redis.Ring (MaxRetries, default 3) re-send an EVALSHA after a read or
// write timeout, an EOF on the connection, a pool timeout, and the errors
// LOADING, READONLY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, NOREPLICAS and "max
// number of clients"; *redis.ClusterClient does the same up to MaxRedirects
// (default 3), the knob that also follows MOVED and ASK. A cancelled or
// expired context is never retried. A re-sent Inc counts its units twice
// (twice observed, and twice accepted or declined), which only makes the
// key stricter, never lets more than H through. To rule it out set
// MaxRetries: -1 on a Client or Ring; on a ClusterClient MaxRedirects: -1
// does it too but also turns off MOVED/ASK handling during resharding.
//
// go-redis bounds socket reads by the context's deadline only when
// Options.ContextTimeoutEnabled is true; otherwise a frozen server holds a
// call for the client's ReadTimeout (3 s by default) whatever the ctx says.
//
// After a restart or SCRIPT FLUSH the first call gets NOSCRIPT and is sent
// again with EVAL (redis.Script.Run); the script had not run, so it counts
// once.
package redissup
