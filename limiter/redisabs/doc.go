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
// # Algorithm
//
// The strategy is the absolute one of docs/algorithms.md, computed by the
// Lua script scripts/abs_inc.lua exactly as package internal/window
// computes it for the local provider. Time is Redis TIME in whole milliseconds. A key keeps
// buckets (start, count); a call joins the newest bucket when it comes less
// than B after that bucket's start and opens a bucket otherwise. A bucket
// is live while now − start < W + B: its units arrived within B of its
// start, so each counts for at least W, and no span of length W ever holds
// more than C admitted units (docs/algorithms.md, The window guarantee).
// Inc(n) admits when used + n ≤ C, where
// used sums the live buckets and C = limiter.Capacity(rate, W), and then
// records n; otherwise it records nothing (all or nothing). n > C is
// refused with Never set. n = 0 is a peek for one unit that writes nothing.
// The capacity of the latest Inc is stored in the key, refusals included,
// and IsAllowed answers for one unit at that stored capacity. RetryAfter
// walks the live buckets oldest first until enough of them have expired
// (a bucket that started at s expires at s + W + B); ResetAfter is when the
// newest bucket expires.
//
// The state of a key is one Redis hash, <prefix>:{<escaped key>}:abs:h,
// holding one field per closed bucket and one meta field, "m", with the
// stored capacity, the running total, the oldest and newest bucket starts
// and the newest bucket's count; docs/data-model.md describes it field by
// field. The running total makes the common call O(1): the script reads
// the meta field and writes it back (with the closed bucket when a new one
// opens). Each closed bucket's value links it to the
// next, so a bucket that has expired costs one more read to drop, however
// many buckets the key holds; the whole hash is read only for a RetryAfter
// that the oldest bucket cannot answer, or for data an earlier layout
// wrote. A write that opens a bucket sets the hash's expiry to W + B, which
// ends when that newest bucket dies, so an idle key disappears by itself
// (docs/data-model.md, Expiry).
//
// Each call is one script call: Inc and IsAllowed run abs_inc.lua, Get runs
// abs_get.lua, Reset is one UNLINK. IsAllowed, Get and a peek write
// nothing, not even the deletion of dead buckets they see.
//
// # Hot-key relief
//
// A refusal of one unit is remembered until its RetryAfter, and later
// one-unit Incs of the key at the same rate are refused from memory with
// the decision Redis would give, so a key hammered past its limit costs
// Redis about one call each time its refusal expires, plus its admissions.
// Relief never admits, answers only while the breaker is closed, and is
// forgotten on Reset through this limiter; it may refuse a little longer
// than needed when another instance resets the key or a hybrid instance
// gives back a lease. Identical concurrent IsAllowed calls on one key share
// one round trip. limiter.WithHotKeyRelief(false) turns it off
// (docs/algorithms.md, Hot-key relief).
//
// # Batching
//
// With limiter.WithBatching(n) (default 128; see there for why it is on),
// up to 8 calls of this limiter in progress to one Redis node are each sent
// at once, alone, as without batching: there is no timer, and a few callers
// pay nothing (two atomic additions). Above 8, calls that arrive while two
// round trips of this limiter to the node are in flight are sent together,
// as one pipeline of at most n EVALSHA, when one of them ends; a call that
// finds fewer in flight is sent at once, alone. Each call keeps its own
// context and timeout: a
// caller whose context ends while it waits returns the context's error at
// once, and its call is not sent if it was not yet taken into a pipeline.
// NOSCRIPT inside a pipeline sends those calls again as EVAL; on a
// *redis.ClusterClient the pipelines go per master, and a call answered
// MOVED, ASK, TRYAGAIN or CLUSTERDOWN (it did not run) is sent again alone
// through the cluster client. A *redis.Ring, or any other client, sends
// every call alone. Batching changes the round trips only: each call is
// still one atomic script run, and Consistency below holds unchanged.
// docs/operations.md (Batching) has the details, docs/benchmarks.md the
// figures.
//
// # Consistency
//
// A script runs atomically on the Redis server that owns the key, so
// concurrent calls from any number of processes are serialised per key: no
// span of length W holds more than C admitted units, fleet-wide, and a
// saturated key admits at least C·W/(W + B) per W on average. The clock is that
// server's TIME, so the clocks of the calling machines do not matter. If
// the server's clock steps backwards, calls join the newest bucket and
// RetryAfter may exceed W + B for a while; if it steps forwards, buckets expire
// early. Keys are independent: in a Redis Cluster each key's hash tag puts
// its state in one slot, and different keys may live on different shards.
//
// Redis replication is asynchronous and sluice does not call WAIT: after a
// failover the new master may have missed the latest increments and admit
// them again. An evicted key (maxmemory with an allkeys-* or volatile-*
// policy; sluice's keys always have a TTL) starts again from empty. Prefer
// maxmemory-policy noeviction, under which a full Redis makes Inc fail with
// an error instead of forgetting.
//
// # Failure modes
//
// A refused request is a Decision; an error means Redis could not be asked
// or answered badly. Errors are wrapped with the package and operation
// ("redisabs: inc: …"), and bad input returns the same sentinel errors as
// package local (key.ErrInvalid, limiter.ErrInvalidCost,
// limiter.ErrInvalidRate, limiter.ErrCapacityTooSmall, limiter.ErrClosed)
// before any call to Redis. What to do when Redis fails — allow, refuse or
// fall back to a local limiter — is the caller's choice; this package never
// guesses.
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
