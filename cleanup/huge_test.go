package cleanup_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

const linkUnit = int64(1) << 32

// hugeHash writes, by hand, a hash of the strategy's layout (W = 1 min,
// B = 600 ms in its record) holding dead
// dead buckets one ms apart an hour ago, then five live buckets of 2 units
// a second apart from 30 s ago, and the newest bucket (3 units) a second
// ago. linked false stores the dead buckets as plain counts, without
// links, as no sluice writes (the script must then trim from HSCAN
// batches). Suppressed buckets have a declined count of 1 each.
func hugeHash(t testing.TB, c *redis.Client, strategy, name string, now int64, dead int, linked bool) {
	t.Helper()
	base := now - 3_600_000
	var starts []int64
	counts := map[int64]int64{}
	for i := 0; i < dead; i++ {
		starts = append(starts, base+int64(i))
		counts[base+int64(i)] = 1
	}
	for j := int64(0); j < 5; j++ {
		starts = append(starts, now-30_000+j*1000)
		counts[now-30_000+j*1000] = 2
	}
	newest := now - 1000
	fields := make([]any, 0, 4*len(starts))
	var u, x int64 = 3, 0
	for i, st := range starts {
		next := newest
		if i+1 < len(starts) {
			next = starts[i+1]
		}
		v := counts[st]*linkUnit + (next - st)
		if !linked && i < dead {
			v = counts[st]
		}
		u += counts[st]
		fields = append(fields, strconv.FormatInt(st, 10), strconv.FormatInt(v, 10))
		if strategy == key.Suppressed {
			fields = append(fields, "d"+strconv.FormatInt(st, 10), "1")
			x++
		}
	}
	for i := 0; i < len(fields); i += 2000 {
		if err := c.HSet(ctx, name, fields[i:min(i+2000, len(fields))]...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if strategy == key.Absolute {
		c.HSet(ctx, name, "m", fmt.Sprintf("1000000 %d %d %d 3", u, starts[0], newest), "v", "a2 60000 600")
	} else {
		c.HSet(ctx, name, "m", fmt.Sprintf("%d %d %d %d 3 0", u, x, starts[0], newest), "k", "1000000 1000000 0 0",
			"v", "s2 60000 600")
	}
	c.Expire(ctx, name, time.Hour)
}

// TestTrimHuge: live hashes of 100,000 dead bucket fields (absolute with
// links; suppressed, 50,000 buckets and their declined counts, with links;
// absolute without links) are trimmed to their live buckets in steps, no
// script call, SCAN or HSCAN over about a millisecond of Redis time (SLOWLOG),
// and their Get is unchanged. Each step follows at most 128 links (or, for
// the hash without links, reads 128 fields from HSCAN), which costs a few
// hundred microseconds.
func TestTrimHuge(t *testing.T) {
	// SLOWLOG keeps the commands over 200 µs (those a script makes are
	// logged too, but none is that slow).
	srv := redistest.StartServer(t, "--slowlog-log-slower-than", "200", "--slowlog-max-len", "100000")
	c := srv.Client(t)
	prefix := redistest.Prefix(t)
	now := redisNow(t, c).UnixMilli()
	type huge struct {
		strategy, user string
		dead           int
		linked         bool
	}
	cases := []huge{
		{key.Absolute, "linked", 100_000, true},
		{key.Suppressed, "linked", 50_000, true},
		{key.Absolute, "unlinked", 100_000, false},
	}
	gets := map[string]limiter.Limiter{}
	before := map[string]limiter.Usage{}
	for _, s := range strategies {
		gets[s] = newLimiter(t, s, c, limiter.WithPrefix(prefix))
	}
	for _, h := range cases {
		hugeHash(t, c, h.strategy, hashName(t, prefix, h.user, h.strategy), now, h.dead, h.linked)
		// More fields than any record holds: the providers refuse to
		// read it whole (ErrLayout naming it) until the pass trims it.
		u, err := gets[h.strategy].Get(ctx, h.user)
		if !errors.Is(err, limiter.ErrLayout) || !strings.Contains(err.Error(), "fields") {
			t.Fatalf("%s %s: Get = %+v, %v before the pass, want ErrLayout naming the hash's fields", h.strategy, h.user, u, err)
		}
		want := int64(3 + 10) // the newest bucket and five of 2
		if h.strategy == key.Suppressed {
			want -= 5 // one declined in each closed live bucket
		}
		before[h.strategy+h.user] = limiter.Usage{Used: want}
	}
	c.Do(ctx, "SLOWLOG", "RESET")
	r, err := newCleaner(t, c, cleanup.WithPrefix(prefix), cleanup.WithWindow(time.Minute, 0), cleanup.WithRate(math.Inf(1))).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := c.SlowLogGet(ctx, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%v", r)
	if r.Trimmed != 3 || r.Buckets != 250_000 || r.Live != 3 {
		t.Errorf("report:\n%v\nwant 3 live hashes trimmed of 250,000 buckets", r)
	}
	for _, h := range cases {
		name := hashName(t, prefix, h.user, h.strategy)
		f := c.HGetAll(ctx, name).Val()
		v := viewOf(h.strategy, f)
		if len(v.offered) != 5 {
			t.Errorf("%s: %d buckets left, want the 5 live ones", name, len(v.offered))
		}
		if h.linked {
			if err := v.consistent(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		} else if v.used != 13 { // o is left on a removed field: the provider rescans
			t.Errorf("%s: u = %d, want 13", name, v.used)
		}
		u, err := gets[h.strategy].Get(ctx, h.user)
		if err != nil || u.Used != before[h.strategy+h.user].Used {
			t.Errorf("%s: Get = %+v, %v after the pass, want %d used", name, u, err, before[h.strategy+h.user].Used)
		}
	}

	// The Redis time of the pass's commands: those over 200 µs from
	// SLOWLOG, the count of all from INFO commandstats.
	calls := 0
	for _, cmd := range []string{"evalsha", "eval", "scan", "hscan"} {
		calls += redistest.CommandCalls(t, c, cmd)
	}
	var slow []time.Duration
	var over int
	byKind := map[string][]time.Duration{}
	for _, l := range logs {
		if len(l.Args) == 0 || strings.EqualFold(l.Args[0], "slowlog") {
			continue
		}
		kind := strings.ToLower(l.Args[0])
		if len(l.Args) > 3 && strings.HasPrefix(kind, "eval") {
			if i := strings.Index(l.Args[3], "{"); i >= 0 {
				kind += " " + l.Args[3][i:]
			} else {
				kind += " " + l.Args[3] // the lease
			}
		}
		byKind[kind] = append(byKind[kind], l.Duration)
		slow = append(slow, l.Duration)
		if l.Duration > time.Millisecond {
			over++
		}
	}
	slices.Sort(slow)
	for kind, d := range byKind {
		slices.Sort(d)
		t.Logf("over 200µs: %d × %s, median %v, max %v", len(d), kind, d[len(d)/2], d[len(d)-1])
	}
	if calls < 700 {
		t.Fatalf("%d script and SCAN calls, want the steps of the trims", calls)
	}
	// A descheduled redis-server counts in SLOWLOG too: on a 2-core machine
	// running other packages' suites at once under the race detector, 5 to
	// 8 % of any commands, PTTL included, take milliseconds. So the bound
	// is on the median of the calls SLOWLOG kept (the steps themselves
	// take 200-500 µs, so a step that costs more than 1 ms moves it) and
	// on a quarter of them over the millisecond, which a step costing
	// that much on every call would break.
	t.Logf("%d of %d calls over 1ms", over, calls)
	if med := slow[len(slow)/2]; med > time.Millisecond || over > calls/4 {
		t.Errorf("%d of %d calls over 1ms, median of those over 200µs %v, the slowest %v; want a median under 1ms and at most 25%% over it",
			over, calls, med, slow[len(slow)-1])
	}
}

// TestLeaseLostInLastTrim: a pass whose only key is a large hash without
// links (trimmed from HSCAN batches) loses its lease while it trims: the
// report says so and Run returns ErrLeaseLost, though no key follows
// whose lease check would have noticed (a regression: the batches stopped
// and the pass ended as if it had finished).
func TestLeaseLostInLastTrim(t *testing.T) {
	c := redistest.Real(t).Client(t)
	prefix := redistest.Prefix(t)
	now := redisNow(t, c).UnixMilli()
	hugeHash(t, c, key.Absolute, hashName(t, prefix, "unlinked", key.Absolute), now, 100_000, false)
	cl := newCleaner(t, c, cleanup.WithPrefix(prefix), cleanup.WithWindow(time.Minute, 0),
		cleanup.WithRate(math.Inf(1)), cleanup.WithLease(300*time.Millisecond))
	taken := make(chan struct{})
	cleanup.SetHooks(cl, nil, func(string) func() {
		// Another cleaner takes the lease as soon as this one starts on
		// the key; the trim's next renewal (a third of a lease later)
		// finds the other token.
		if err := c.Set(ctx, cleanup.LeaseKey(cl), "another cleaner", time.Minute).Err(); err != nil {
			t.Error(err)
		}
		close(taken)
		return func() {}
	})
	r, err := cl.Run(ctx)
	t.Logf("report:\n%v", r)
	select {
	case <-taken:
	default:
		t.Fatal("the pass never reached the key")
	}
	if !errors.Is(err, cleanup.ErrLeaseLost) || !r.LeaseLost {
		t.Fatalf("Run = %v, LeaseLost %v; want ErrLeaseLost and the report saying so", err, r.LeaseLost)
	}
	if r.Buckets >= 100_000 {
		t.Errorf("%d buckets trimmed after the lease was lost; want the trim stopped", r.Buckets)
	}
}
