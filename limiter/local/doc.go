// Package local is sluice's in-process rate limiting: the absolute and
// suppressed strategies over a sliding window, each key's state in this
// process's memory. It needs no server and returns the decisions the Redis
// providers (redisabs, redissup) return for the same calls at the same
// times; errors are bad input, and ErrClosed after Close.
//
//	l, err := local.NewAbsolute(limiter.WithWindow(time.Minute))
//	if err != nil { ... }
//	defer l.Close(ctx)
//	d, err := l.Inc(ctx, "user:42", limiter.PerMinute(100), 1)
//	if !d.Allowed { /* refuse; d.RetryAfter says when to come back */ }
//
// Each process enforces its own capacity, so N instances admit up to N
// times the rate; share a Redis (redisabs, redissup or hybrid) for one
// window per key across a fleet. A background goroutine, stopped by Close,
// drops idle keys. docs/algorithms.md describes the strategies.
package local
