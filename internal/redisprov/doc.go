// Package redisprov is the Redis provider: the faces limiter/redisabs and
// limiter/redissup hold a Provider, and the hybrid provider holds its
// parts. It is a store (the scripts and the reading of their replies) with
// each mechanism a layer around it, each in its own files:
//
//   - the Redis store: redisx.go (the client, the clock argument, replies),
//     base.go (keys, hashes, script calls), layout.go (reply layouts),
//     store_set.go (the set scripts' arguments and replies), batch.go and
//     pipe.go (concurrent calls sharing round trips);
//   - hot-key relief, the refusal memory: relief.go, peeks.go;
//   - the failure policy: failover.go (the Guard), provider.go (its one
//     path for every call, single limits and sets alike), breaker.go (the
//     breaker proper, readable alone), evidence.go (what the wire says), deadline.go
//     (bounded calls on any client), dial.go (the dial hook and the probe's
//     client), fallback.go (the local fallback), writeback.go (its units
//     written back), grace.go, nodes.go (a guard per cluster master),
//     evict.go (the eviction-policy warning), observe.go and log.go
//     (the observer's events);
//   - the strategies: absolute.go and suppressed.go say what differs
//     (scripts, arguments, the reading of replies); redisprov.go and set.go
//     are the Provider's calls.
//
// # One Inc, from the top
//
// redisabs.Limiter.Inc calls Guard.Decide (provider.go) with the Provider
// as its Backend; Decide describes the call as an ask and takes it down
// decide, the path every decision call shares (on the healthy path it
// asks Redis without building the ask, and joins decide's tail, settle,
// for anything but a reply). On a cluster client the
// Guard first routes the call to the guard of the master that owns the
// key's slot (nodes.go). With an observer, the call is timed and reported
// (observe.go). While the breaker is open the policy answers at once
// (policy: fallback.go's in-process window, or FailOpen, FailClosed,
// FailError), marked Degraded. Else the call runs under the guard's
// deadline (deadline.go) as Backend.Decide:
// Provider.inc (redisprov.go) checks the key, the cost and the capacity,
// asks hot-key relief whether the key is a remembered refusal (an answer
// from memory returns ErrRemembered, which is not evidence about Redis),
// and otherwise runs the strategy's script through Base.Run, directly or
// in a batch (batch.go), and reads the reply into a window.Result
// (base.go). Back in the Guard, a reply closes the call (during the grace
// after an outage, grace.go adds the fallback's units); an error is judged
// (evidence.go): a connection error or a "cannot serve" reply opens the
// breaker (breaker.go) and the policy answers; a timeout is shed, and
// opens the breaker only when a confirming probe fails too. When the
// probe finds Redis back, the breaker closes and writeback.go writes the
// fallback's admissions to Redis.
//
// IncSet takes the same walk: DecideSet describes it as an ask on a set,
// and decide runs it on the set scripts (store_set.go, set.go); the
// fallback decides it with its own IncSet on the scaled set.
package redisprov
