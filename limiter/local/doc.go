// Package local is sluice's in-process rate limiting: the absolute and
// suppressed strategies over a sliding window, with each key's state in
// this process's memory. It needs no server, and fed the same calls at the
// same times it returns the decisions the Redis providers (packages
// redisabs and redissup) return.
//
//	l, err := local.NewAbsolute(limiter.WithWindow(time.Minute))
//	if err != nil { ... }
//	defer l.Close(ctx)
//	d, err := l.Inc(ctx, "user:42", limiter.PerMinute(100), 1)
//	if err != nil { /* bad input (key, rate, cost) or a closed limiter */ }
//	if !d.Allowed { /* refuse; d.RetryAfter says when to come back */ }
//
// # Algorithm
//
// Both strategies keep, per key, buckets (start, count): a call joins the
// newest bucket when it comes less than B after that bucket's start and
// opens a bucket otherwise. A bucket is live while now − start < W + B, so
// every unit counts for at least W and at most W + B, and no span of length
// W ever holds more than the capacity C = limiter.Capacity(rate, W)
// (docs/algorithms.md, The window guarantee).
//
// Absolute admits a call when the live units plus n fit in C, and records
// it; otherwise it records nothing (all or nothing). A call with n > C is
// refused with Decision.Never set; n = 0 is a peek for one unit that
// records nothing. RetryAfter is exact: the time until enough of the oldest
// buckets have expired for n to fit.
//
// Suppressed admits everything up to the soft capacity S = C; above it, it
// admits with a probability that falls as the offered traffic rises, and
// never beyond the hard capacity H = limiter.HardCapacity(rate, W, F)
// (WithHardLimitFactor). Each Inc draws one number from the random source
// of WithRandom (the default source, whose draws nobody can observe, is
// drawn only when a factor decides the call); the factor is recomputed at most every WithSuppressionCache.
// docs/algorithms.md gives the formulas.
//
// # Time
//
// The clock is the wall clock, read once at start and advanced by the
// monotonic clock, so it never steps back when the system clock is set;
// WithClock replaces it (tests and simulations). Nothing in this package
// reads a package-global clock.
//
// # Consistency and scope
//
// Decisions are exact within one process: every call on a key takes that
// key's lock, and calls on different keys share no lock. Each instance of
// a service enforces its own capacity, so N instances with local limiters
// admit up to N × C per window together; share a Redis (packages redisabs
// and redissup) for one window per key across the fleet.
//
// # Memory and the sweep
//
// A key costs memory while it has a live bucket. A background goroutine,
// started by NewAbsolute or NewSuppressed and stopped by Close, drops every
// key whose newest bucket is dead, once per window but no more often than
// once a second and at least once a minute; under WithClock it keeps a key a minute longer,
// since a given clock may step back and bring buckets to life again. The
// sweep holds one key's lock at a time.
//
// # Failure modes
//
// There is no backend to fail. Errors are bad input (an invalid key, rate
// or cost, wrapped sentinels of package limiter) and ErrClosed after Close.
// A refused request is a Decision, not an error.
package local
