// Package redisprov is the Redis provider: the faces limiter/redisabs and
// limiter/redissup hold a Provider, and the hybrid provider holds its
// parts. It is a store (the scripts and the reading of their replies) with
// each mechanism a layer around it:
//
//   - the Redis store: redisx.go (the client, the clock argument, replies),
//     base.go (keys, hashes, script calls), layout.go (reply layouts),
//     store_set.go (the set scripts' arguments and replies), batch.go and
//     pipe.go (concurrent calls sharing round trips);
//   - hot-key relief, the refusal memory: relief.go, peeks.go;
//   - the failure policy, a Guard per limiter: failover.go (the Guard),
//     provider.go (its one path for every call), evidence.go (what the
//     wire says, the probe), breaker.go (the breaker proper), deadline.go
//     (bounded calls), dial.go (the dial hook and the probe's client),
//     fallback.go (the policies' answers, the local fallback, the grace),
//     writeback.go, nodes.go (a guard per cluster master), observe.go
//     (the observer's events and the default log);
//   - the Provider's calls: redisprov.go (single limits) and set.go
//     (sets); the strategy is Base's sup flag, read where the scripts,
//     their arguments and the reading of their replies differ.
//
// # One Inc, from the top
//
// redisabs.Limiter.Inc calls Guard.Decide with the Provider as its
// Backend. On a cluster client the Guard first routes the call to the
// guard of the master that owns the key's slot. While the breaker is open
// the policy answers at once: the fallback's in-process window
// (FallbackLocal), FailOpen or FailClosed, marked Degraded, or FailError's
// ErrUnavailable. Else the call runs under the guard's deadline as
// Backend.Decide: Provider.Decide checks the key, the cost and the capacity,
// answers a remembered refusal from hot-key relief (ErrRemembered: no
// evidence about Redis), or runs the strategy's script through Base.Run,
// alone or in a batch, and reads the reply. Back in the Guard (settle), a reply
// stands (during the grace after an outage, charged to the fallback too);
// an error is judged: a connection error or a "cannot serve" reply opens
// the breaker and the policy answers; a timeout is shed, and opens the
// breaker only when a confirming probe fails too. The breaker's probe
// goroutine asks Redis every probe interval; when Redis answers, the
// fallback's admissions are written back and the breaker closes. With an
// observer, the Redis call is timed and the decision reported.
//
// IncSet takes the same walk (DecideSet) on the set scripts; the fallback
// decides it with its own IncSet on the scaled set.
package redisprov
