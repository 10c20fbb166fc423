// Package redissup is sluice's suppressed limiter on Redis: every process
// that shares a Redis (and a key prefix) shares each key's sliding window.
// Up to the key's rate every request is admitted; above it requests are
// admitted with a probability that falls as the offered rate rises, so that
// under a sustained overload the accepted rate settles near the target (a
// little above it: 6–9% at 2× to 16× overload, see Example_suppressedCurve)
// and is spread fairly over the callers; a hard ceiling bounds it.
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
// # Algorithm
//
// The strategy is the suppressed one of docs/algorithms.md, computed by the
// Lua script scripts/sup_inc.lua exactly as package internal/window computes
// it for the local provider (State.IncSuppressed). Time is Redis TIME in
// whole milliseconds. A key keeps buckets (start, observed, declined): a
// call joins the newest bucket when it comes less than B after that
// bucket's start and opens a bucket otherwise; a bucket is live while
// now − start < W + B, so each unit counts for at least W (docs/algorithms.md,
// The window guarantee). observed sums every unit offered to the live buckets,
// admitted or not, declined the refused ones, and accepted = observed −
// declined.
//
// With the soft capacity S = limiter.Capacity(rate, W) and the hard
// capacity H = limiter.HardCapacity(rate, W, F), Inc(n) computes
// forecast = accepted + n and decides:
//
//   - forecast ≤ S: Allowed, factor 0;
//   - forecast > H: Suppressed and refused, factor 1 (Never when n > H);
//   - otherwise Suppressed with factor f, admitted when the call's random
//     draw r satisfies r ≥ f, that is with probability 1 − f;
//
// and then records n as observed, and as declined when refused. The
// factor, from the state before the call, is
//
//	f = 1 − (S/W) / perceived,  perceived = max(observed/W, recent/R)
//
// with R = min(W, 1 s) and recent the units offered in the last R, clamped
// to [0, 1] and rounded to whole parts per million. Both Go and Lua compute
// it as 1 − S·R / max(observed·R, recent·W) in IEEE doubles, in that order,
// so both get the same bits. Under a steady offer of k times the rate, f
// settles near 1 − 1/k. The factor is cached in the key for the
// suppression cache period (WithSuppressionCache, default 100 ms; 0
// computes it on every call), judged by the script's clock.
//
// n = 0 is a peek: it decides for one unit and writes nothing. The soft and
// hard capacities of the latest Inc are stored in the key, and IsAllowed
// answers for one unit at them: allowed while accepted + 1 ≤ S, else
// Suppressed with the factor an Inc would apply now (without caching it).
// RetryAfter walks the live buckets oldest first until enough accepted
// units have expired for the request to fit under S (a bucket that started
// at s expires at s + W + B); ResetAfter is when the newest bucket expires.
//
// # Randomness
//
// The draw is made in Go, from WithRandom's source (math/rand/v2 by
// default), exactly once per Inc with valid arguments, peeks included, and
// before Redis is asked, so a call that fails still uses its draw. It
// crosses to Redis as an integer in parts per million
// (window.DrawPPM) and the factor comes back the same way; the scripts
// never call math.random. Two providers fed identically seeded sources and
// the same times therefore make the same decisions, which is how the tests
// check this package against the local one, and nothing depends on the
// server's random state or version (Redis 6.2 and later, and miniredis).
//
// # Keys
//
// The state of a key is one Redis hash, <prefix>:{<escaped key>}:sup:h:
// one field per bucket ("<start ms>" → observed), one per bucket with
// refusals ("d<start ms>" → declined), and two meta fields of packed
// decimals: "m", the running observed and declined totals, the oldest and
// newest bucket starts and the newest bucket's counts, and "k", the stored
// capacities and the cached factor with the time it was computed.
// docs/data-model.md describes them. The running totals make the common
// call one read and one write of "m", and each closed bucket's value links
// it to the next, so an expired bucket costs one more read to drop. A
// refusal's RetryAfter starts from a cursor kept at the end of "k" (the
// bucket where the last refusal's answer was found), so a key under
// sustained overload answers most refusals without reading a bucket; the
// script reads the whole hash, a cost proportional to W/B, only when the
// cursor is missing and the walk from the oldest bucket is long, or when
// W > 1 s and the factor needs the last second. A write that opens a
// bucket sets the hash's expiry to W + B (a join keeps the TTL set when
// its bucket opened, which ends when that bucket dies), so an idle key
// disappears by itself.
// Every offered unit is a write, refused ones too: their count drives the
// factor.
//
// Each call is one script call: Inc runs sup_inc.lua, IsAllowed
// sup_allowed.lua, Get sup_get.lua; Reset is one UNLINK. IsAllowed, Get and
// a peek write nothing, not even the deletion of dead buckets they see.
//
// # Sets of limits
//
// Limiter implements limiter.SetLimiter: IncSet decides a limiter.Set of
// up to eight limits on one key in one call of sup_set.lua, over one hash
// per limit, <prefix>:{<escaped key>}:sup:h:<name>, each laid out as the
// key's single hash and kept apart from it; all share the key's hash tag,
// so the call is atomic and runs on a Cluster. Each limit computes what an
// Inc of its own rate, window and bucket would (its soft and hard
// capacities, F applying to each, and its own cached factor); the set's
// factor is the largest, and the call's one draw is compared with it, so
// a call passes with the probability of the most suppressing limit. The
// offer is recorded in every limit, as declined in every limit when
// refused. IsAllowedSet is IncSet with n = 0 (it draws a number, as a
// peek does); GetSet runs sup_set_get.lua and ResetSet one UNLINK of the
// set's hashes. docs/algorithms.md, Sets of limits, has the rules.
//
// # Hot-key relief
//
// A refusal of one unit is remembered until its RetryAfter (for a factor
// below 1, or above a hard capacity over the soft one, one suppression
// cache period at most), and later one-unit Incs of the key at the same
// rate whose draw Redis would refuse are refused from memory while they
// would join the key's newest bucket. The units declined from memory are
// reported with the key's next Redis call. With the default hard-limit
// factor every decision is the one Redis would give; docs/algorithms.md,
// Hot-key relief, bounds the error otherwise. limiter.WithHotKeyRelief
// (false) turns it off.
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
// concurrent calls from any number of processes are serialised per key and
// no span of length W ever holds more than H accepted units, fleet-wide
// (every unit counts for at least W). The soft capacity S is where the
// accepted rate settles under overload, not a bound on a window. The clock
// is that server's TIME, so the clocks of the calling machines do not matter. Keys
// are independent: in a Redis Cluster each key's hash tag puts its state in
// one slot.
//
// Redis replication is asynchronous and sluice does not call WAIT: after a
// failover the new master may have missed the latest increments. An
// evicted key starts again from empty; prefer maxmemory-policy noeviction,
// under which a full Redis makes Inc fail instead of forgetting.
//
// WithClock replaces Redis TIME by the given clock. It is meant for tests
// and simulations: decisions follow that clock, but Redis still counts TTLs
// in its own time, so writes then set W + B plus one minute of slack, lest a
// fake clock that stands still lose state it still calls live.
//
// # Failure modes
//
// A refused request is a Decision; an error means Redis could not be asked
// or answered badly. Errors are wrapped with the package and operation
// ("redissup: inc: …"), and bad input returns the same sentinel errors as
// package local (key.ErrInvalid, limiter.ErrInvalidCost,
// limiter.ErrInvalidRate, limiter.ErrCapacityTooSmall, limiter.ErrClosed)
// before any call to Redis and before any draw. What to do when Redis
// fails is the caller's choice; this package never guesses.
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
