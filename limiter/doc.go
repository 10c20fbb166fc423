// Package limiter holds what every sluice provider shares: Rate, Limit and
// Set, the options, the Decision a call returns, the Limiter and SetLimiter
// interfaces and the sentinel errors. A limiter admits at most
// rate × window units per key in any span of the window (a sliding window).
//
//	l, err := local.NewAbsolute(limiter.WithWindow(time.Minute))
//	...
//	d, err := l.Inc(ctx, "user:42", limiter.PerMinute(100), 1)
//	if err != nil { ... }   // bad input, or a backend that could not answer
//	if !d.Allowed { ... }   // refuse; d.RetryAfter says when it would fit
//
// The providers live in sub-packages, take the same options and, fed the
// same calls at the same times, return the same decisions:
//
//   - local: in one process, no network call, nothing shared.
//   - redisabs: on Redis, shared by every process; no window ever admits
//     more than its capacity, fleet-wide. One round trip per call.
//   - redissup: on Redis, the suppressed strategy: above the rate it admits
//     with a falling probability, under a hard ceiling.
//   - hybrid: leases units from Redis and decides from memory, for hot
//     keys; the fleet-wide bound holds, at the price of some under-admission.
//
// The rate is an argument of every call, so one limiter serves every tier;
// the window is the limiter's (WithWindow, default one minute). A Set
// decides several limits on one key as one; Wait sleeps until a call fits;
// ParseRate reads "100/s" or "3/10s". While Redis cannot answer, the Redis
// providers follow WithFailurePolicy (default: a local limiter answers,
// with Decision.Degraded set). docs/algorithms.md describes the strategies
// and their guarantees, docs/operations.md running them on Redis.
package limiter
