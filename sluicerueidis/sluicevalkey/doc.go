// Package sluicevalkey lets sluice's Redis providers and its cleaner run
// on a valkey-go client (github.com/valkey-io/valkey-go, the fork of
// rueidis): New wraps a valkey.Client, standalone, sentinel or cluster,
// in a Client that redisabs.New, redissup.New, hybrid.NewAbsolute,
// hybrid.NewSuppressed and cleanup.New accept. The providers run the same
// scripts, with the same failure policy and timeouts, as on go-redis.
//
// It is the adapter of package sluicerueidis over valkey-go: the same
// translation of each call into one command (keys marked so that a
// cluster client routes it by slot) and of its reply into the go-redis
// command type the providers read, with a Redis error reply kept in the
// form go-redis gives it (redis.Error). Everything docs/rueidis.md says
// of rueidis (automatic pipelining, sluice's batching, retries, timeouts,
// dials) holds for valkey-go, whose client works the same way.
package sluicevalkey
