// Package sluicerueidis lets sluice's Redis providers and its cleaner run
// on a rueidis client (github.com/redis/rueidis) instead of go-redis:
// New wraps a rueidis.Client, standalone, sentinel or cluster, in a Client
// that redisabs.New, redissup.New, hybrid.NewAbsolute,
// hybrid.NewSuppressed and cleanup.New accept. The providers run the same
// scripts, with the same failure policy and timeouts, as on go-redis.
//
// The adapter translates each call into one rueidis command (keys marked
// so that a cluster client routes it by slot) and its reply into the
// go-redis command type the providers read; a Redis error reply keeps
// the form go-redis gives it (redis.Error), so that NOSCRIPT falls back to
// EVAL and the failure policy tells an outage (a refused connection,
// LOADING, BUSY, OOM) from bad input as it does on go-redis.
//
// Concurrent calls share round trips through rueidis' automatic
// pipelining, which writes the calls in flight together on one
// connection: keep it on. sluice's batching (limiter.WithBatching, on by
// default) also works on the adapter, sending the calls that queue beyond
// 8 in progress as one DoMulti; on rueidis it adds little, and costs
// nothing below that. docs/rueidis.md says how to set the client up, and
// docs/benchmarks.md compares the two clients.
//
// Package sluicevalkey, in this module, is the same adapter on a
// valkey-go client (github.com/valkey-io/valkey-go, rueidis' fork); each
// package compiles only its own library.
package sluicerueidis
