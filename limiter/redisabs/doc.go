// Package redisabs is sluice's absolute limiter on Redis: every process
// that shares a Redis (and a key prefix) shares each key's sliding window,
// and no window ever admits more than its capacity, however many processes
// ask at once.
//
//	client := redis.NewClient(&redis.Options{
//		Addr:                  "localhost:6379",
//		MaxRetries:            -1,   // never re-send an increment (see Failure modes)
//		ContextTimeoutEnabled: true, // let ctx deadlines bound every call
//	})
//	l, err := redisabs.New(client, limiter.WithWindow(time.Minute))
//	...
//	d, err := l.Inc(ctx, "user:42", limiter.PerMinute(100), 1)
//	if err != nil { /* Redis could not be asked: apply your failure policy */ }
//	if !d.Allowed { /* refuse; d.RetryAfter says when to come back */ }
//
// # How it counts
//
// The strategy is the absolute one of docs/algorithms.md, computed by the
// Lua script scripts/abs_inc.lua exactly as package local computes it, so
// both return the same decisions for the same calls and times. Inc(n)
// admits when the live window has room for all n units (C =
// limiter.Capacity(rate, W)) and records them, or records nothing; n > C
// is refused with Never set, and n = 0 is a peek that writes nothing.
// RetryAfter is exact: how long until the request would fit with no new
// traffic. The clock is the Redis server's TIME, so the calling machines'
// clocks do not matter.
//
// A key's state is one Redis hash, <prefix>:{<escaped key>}:abs:h, with an
// expiry, so an idle key disappears by itself; docs/data-model.md
// describes its fields. A common call is one script run that reads and
// writes one field; the worst case reads each of the key's W/B + 1
// buckets once. Concurrent calls are sent together as pipelines
// (limiter.WithBatching, on by default).
//
// A key refused for one unit is remembered until its RetryAfter, and later
// one-unit calls at the same rate are refused from memory with the decision
// Redis would give, so a key hammered past its limit costs Redis about one
// call each time its refusal expires (limiter.WithHotKeyRelief, on by
// default; docs/algorithms.md, Hot-key relief).
//
// # Consistency
//
// A script runs atomically on the Redis server that owns the key, so calls
// from any number of processes are serialised per key: no span of length W
// holds more than C admitted units, fleet-wide, and a saturated key admits
// at least C·W/(W + B) per W. In a Redis Cluster, each key's hash tag puts
// its state in one slot. Replication is asynchronous and sluice does not
// call WAIT: after a failover the new master may have missed the latest
// increments and admit them again. An evicted key starts again from empty;
// prefer maxmemory-policy noeviction (docs/operations.md).
//
// # Failure modes
//
// A refused request is a Decision, not an error. Bad input returns the
// same sentinel errors as package local (key.ErrInvalid,
// limiter.ErrInvalidCost, limiter.ErrInvalidRate,
// limiter.ErrCapacityTooSmall, limiter.ErrClosed) before any call to
// Redis, wrapped with the package and operation ("redisabs: inc: …").
//
// When Redis cannot be asked (connection refused, a timeout, LOADING,
// OOM and the like), Inc, IsAllowed, IncSet and IsAllowedSet return no
// error by default: after at most WithTimeout (250 ms) the circuit breaker
// opens and a local limiter in the process answers (limiter.FallbackLocal),
// with Decision.Degraded set; when Redis answers again, what it admitted
// is written to Redis as admitted before Redis decides again. Get, Reset,
// GetSet and ResetSet return an error wrapping limiter.ErrUnavailable
// meanwhile. Other Redis errors (a wrong password, a wrong-type key) come
// back as errors. The first failed call and each outage are logged through
// slog.Default() unless limiter.WithLogger says otherwise, and Ping checks
// the address at start-up. limiter.WithFailurePolicy chooses FailOpen,
// FailClosed or FailError instead (docs/operations.md, When Redis fails).
//
// This package never retries. A call that timed out may or may not have
// been counted, and sending it again could count it twice. The one
// call sent twice is batching's on a cluster: a call whose pipeline reply
// says it did not run (MOVED, ASK, TRYAGAIN, CLUSTERDOWN) goes again
// through the cluster client, as an unbatched call would have gone. go-redis itself
// does retry: in v9.18, *redis.Client (MaxRetries, default 3) and
// *redis.Ring (MaxRetries, default 3) re-send an EVALSHA after a read or
// write timeout, an EOF on the connection, a pool timeout, and the errors
// LOADING, READONLY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, NOREPLICAS and "max
// number of clients"; *redis.ClusterClient does the same up to
// MaxRedirects (default 3), the knob that also follows MOVED and ASK. A
// context that is cancelled or past its deadline is never retried. A
// re-sent increment can only make the limiter stricter (a unit counted
// twice), never let more than C through; to rule it out set MaxRetries: -1
// on a Client or Ring. On a ClusterClient, MaxRedirects: -1 rules it out
// too but also turns off MOVED/ASK handling during resharding.
//
// go-redis bounds socket reads by the context's deadline only when
// Options.ContextTimeoutEnabled is true; otherwise a frozen server holds a
// call for the client's ReadTimeout (3 s by default) whatever the ctx says.
// A stopped server fails a call as fast as the dial fails.
//
// After a restart or SCRIPT FLUSH the first call gets NOSCRIPT and is sent
// again with EVAL (redis.Script.Run); the script had not run, so it counts
// once.
//
// Redis 6.2 and later are supported (and miniredis, for tests). Scripts
// take integer arguments only and never call math.random.
package redisabs
