package sluicevalkey

import (
	"github.com/valkey-io/valkey-go"

	"github.com/sluice-go/sluice/sluicerueidis/internal/adapter"
)

// Client is a valkey.Client seen through the narrow go-redis interfaces
// that sluice's Redis providers and its cleaner take: build it with New
// and pass it to redisabs.New, redissup.New, hybrid.NewAbsolute,
// hybrid.NewSuppressed or cleanup.New. It has the methods of
// sluicerueidis.Client, sent as valkey-go commands: go-redis' namesakes
// (Eval, EvalSha, EvalRO, EvalShaRO, ScriptLoad, ScriptExists, Unlink,
// SetNX, PTTL, Scan, HScan) with go-redis' signatures and command types,
// and ScriptPipelined, ForEachNode, Addr and ContextTimeouts (false: the
// providers' per-call timeout bounds every call). A reply error is a
// *ReplyError (a redis.Error wrapping the *valkey.ValkeyError); a nil
// reply is redis.Nil; any other error (connection, context) is
// valkey-go's as it is. No command is retried, by the adapter or by
// valkey-go (which retries read-only commands only).
//
// A Client is safe for concurrent use. It holds no connection of its own:
// the valkey-go client belongs to the caller, who closes it after the
// limiters and cleaners built on it. The zero value is not usable.
type Client struct {
	*adapter.Client
	vc valkey.Client
}

// ReplyError is a Redis error reply, as go-redis reads one (a
// redis.Error): its Unwrap returns the *valkey.ValkeyError.
type ReplyError = adapter.ReplyError

// New returns the adapter of c, standalone, sentinel or cluster; nil for
// a nil c, which the providers' constructors refuse
// (limiter.ErrInvalidConfig).
func New(c valkey.Client) *Client {
	if c == nil {
		return nil
	}
	return &Client{adapter.New(valkeyLib.Driver(c)), c}
}

// Valkey returns the valkey-go client the adapter sends through.
func (a *Client) Valkey() valkey.Client { return a.vc }

// valkeyLib builds valkey-go commands from the adapter's, keys marked for
// the cluster client's routing.
var valkeyLib = &adapter.Lib[valkey.Client, valkey.Completed, valkey.ValkeyResult]{
	Cluster: func(c valkey.Client) bool { return c.Mode() == valkey.ClientModeCluster },
	Build: func(c valkey.Client, cmd adapter.Command) valkey.Completed {
		return c.B().Arbitrary(cmd.Name...).Keys(cmd.Keys...).Args(cmd.Args...).Build()
	},
}
