package sluicerueidis

import (
	"github.com/redis/rueidis"

	"github.com/sluice-go/sluice/sluicerueidis/internal/adapter"
)

// Client is a rueidis.Client seen through the narrow go-redis interfaces
// that sluice's Redis providers and its cleaner take: build it with New
// and pass it to redisabs.New, redissup.New, hybrid.NewAbsolute,
// hybrid.NewSuppressed or cleanup.New. Its methods are the go-redis
// namesakes the providers and the cleaner call (Eval, EvalSha, EvalRO,
// EvalShaRO, ScriptLoad, ScriptExists, Unlink, SetNX, PTTL, Scan, HScan),
// with go-redis' signatures, and ScriptPipelined, ForEachNode, Addr and
// ContextTimeouts; each sends one rueidis command, with its keys marked
// so that a cluster client routes it by slot, and returns the reply in
// the go-redis command type. A reply error is a *ReplyError (a
// redis.Error wrapping the *rueidis.RedisError); a nil reply is
// redis.Nil; any other error (connection, context) is rueidis' as it is.
//
// No command is retried by the adapter, and none it sends is one rueidis
// retries (it retries read-only commands only): a script call that timed
// out may have counted, and sluice never sends it again. The providers'
// per-call timeout (limiter.WithTimeout) bounds every call: ContextTimeouts
// reports false.
//
// A Client is safe for concurrent use. It holds no connection of its own:
// the rueidis client belongs to the caller, who closes it after the
// limiters and cleaners built on it. The zero value is not usable.
type Client struct {
	*adapter.Client
	c rueidis.Client
}

// ReplyError is a Redis error reply, as go-redis reads one (a
// redis.Error): its Unwrap returns the *rueidis.RedisError.
type ReplyError = adapter.ReplyError

// rueidisLib is how the adapter builds and routes rueidis commands.
var rueidisLib = &adapter.Lib[rueidis.Client, rueidis.Completed, rueidis.RedisResult]{
	Build: func(c rueidis.Client, cmd adapter.Command) rueidis.Completed {
		return c.B().Arbitrary(cmd.Name...).Keys(cmd.Keys...).Args(cmd.Args...).Build()
	},
	Cluster: func(c rueidis.Client) bool { return c.Mode() == rueidis.ClientModeCluster },
}

// New returns the adapter of c, standalone, sentinel or cluster. A nil c
// returns nil, which the providers' constructors refuse
// (limiter.ErrInvalidConfig).
func New(c rueidis.Client) *Client {
	if c == nil {
		return nil
	}
	return &Client{Client: adapter.New(rueidisLib.Driver(c)), c: c}
}

// Rueidis returns the rueidis client the adapter sends through.
func (a *Client) Rueidis() rueidis.Client { return a.c }
