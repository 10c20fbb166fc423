package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// luaCalls are the numbers of redis.call of the LuaCost scripts.
var luaCalls = []int{0, 1, 2, 4, 8}

// luaCostGoroutines is the parallelism of the LuaCost measures.
const luaCostGoroutines = 8

// luaCostScript returns a script that makes k HINCRBYs on KEYS[1] and
// returns 1.
func luaCostScript(k int) *redis.Script {
	var body strings.Builder
	for i := 0; i < k; i++ {
		body.WriteString("redis.call('HINCRBY', KEYS[1], 'u', 1)\n")
	}
	body.WriteString("return 1\n")
	return redis.NewScript(body.String())
}

// prepareLuaCost empties Redis, writes a small hash and returns a call of
// s on it.
func prepareLuaCost(c *redis.Client, s *redis.Script) (workload, incFunc, error) {
	if err := c.FlushAll(ctx).Err(); err != nil {
		return workload{}, nil, err
	}
	if err := c.HSet(ctx, "h", "c", 10, "u", 0, "o", 1, "n", 1).Err(); err != nil {
		return workload{}, nil, err
	}
	inc := func(ctx context.Context, key string) (bool, error) {
		return true, s.Run(ctx, c, []string{key}).Err()
	}
	_, err := inc(ctx, "h") // loads the script
	return workload{name: "luacost", keys: []string{"h"}}, inc, err
}

// BenchmarkLuaCost splits the server's time per EVALSHA into a fixed part
// and a part per redis.call, with scripts that do nothing but k HINCRBYs on
// a small hash (no limiter involved): a yardstick for reading the server
// time of the limiters' scripts. TestCompare runs the same measures in its rounds.
//
//	go test -run '^$' -bench LuaCost -count 5
func BenchmarkLuaCost(b *testing.B) {
	c := requireServer(b)
	for _, k := range luaCalls {
		b.Run(fmt.Sprintf("calls=%d", k), func(b *testing.B) {
			w, inc, err := prepareLuaCost(c, luaCostScript(k))
			if err != nil {
				b.Fatal(err)
			}
			measure(b, c, w, luaCostGoroutines, inc)
		})
	}
}
