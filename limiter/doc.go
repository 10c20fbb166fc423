// Package limiter holds what every sluice provider shares: Rate, Limit and
// Set, the options, the Decision a call returns, the Limiter and SetLimiter
// interfaces and the sentinel errors. A limiter admits at most
// rate × window units per key in any span of the window, a sliding window
// counted in buckets.
//
//	l, err := local.NewAbsolute(limiter.WithWindow(time.Minute))
//	...
//	d, err := l.Inc(ctx, "user:42", limiter.PerMinute(100), 1)
//	if err != nil { ... }   // bad input, or a backend that could not answer
//	if !d.Allowed { ... }   // refuse; d.RetryAfter says when it would fit
//
// The providers live in sub-packages and take the same options; fed the
// same calls at the same times they return the same decisions:
//
//   - local: in one process, with no network call; nothing is shared
//     between processes.
//   - redisabs: on Redis, shared by every process that uses it; no window
//     ever admits more than its capacity, fleet-wide. One round trip per
//     call.
//   - redissup: on Redis, the suppressed strategy: above the rate it admits
//     with a falling probability, so an overloaded key's accepted rate
//     settles near the rate and is spread fairly over its callers, under a
//     hard ceiling (WithHardLimitFactor).
//   - hybrid: leases units from Redis and decides from memory, for keys hot
//     enough that a round trip per call costs too much; the fleet-wide
//     bound holds, at the price of some under-admission.
//
// The rate is an argument of every call, so one limiter serves every tier;
// the window and bucket are the limiter's (WithWindow, default one minute;
// WithBucket, default window/100). A capacity below one unit is an error
// (ErrCapacityTooSmall), not a limiter that refuses everything. A unit
// counts for between W and W + B, so a saturated key admits a little less
// than the rate (at least C·W/(W + B)); a smaller bucket costs memory and
// Redis work. A Set decides several limits on one key as one ("10 per
// second and 20,000 per day"); Wait sleeps until a call fits; ParseRate
// reads rates such as "100/s" and "3/10s".
//
// When Redis cannot answer, the Redis providers and the hybrid follow a
// failure policy (WithFailurePolicy; default FallbackLocal: a local
// limiter answers, Inc returns no error, Decision.Degraded is set, and what
// it admitted is written to Redis when Redis is back). The first failure
// and each outage are logged through slog.Default() unless WithLogger says
// otherwise, and each Redis-backed provider has a Ping for a start-up
// check. WithObserver reports every decision and backend event.
// docs/algorithms.md describes the strategies and their guarantees,
// docs/operations.md running them on Redis, and docs/benchmarks.md what
// they cost.
package limiter
