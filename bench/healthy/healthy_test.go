package healthy

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// current is a Side of the code in this checkout, with extra options for
// its Redis providers (the local provider refuses those it does not read,
// and is built without them).
func current(label string, extra ...limiter.Option) Side {
	return Side{Label: label, New: func(c redis.UniversalClient, provider, rate, prefix string) (Inc, func(), error) {
		r, err := limiter.ParseRate(rate)
		if err != nil {
			return nil, nil, err
		}
		if provider == "local" {
			l, err := local.NewAbsolute()
			if err != nil {
				return nil, nil, err
			}
			inc, done := Bind[limiter.Rate, limiter.Decision](l, r)
			return inc, done, nil
		}
		opts := append([]limiter.Option{limiter.WithPrefix(prefix)}, extra...)
		if provider == "abs" {
			l, err := redisabs.New(c, opts...)
			if err != nil {
				return nil, nil, err
			}
			inc, done := Bind[limiter.Rate, limiter.Decision](l, r)
			return inc, done, nil
		}
		l, err := redissup.New(c, opts...)
		if err != nil {
			return nil, nil, err
		}
		inc, done := Bind[limiter.Rate, limiter.Decision](l, r)
		return inc, done, nil
	}}
}

// TestCompare runs the harness on two sides of this checkout, briefly, and
// checks what it counts: every block of every side and benchmark, the
// calls reaching Redis, and the summary naming each one.
func TestCompare(t *testing.T) {
	addr, stop, err := StartRedis()
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_REDIS") != "1" && strings.Contains(err.Error(), "not on PATH") {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	defer stop()
	c := NewClient(addr)
	defer c.Close()
	// Side b switches the per-call timeout off on purpose: the comparison
	// measures what the default deadline costs a healthy call.
	sides := []Side{current("a"), current("b", limiter.WithTimeout(0))}
	var out bytes.Buffer
	const blocks, per = 3, 40
	res, err := Compare(&out, c, sides, Options{Blocks: blocks, PerBlock: per, Group: 3, Only: regexp.MustCompile("HotKey")})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"abs/HotKey/Serial", "abs/HotKey/Parallel", "sup/HotKey/Serial", "sup/HotKey/Parallel",
		"local/HotKey/Serial", "local/HotKey/Parallel"}
	if len(res) != len(names) {
		t.Fatalf("%d benchmarks, want %d: %v", len(res), len(names), res)
	}
	for _, name := range names {
		for _, s := range sides {
			tot := res[name][s.Label]
			if tot == nil || tot.Calls != blocks*per || len(tot.Blocks) != blocks || tot.Elapsed <= 0 {
				t.Fatalf("%s %s: %+v, want %d calls in %d timed blocks", name, s.Label, tot, blocks*per, blocks)
			}
			// A Redis call allocates (go-redis's command, the reply); the
			// local provider's admission does not, so its blocks allocate
			// only their goroutines.
			if local := strings.HasPrefix(name, "local/"); local && tot.Mallocs > 8*blocks || !local && tot.Mallocs < uint64(tot.Calls) {
				t.Errorf("%s %s: %d allocations in %d calls", name, s.Label, tot.Mallocs, tot.Calls)
			}
			if !strings.Contains(out.String(), "BenchmarkHealthyInc/"+name+"/rev="+s.Label+"-") {
				t.Errorf("no benchmark line for %s %s in\n%s", name, s.Label, out.String())
			}
		}
		if rs := Ratios(res[name]["b"], res[name]["a"]); len(rs) != blocks || rs[0] <= 0 {
			t.Errorf("%s: ratios %v", name, rs)
		}
	}
	// Every call reached Redis: the hot key of each side and benchmark
	// holds the warm-up and the measured calls.
	l, err := redisabs.New(c, limiter.WithPrefix(prefixOf(0, "abs/HotKey/Serial")))
	if err != nil {
		t.Fatal(err)
	}
	u, err := l.Get(context.Background(), "hot")
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(warmUp + blocks*per); u.Used != want {
		t.Errorf("hot key of side a used %d units, want %d", u.Used, want)
	}
}
