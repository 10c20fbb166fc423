package scripts_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/scripts"
)

// TestMain stops the servers the tests start.
func TestMain(m *testing.M) { redistest.Main(m) }

// costTTL is the PEXPIRE of the cost states: their clocks are explicit
// milliseconds near 0, so W + B would let real time expire them.
const costTTL = "3600000"

// costCase is one worst-case call on a copy of a filled key.
type costCase struct {
	name   string
	script string // the .lua file
	run    func(c *redis.Client, key string) error
}

// slowlogLast returns the duration of the latest EVALSHA or EVAL in the
// slow log (every command is logged: slowlog-log-slower-than 0).
func slowlogLast(ctx context.Context, c *redis.Client) (time.Duration, error) {
	logs, err := c.SlowLogGet(ctx, 16).Result()
	if err != nil {
		return 0, err
	}
	for _, l := range logs { // newest first
		if len(l.Args) > 0 && (strings.EqualFold(l.Args[0], "evalsha") || strings.EqualFold(l.Args[0], "eval")) {
			return l.Duration, nil
		}
	}
	return 0, fmt.Errorf("no script call in the slow log")
}

// costFill writes key with W = n ms and B = 1 ms, saturated one unit per
// bucket: a call of one unit at every t = 0..n (n + 1 live buckets at t =
// n). For the suppressed strategy (S = n + 1, H = 2S) declined adds a
// refused call of H units at every t, so that every bucket has its
// "d<start>" field too.
func costFill(ctx context.Context, c *redis.Client, key string, n int64, abs, declined bool) error {
	w := strconv.FormatInt(n, 10)
	capa := strconv.FormatInt(n+1, 10)
	hard := strconv.FormatInt(2*(n+1), 10)
	pipe := c.Pipeline()
	for t := int64(0); t <= n; t++ {
		now := strconv.FormatInt(t, 10)
		if abs {
			scripts.AbsInc.EvalSha(ctx, pipe, []string{key}, now, w, "1", capa, "1", costTTL)
		} else {
			scripts.SupInc.EvalSha(ctx, pipe, []string{key}, now, w, "1", capa, hard, "1", "0", "999999", costTTL)
			if declined {
				scripts.SupInc.EvalSha(ctx, pipe, []string{key}, now, w, "1", capa, hard, hard, "0", "0", costTTL)
			}
		}
		if pipe.Len() >= 500 || t == n {
			if _, err := pipe.Exec(ctx); err != nil {
				return fmt.Errorf("fill: %v", err)
			}
		}
	}
	return nil
}

