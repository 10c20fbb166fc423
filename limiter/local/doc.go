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
// NewAbsolute never admits more than the capacity in any span of the
// window; NewSuppressed admits up to the rate, then with a falling
// probability, under a hard ceiling (limiter.WithHardLimitFactor).
// Decisions are exact and cheap (a lock per key, no network), and there is
// nothing to fail: errors are bad input and ErrClosed after Close.
//
// The trade-off is scope: each process enforces its own capacity, so N
// instances admit up to N times the rate together; share a Redis (redisabs,
// redissup or hybrid) for one window per key across a fleet. A key costs
// memory while it has a live bucket; a background goroutine, stopped by
// Close, drops idle keys. The clock never steps back (WithClock replaces
// it in tests). docs/algorithms.md describes the strategies.
package local
