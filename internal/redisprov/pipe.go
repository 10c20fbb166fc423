package redisprov

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// ScriptPipeliner is a non-go-redis client that pipelines script calls
// (the rueidis adapter): ScriptPipelined queues the calls fn makes, sends
// them in one round trip (per node) and fills every command with its
// reply or error before it returns the first error.
type ScriptPipeliner interface {
	ScriptPipelined(ctx context.Context, fn func(pipe redis.Scripter)) error
}

// Pipelined runs fn on a pipeline of client and sends it, when client can
// pipeline (a go-redis Pipeline or a ScriptPipeliner); read errors per
// command (err is the first). ok false: fn was not called.
func Pipelined(ctx context.Context, client any, fn func(pipe redis.Scripter)) (ok bool, err error) {
	switch c := client.(type) {
	case interface{ Pipeline() redis.Pipeliner }:
		pipe := c.Pipeline()
		fn(pipe)
		_, err = pipe.Exec(ctx)
		return true, err
	case ScriptPipeliner:
		return true, c.ScriptPipelined(ctx, fn)
	}
	return false, nil
}
