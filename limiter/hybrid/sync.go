package hybrid

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/config"
	"github.com/sluice-go/sluice/internal/redisx"
)

// syncTimeout bounds one tick's Redis calls: the per-call timeout, or 1 s
// when calls are left to the caller's context (a tick has no caller).
func syncTimeout(cfg *config.Config) time.Duration {
	if t := cfg.Timeout; t > 0 {
		return t
	}
	return time.Second
}

// nextWant is the next lease's size after a lease of granted units of
// which used were used: a lease used up doubles it (the key is busier than
// its size; the tick's rate estimate alone would take many ticks to catch
// up with a closed loop of callers), one given back with units unused
// brings it down to twice what was used, at least 1; never above c nor
// most.
func nextWant(want, granted, used, c, most int64) int64 {
	if used >= granted {
		return min(2*max(want, granted), c, most)
	}
	return max(min(want, 2*used), 1)
}

// pipeliner is a client that can pipeline.
type pipeliner interface{ Pipeline() redis.Pipeliner }

// pipeCalls makes n calls of script, the sync's batch: in one pipeline
// when client can pipeline (a cluster client splits it per node), else one
// by one, and then once more the calls Redis did not find the script for,
// after loading it. call returns the i-th call's key and arguments (it is
// called again for a call sent twice); read gets each call's command once,
// when it is final (an error included), with the local ms at which its
// round was sent.
func pipeCalls(ctx context.Context, client redis.Scripter, script *redis.Script, now func() int64, n int,
	call func(i int) (string, []any), read func(i int, send int64, cmd *redis.Cmd)) {
	cmds := make([]*redis.Cmd, n)
	done := make([]bool, n)
	for round := 0; ; round++ {
		var pipe redis.Pipeliner
		sc := client
		if pl, ok := client.(pipeliner); ok {
			pipe = pl.Pipeline()
			sc = pipe
		}
		send := now()
		for i := range cmds {
			if done[i] {
				continue
			}
			k, args := call(i)
			if pipe == nil {
				cmds[i] = script.Run(ctx, sc, []string{k}, args...)
			} else {
				cmds[i] = script.EvalSha(ctx, sc, []string{k}, args...)
			}
		}
		if pipe != nil {
			pipe.Exec(ctx) // errors are read per command
		}
		last := round == 1 || ctx.Err() != nil
		missing := false
		for i, cmd := range cmds {
			if done[i] {
				continue
			}
			if !last && redisx.NoScript(cmd.Err()) {
				missing = true
				continue
			}
			read(i, send, cmd)
			done[i] = true
		}
		if !missing {
			return
		}
		script.Load(ctx, client)
	}
}
