// Package redissup is sluice's suppressed limiter on Redis, sharing each
// key's sliding window as package redisabs does. Up to the key's rate every
// request is admitted; above it, with a probability that falls as the
// offered rate rises, so an overloaded key's accepted rate settles near the
// rate (Example_suppressedCurve shows how near), under a hard ceiling
// H = floor(rate × W × F) (limiter.WithHardLimitFactor) that no window
// exceeds. Refused units are recorded too: they drive the factor.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", MaxRetries: -1})
//	l, err := redissup.New(client, limiter.WithHardLimitFactor(1.5))
//	...
//	d, err := l.Inc(ctx, "user:42", limiter.PerMinute(100), 1)
//
// Decisions are package local's for the same draw (limiter.WithRandom);
// round trips, failover and the failure policy are as in redisabs.
// docs/algorithms.md has the formulas.
package redissup
