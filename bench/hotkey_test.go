package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// hotKeyGoroutines hammer the one key of BenchmarkHotKey.
const hotKeyGoroutines = 64

// hotKeyRate is the hot key's limit: 2,000 per second (window 1 s).
var hotKeyRate = policy{limiter.PerSecond(2000), redis_rate.PerSecond(2000)}

// A hotKeyContender builds a limiter's call on c and the function that
// closes it.
type hotKeyContender struct {
	name  string
	build func(c *redis.Client) (incFunc, func(), error)
}

// sluiceHot is a sluice provider with default options but the window and
// the timeout: with the default 250 ms, 64 callers on one key that wait
// behind each other locally can open the breaker on a loaded machine
// (the breaker's evidence rule is issue #30's, items 1 to 3), and the
// benchmark measures relief, not the failure policy: a degraded decision
// fails it.
func sluiceHot(name string, build func(c *redis.Client, opts ...limiter.Option) (limiter.Limiter, error), opts ...limiter.Option) hotKeyContender {
	return hotKeyContender{name, func(c *redis.Client) (incFunc, func(), error) {
		l, err := build(c, append([]limiter.Option{limiter.WithWindow(time.Second), limiter.WithTimeout(0)}, opts...)...)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, k string) (bool, error) {
				d, err := l.Inc(ctx, k, hotKeyRate.rate, 1)
				if err == nil && d.Degraded {
					err = errDegraded
				}
				return d.Allowed, err
			}, func() {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				l.Close(cctx)
			}, nil
	}}
}

var hotKeyContenders = []hotKeyContender{
	sluiceHot("redisabs", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) { return redisabs.New(c, o...) }),
	sluiceHot("redissup", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) { return redissup.New(c, o...) }),
	sluiceHot("hybrid-abs", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) {
		return hybrid.NewAbsolute(c, o...)
	}),
	sluiceHot("hybrid-sup", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) {
		return hybrid.NewSuppressed(c, o...)
	}),
	sluiceHot("redisabs-unrelieved", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) { return redisabs.New(c, o...) },
		limiter.WithHotKeyRelief(false)),
	{"redis_rate", func(c *redis.Client) (incFunc, func(), error) {
		l := redis_rate.NewLimiter(c)
		return func(ctx context.Context, k string) (bool, error) {
			r, err := l.Allow(ctx, k, hotKeyRate.limit)
			if err != nil {
				return false, err
			}
			return r.Allowed == 1, nil
		}, func() {}, nil
	}},
}

var hotKeySeq atomic.Int64

// BenchmarkHotKey measures an overloaded hot key: 64 goroutines call Inc
// of one unit on one key limited to 2,000 per second (window 1 s), so
// nearly every call is refused. Each contender gets a fresh limiter and
// key, default options but the window and the timeout (see sluiceHot;
// relief on, redisabs-unrelieved turns it off for reference). Besides ns/op it reports decisions per
// second, the share refused, and the script calls the server ran (EVALSHA
// and EVAL in INFO commandstats) per 1,000 decisions (docs/benchmarks.md,
// Hot-key relief):
//
//	go test -run '^$' -bench 'HotKey$' -benchtime 2s -count 3 | tee hotkey.txt
func BenchmarkHotKey(b *testing.B) {
	c := requireServer(b)
	for _, ct := range hotKeyContenders {
		b.Run(ct.name, func(b *testing.B) {
			inc, closeFn, err := ct.build(c)
			if err != nil {
				b.Fatal(err)
			}
			defer closeFn()
			k := fmt.Sprintf("hot:%d", hotKeySeq.Add(1))
			if err := stats.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			refused, err := parallel(hotKeyGoroutines, b.N, func(int) (bool, error) { return inc(ctx, k) })
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			var calls int64
			for _, cmd := range []string{"evalsha", "eval"} {
				st, err := commandStat(stats, cmd)
				if err != nil {
					b.Fatal(err)
				}
				calls += st.Calls
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "dec/s")
			b.ReportMetric(float64(refused)/float64(b.N), "refused/dec")
			b.ReportMetric(1000*float64(calls)/float64(b.N), "scripts/1000dec")
		})
	}
}
