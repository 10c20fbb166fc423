// Package limiter holds what every sluice provider shares: Rate, Limit and
// Set, the options, the Decision a call returns, the Limiter and SetLimiter
// interfaces, the Observer and the sentinel errors. A limiter admits at
// most rate × window units per key in any span of the window.
//
//	l, err := local.NewAbsolute(limiter.WithWindow(time.Minute))
//	...
//	d, err := l.Inc(ctx, "user:42", limiter.PerMinute(100), 1)
//	if err != nil { ... }   // bad input, or a backend that could not answer
//	if !d.Allowed { ... }   // refuse; d.RetryAfter says when it would fit
//
// The providers, in sub-packages, take the same options and return the
// same decisions for the same calls at the same times: local (in one
// process), redisabs (on Redis, shared by a fleet, never above the
// capacity), redissup (the suppressed strategy on Redis: above the rate,
// admission falls with the load, under a hard ceiling) and hybrid (units
// leased from Redis, decided from memory, for hot keys).
//
// The rate is an argument of every call; the window is the limiter's
// (WithWindow). While Redis cannot answer, the Redis providers follow
// WithFailurePolicy. docs/algorithms.md describes the strategies and their
// guarantees, docs/operations.md running them on Redis.
package limiter
