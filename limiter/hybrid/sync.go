package hybrid

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sluice-go/sluice/internal/window"

	"github.com/sluice-go/sluice/internal/redisprov"

	"github.com/redis/go-redis/v9"
)

// takeFetch waits for a key's fetch token (fetch), and re-checks after the
// wait: it returns nil with the token held, or without it ctx's error,
// redisprov.ErrOpened when the breaker is open (the policy answers at once,
// also while waiting), or redisprov.ErrBehindFailure when a lease request of
// the key failed while this one waited (fails counts them): a waiter is
// never sent after a request that found Redis slow or gone, so no caller
// waits more than about one call behind others, WithTimeout(0) included.
func takeFetch(ctx context.Context, g *redisprov.Guard, fetch chan struct{}, fails *atomic.Int64) error {
	seen := fails.Load()
	select {
	case fetch <- struct{}{}:
	default:
		select {
		case fetch <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-g.Opened():
			return redisprov.ErrOpened
		}
	}
	var err error
	switch {
	case g.Open():
		err = redisprov.ErrOpened
	case fails.Load() != seen:
		err = redisprov.ErrBehindFailure
	}
	if err != nil {
		<-fetch
	}
	return err
}

// fetched records the outcome of a lease request made with the fetch
// token held: a failure that may mean Redis is gone counts in fails, for
// the waiters (takeFetch). A timeout counts only under WithTimeout(0):
// otherwise each waiter's own budget, which started before its wait,
// bounds it, and the request may have timed out because of its own wait.
func fetched(cfg *window.Config, err error, fails *atomic.Int64) {
	if err != nil && redisprov.Unavailable(err) && (cfg.Timeout <= 0 || !redisprov.TimedOut(err)) {
		fails.Add(1)
	}
}

// syncTimeout bounds one tick's Redis calls: the per-call timeout, or 1 s
// when calls are left to the caller's context (a tick has no caller).
func syncTimeout(cfg *window.Config) time.Duration {
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
		send := now()
		queue := func(sc redis.Scripter, pipelined bool) {
			for i := range cmds {
				if done[i] {
					continue
				}
				k, args := call(i)
				if pipelined {
					cmds[i] = script.EvalSha(ctx, sc, []string{k}, args...)
				} else {
					cmds[i] = script.Run(ctx, sc, []string{k}, args...)
				}
			}
		}
		if ok, _ := redisprov.Pipelined(ctx, client, func(pipe redis.Scripter) { queue(pipe, true) }); !ok {
			queue(client, false)
		}
		last := round == 1 || ctx.Err() != nil
		missing := false
		for i, cmd := range cmds {
			if done[i] {
				continue
			}
			if !last && redisprov.NoScript(cmd.Err()) {
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

// holdFetches takes, without waiting, the fetch token of each of a tick's
// n calls that asks for a lease (want reports it), and reports which it
// holds: only those ask for one. A tick reads its clock before its
// pipeline reaches Redis, and an Inc of the key may read a later one and
// reach Redis first; with a clock that jumps (WithClock) the tick's lease
// request could then be dated W + B or more before the key's newest
// bucket, which the scripts take for a clock stepped back (the key is
// dead) and would start the key afresh, dropping the Inc's units. Holding
// the token, the tick's request is the key's only one in flight; a key
// whose token an Inc holds gets no lease from the tick (the Inc brings
// one), only its release.
func holdFetches(n int, token func(i int) (chan struct{}, bool)) []bool {
	held := make([]bool, n)
	for i := range held {
		ch, want := token(i)
		if !want {
			continue
		}
		select {
		case ch <- struct{}{}:
			held[i] = true
		default:
		}
	}
	return held
}

// releaseFetches gives back the tokens holdFetches took.
func releaseFetches(held []bool, token func(i int) chan struct{}) {
	for i, h := range held {
		if h {
			<-token(i)
		}
	}
}
