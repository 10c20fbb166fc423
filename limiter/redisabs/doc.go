// Package redisabs is sluice's absolute limiter on Redis: every process
// that shares a Redis (and a key prefix) shares each key's sliding window,
// and no window ever admits more than its capacity.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", MaxRetries: -1}) // -1: never re-send an increment
//	l, err := redisabs.New(client, limiter.WithWindow(time.Minute))
//	...
//	d, err := l.Inc(ctx, "user:42", limiter.PerMinute(100), 1)
//
// Each call is one Lua script on the server that owns the key, with the
// decisions package local would make, on the server's clock; an idle key
// expires by itself. The price is a round trip per decision (concurrent
// calls share pipelines: limiter.WithBatching), and a failover may forget
// the latest increments. While Redis cannot answer, the failure policy
// answers (limiter.WithFailurePolicy). Call Ping at start-up.
// docs/operations.md covers running it, docs/data-model.md the keys.
package redisabs