// TestScriptCost measures the Redis time (SLOWLOG) of every script's worst
// states against W/B on a private server, and prints the table of
// docs/benchmarks.md, Bounded work:
//
//	SLUICE_COST=1 go test ./scripts/ -run ScriptCost -v
//	SLUICE_COST=1 SLUICE_COST_RATIOS=250,500 go test ./scripts/ -run ScriptCost -v
func TestScriptCost(t *testing.T) {
	if os.Getenv("SLUICE_COST") == "" {
		t.Skip("set SLUICE_COST=1 to measure")
	}
	ratios := []int64{128, 250, 500, 1000, 2000}
	if s := os.Getenv("SLUICE_COST_RATIOS"); s != "" {
		ratios = nil
		for _, f := range strings.Split(s, ",") {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			ratios = append(ratios, v)
		}
	}
	srv := redistest.StartServer(t, "--slowlog-log-slower-than", "0", "--slowlog-max-len", "128")
	c := redis.NewClient(srv.Options())
	defer c.Close()
	ctx := context.Background()
	for _, s := range []*redis.Script{scripts.AbsInc, scripts.AbsGet, scripts.SupInc, scripts.SupAllowed, scripts.SupGet} {
		if err := s.Load(ctx, c).Err(); err != nil {
			t.Fatal(err)
		}
	}
	type worst struct {
		d     time.Duration
		state string
	}
	table := map[int64]map[string]worst{}
	for _, n := range ratios {
		table[n] = map[string]worst{}
		w := strconv.FormatInt(n, 10)
		capa := n + 1
		cs := strconv.FormatInt(capa, 10)
		hard := strconv.FormatInt(2*capa, 10)
		at := func(d int64) string { return strconv.FormatInt(n+d, 10) }
		abs := func(now string, c0, cost int64) func(c *redis.Client, key string) error {
			return func(c *redis.Client, key string) error {
				return scripts.AbsInc.Run(ctx, c, []string{key}, now, w, "1", c0, cost, costTTL).Err()
			}
		}
		sup := func(now string, cost int64, draw string) func(c *redis.Client, key string) error {
			return func(c *redis.Client, key string) error {
				return scripts.SupInc.Run(ctx, c, []string{key}, now, w, "1", cs, hard, cost, "0", draw, costTTL).Err()
			}
		}
		half := at(n / 2)
		all := at(n) // every bucket but the newest is dead
		absCases := []costCase{
			{"Inc n=2 refused", "abs_inc.lua", abs(at(0), capa, 2)},
			{"Inc n=C/2 refused", "abs_inc.lua", abs(at(0), capa, capa/2)},
			{"Inc n=C refused", "abs_inc.lua", abs(at(0), capa, capa)},
			{"Inc n=C+1 never", "abs_inc.lua", abs(at(0), capa, capa+1)},
			{"peek refused", "abs_inc.lua", abs(at(0), capa, 0)},
			{"IsAllowed refused", "abs_inc.lua", abs(at(0), 0, 0)},
			{"IsAllowed half dead", "abs_inc.lua", abs(half, 0, 0)},
			{"IsAllowed all dead", "abs_inc.lua", abs(all, 0, 0)},
			{"Inc n=C half dead", "abs_inc.lua", abs(half, capa, capa)},
			{"Inc n=1 all dead", "abs_inc.lua", abs(all, capa, 1)},
			{"Get full", "abs_get.lua", func(c *redis.Client, key string) error {
				return scripts.AbsGet.Run(ctx, c, []string{key}, at(0), w, "1").Err()
			}},
			{"Get half dead", "abs_get.lua", func(c *redis.Client, key string) error {
				return scripts.AbsGet.Run(ctx, c, []string{key}, half, w, "1").Err()
			}},
		}
		supCases := []costCase{
			{"Inc n=1 factor", "sup_inc.lua", sup(at(0), 1, "0")},
			{"Inc n=2 refused", "sup_inc.lua", sup(at(0), 2, "0")},
			{"Inc n=S/2 refused", "sup_inc.lua", sup(at(0), capa/2, "0")},
			{"Inc n=S refused", "sup_inc.lua", sup(at(0), capa, "0")},
			{"Inc n=H refused", "sup_inc.lua", sup(at(0), 2*capa, "0")},
			{"Inc n=S half dead", "sup_inc.lua", sup(half, capa, "0")},
			{"Inc n=1 all dead", "sup_inc.lua", sup(all, 1, "0")},
			{"peek", "sup_inc.lua", sup(at(0), 0, "0")},
			{"IsAllowed full", "sup_allowed.lua", func(c *redis.Client, key string) error {
				return scripts.SupAllowed.Run(ctx, c, []string{key}, at(0), w, "0", "1").Err()
			}},
			{"IsAllowed half dead", "sup_allowed.lua", func(c *redis.Client, key string) error {
				return scripts.SupAllowed.Run(ctx, c, []string{key}, half, w, "0", "1").Err()
			}},
			{"Get half dead", "sup_get.lua", func(c *redis.Client, key string) error {
				return scripts.SupGet.Run(ctx, c, []string{key}, half, w, "1").Err()
			}},
		}
		c.FlushAll(ctx)
		for _, k := range []struct {
			key           string
			abs, declined bool
		}{{"abs", true, false}, {"sup", false, false}, {"supd", false, true}} {
			if err := costFill(ctx, c, k.key, n, k.abs, k.declined); err != nil {
				t.Fatal(err)
			}
			t.Logf("W/B = %d: %s holds %d fields (%s)", n, k.key, c.HLen(ctx, k.key).Val(), c.ObjectEncoding(ctx, k.key).Val())
		}
		measure := func(src string, cc costCase) {
			var ds []time.Duration
			for i := 0; i < 5; i++ {
				if err := c.Copy(ctx, src, "x", 0, true).Err(); err != nil {
					t.Fatal(err)
				}
				if err := cc.run(c, "x"); err != nil {
					t.Fatalf("%s: %v", cc.name, err)
				}
				d, err := slowlogLast(ctx, c)
				if err != nil {
					t.Fatal(err)
				}
				ds = append(ds, d)
			}
			slices.Sort(ds)
			t.Logf("W/B=%-6d %-16s %-22s %-5s median %6d µs  max %6d µs", n, cc.script, cc.name, src, ds[2].Microseconds(), ds[4].Microseconds())
			if w := table[n][cc.script]; ds[2] > w.d {
				table[n][cc.script] = worst{ds[2], cc.name + " (" + src + ")"}
			}
		}
		for _, cc := range absCases {
			measure("abs", cc)
		}
		for _, cc := range supCases {
			measure("sup", cc)
			measure("supd", cc)
		}
	}
	t.Logf("| W/B | script | worst median µs | state |")
	for _, n := range ratios {
		for _, f := range []string{"abs_inc.lua", "abs_get.lua", "sup_inc.lua", "sup_allowed.lua", "sup_get.lua"} {
			t.Logf("| %d | %s | %d | %s |", n, f, table[n][f].d.Microseconds(), table[n][f].state)
		}
	}
}
