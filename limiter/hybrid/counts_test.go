package hybrid_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/scripts"
)

// callCounter is a go-redis hook that counts, on the client side, what a
// limiter sends: round trips (a command alone or a pipeline), script
// calls, pipelines and their calls, and the lease figures of the hybrid's
// scripts (calls that asked for a lease, leases granted and their units,
// units given back). The counts do not depend on the machine's load the
// way times do.
type callCounter struct {
	trips, scripts, pipes, piped atomic.Int64
	asks, grants, units, rels    atomic.Int64
	plain                        atomic.Int64 // script calls without the hybrid's lease arguments
}

func (h *callCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips.Add(1)
		err := next(ctx, cmd)
		h.tally(cmd)
		return err
	}
}

func (h *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips.Add(1)
		h.pipes.Add(1)
		h.piped.Add(int64(len(cmds)))
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.tally(c)
		}
		return err
	}
}

// tally reads one script call: abs_inc.lua's ARGV is now, W, B, c, n,
// TTL[, want, start, rel, ahead], its lease reply 5 integers (g first);
// sup_inc.lua's is now, W, B, S, H, n, cache, draw, TTL[, want, start,
// rel, push, ahead], its hybrid reply 16 values (g the 9th).
func (h *callCounter) tally(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 3 {
		return
	}
	name, _ := args[0].(string)
	if name != "evalsha" && name != "eval" {
		return
	}
	h.scripts.Add(1)
	sha, _ := args[1].(string)
	argv := args[4:] // one key
	var want, rel, g int64 = -1, 0, 0
	reply, _ := cmd.(*redis.Cmd)
	switch {
	case sha == scripts.AbsInc.Hash() && len(argv) >= 10:
		want, rel = toInt(argv[6]), toInt(argv[8])
		if reply != nil {
			if arr, ok := reply.Val().([]any); ok && len(arr) == 5 {
				g = toInt(arr[0])
			}
		}
	case sha == scripts.SupInc.Hash() && len(argv) >= 14:
		want, rel = toInt(argv[9]), toInt(argv[11])
		if reply != nil {
			if arr, ok := reply.Val().([]any); ok && len(arr) == 16 {
				g = toInt(arr[8])
			}
		}
	default:
		h.plain.Add(1)
		return
	}
	if want > 0 {
		h.asks.Add(1)
	}
	if g > 0 {
		h.grants.Add(1)
		h.units.Add(g)
	}
	h.rels.Add(rel)
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int:
		return int64(x)
	}
	return 0
}

// counts is a snapshot of a callCounter.
func (h *callCounter) counts() [9]int64 {
	return [9]int64{h.trips.Load(), h.scripts.Load(), h.pipes.Load(), h.piped.Load(),
		h.asks.Load(), h.grants.Load(), h.units.Load(), h.rels.Load(), h.plain.Load()}
}

var countNames = [9]string{"trips", "scripts", "pipes", "piped", "asks", "grants", "units", "relunits", "plain"}

// cpuNow returns this process's CPU time (user + system) and the Redis
// server's (INFO cpu, used_cpu_user + used_cpu_sys), both in µs: per
// decision, less sensitive to the machine's load than wall time.
func cpuNow(ctx context.Context, c *redis.Client) (self, server float64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		self = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
	}
	s, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return self, 0
	}
	for _, line := range strings.Split(s, "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (name == "used_cpu_user" || name == "used_cpu_sys") {
			f, _ := strconv.ParseFloat(v, 64)
			server += f * 1e6
		}
	}
	return self, server
}
