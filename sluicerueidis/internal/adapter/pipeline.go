package adapter

import (
	"context"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ScriptPipelined calls fn with a pipeline of script calls: each Eval or
// EvalSha that fn makes on pipe returns its command unanswered, and once
// fn returns they are all sent with one DoMulti (one round trip
// per node: a cluster client splits it by slot) and each command is
// filled with its reply or its error. It returns the first error among
// them. The failure policy's write-back and the hybrid provider's
// background sync send their batches through it. pipe is for fn's
// goroutine and for the duration of fn.
func (a *Client) ScriptPipelined(ctx context.Context, fn func(pipe redis.Scripter)) error {
	p := &pipeline{a: a}
	p.evals = evals{send: p.queue}
	fn(p)
	return p.exec(ctx)
}

// pipeline queues script calls for one DoMulti.
type pipeline struct {
	evals // queued, by queue
	a     *Client

	mu     sync.Mutex
	cmds   []*redis.Cmd
	queued []Command
}

func (p *pipeline) queue(ctx context.Context, name, first string, keys []string, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, cmdArgs(name, first, keys, args)...)
	c, err := command([]string{name, first, strconv.Itoa(len(keys))}, keys, args)
	if err != nil {
		cmd.SetErr(err)
		return cmd
	}
	p.mu.Lock()
	p.cmds = append(p.cmds, cmd)
	p.queued = append(p.queued, c)
	p.mu.Unlock()
	return cmd
}

// ScriptExists and ScriptLoad are not queued: they run at once on the
// client (on every node).
func (p *pipeline) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return p.a.ScriptExists(ctx, hashes...)
}

func (p *pipeline) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	return p.a.ScriptLoad(ctx, script)
}

// exec sends the queued calls in one DoMulti and fills their commands.
func (p *pipeline) exec(ctx context.Context) error {
	p.mu.Lock()
	cmds, queued := p.cmds, p.queued
	p.cmds, p.queued = nil, nil
	p.mu.Unlock()
	if len(cmds) == 0 {
		return nil
	}
	var first error
	for i, r := range p.a.d.DoMulti(ctx, queued) {
		v, err := reply(r)
		if err != nil {
			cmds[i].SetErr(err)
			if first == nil {
				first = err
			}
		} else {
			cmds[i].SetVal(v)
		}
	}
	return first
}
