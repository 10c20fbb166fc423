package redisprov

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// ScriptPipeliner is a client that is not go-redis' but can pipeline
// script calls (the rueidis adapter, module sluicerueidis):
// ScriptPipelined calls fn with a Scripter on which each call is queued
// (its command returned at once, unanswered), then sends them all in one
// round trip (one per node of a cluster) and fills every command with its
// reply or its error before it returns. Its error is the first of the
// commands'.
type ScriptPipeliner interface {
	ScriptPipelined(ctx context.Context, fn func(pipe redis.Scripter)) error
}

// Pipelined runs fn on a pipeline of client and sends it, when client can
// pipeline (a go-redis client's Pipeline, or a ScriptPipeliner); the
// commands fn queued then hold their replies, and their errors are read
// per command (err is the first of them, or the pipeline's own). It
// reports whether it could; when it could not, fn was not called.
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
