// Package redisabs is sluice's absolute limiter on Redis: every process
// that shares a Redis (and a key prefix) shares each key's sliding window,
// and no window ever admits more than its capacity, however many processes
// ask at once.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", MaxRetries: -1}) // -1: never re-send an increment
//	l, err := redisabs.New(client, limiter.WithWindow(time.Minute))
//	...
//	d, err := l.Inc(ctx, "user:42", limiter.PerMinute(100), 1)
//	if !d.Allowed { /* refuse; d.RetryAfter says when to come back */ }
//
// Each call is one Lua script on the server that owns the key, so calls
// from every process are serialised per key, with the decisions package
// local would make; the clock is the server's TIME, and an idle key leaves
// Redis by itself. The price is a round trip per decision (concurrent
// calls share pipelines, limiter.WithBatching), and counts that last as
// long as Redis keeps them: a failover may forget the latest increments.
//
// While Redis cannot answer, Inc returns no error by default: after at most
// limiter.WithTimeout a local limiter answers, with Decision.Degraded set
// (limiter.WithFailurePolicy). go-redis re-sends a timed-out call unless
// MaxRetries is -1, which may count a request twice. Call Ping at start-up.
// docs/algorithms.md has the strategy and its guarantee, docs/operations.md
// running it on Redis, docs/data-model.md the keys.
package redisabs
