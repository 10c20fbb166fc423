// Package redissup is sluice's suppressed limiter on Redis: every process
// that shares a Redis (and a key prefix) shares each key's sliding window.
// Up to the key's rate every request is admitted; above it, requests are
// admitted with a probability that falls as the offered rate rises, so an
// overloaded key's accepted rate settles near the rate (a little above;
// Example_suppressedCurve shows how much), spread fairly over its callers,
// under a hard ceiling that no window ever exceeds.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", MaxRetries: -1}) // -1: never re-send an increment
//	l, err := redissup.New(client, limiter.WithWindow(time.Minute), limiter.WithHardLimitFactor(1.5))
//	...
//	d, err := l.Inc(ctx, "user:42", limiter.PerMinute(100), 1)
//	if !d.Allowed { /* refuse; d.SuppressionFactor says how hard the key is pushed back */ }
//
// Each call is one Lua script on the server that owns the key, with the
// decisions package local's suppressed limiter makes for the same random
// draw (limiter.WithRandom). The ceiling is H = floor(rate × W × F), F
// being WithHardLimitFactor's (default 1). Refused units are recorded too: they
// drive the suppression factor. Round trips, failover, the failure policy
// and go-redis' retries are as in package redisabs. Call Ping at start-up.
// docs/algorithms.md has the strategy and its formulas, docs/operations.md
// running it on Redis, docs/data-model.md the keys.
package redissup
