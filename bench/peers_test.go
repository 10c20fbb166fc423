package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	ulimiter "github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// The peers set-up: 1,000 per second per key, sluice over
// W = 1 s with B = 10 ms, redis_rate with a burst of one window (1,000),
// ulule/limiter's Redis store with a fixed window of 1 s and 1,000 per
// window. 10k: 10,000 keys round-robin, so nearly every sluice call opens
// a bucket and drops the one that died; hot: one key, offered far above
// its rate at 8 and 64 goroutines (refusals), at about its rate at 1.
var (
	peerRate  = limiter.PerSecond(1000)
	peerLimit = redis_rate.PerSecond(1000)
	peerUlule = ulimiter.Rate{Period: time.Second, Limit: 1000}
)

// peerOptions are the sluice contenders' options beside batching: the
// window and bucket, and a 5 s bound per call (the shared client's
// ReadTimeout: a loaded machine must not turn calls into fallback
// decisions that never reach Redis; a degraded decision fails the run).
var peerOptions = []limiter.Option{limiter.WithWindow(time.Second), limiter.WithBucket(10 * time.Millisecond),
	limiter.WithTimeout(5 * time.Second)}

// peerContenders are redis_rate, ulule's Redis store, sluice's two Redis
// providers, batched (limiter.WithBatching(128), the default) and alone
// (WithBatching(0)), and the hybrid of each strategy, batched. Each build
// gets a prefix of its own and returns what closes it.
type peerContender struct {
	name  string
	build func(c *redis.Client, prefix string) (incFunc, func(), error)
}

var peerContenders = []peerContender{
	{"redis_rate", func(c *redis.Client, _ string) (incFunc, func(), error) {
		l := redis_rate.NewLimiter(c)
		return func(ctx context.Context, k string) (bool, error) {
			r, err := l.Allow(ctx, k, peerLimit)
			if err != nil {
				return false, err
			}
			return r.Allowed == 1, nil
		}, func() {}, nil
	}},
	{"ulule", func(c *redis.Client, prefix string) (incFunc, func(), error) {
		store, err := ulredis.NewStoreWithOptions(c, ulimiter.StoreOptions{Prefix: prefix})
		if err != nil {
			return nil, nil, err
		}
		l := ulimiter.New(store, peerUlule)
		return func(ctx context.Context, k string) (bool, error) {
			r, err := l.Get(ctx, k)
			return !r.Reached, err
		}, func() {}, nil
	}},
	{"redisabs", peerSluice(false, false, 128)},
	{"redisabs-alone", peerSluice(false, false, 0)},
	{"redissup", peerSluice(true, false, 128)},
	{"redissup-alone", peerSluice(true, false, 0)},
	{"hybrid-abs", peerSluice(false, true, 128)},
	{"hybrid-sup", peerSluice(true, true, 128)},
}

// peerSluice builds a sluice contender: suppressed (sup, with
// hardLimitFactor) or absolute, the hybrid's or the Redis provider's, with
// WithBatching(batch).
func peerSluice(sup, hyb bool, batch int) func(c *redis.Client, prefix string) (incFunc, func(), error) {
	return func(c *redis.Client, prefix string) (incFunc, func(), error) {
		o := append(slices.Clone(peerOptions), limiter.WithBatching(batch), limiter.WithPrefix(prefix))
		if sup {
			o = append(o, limiter.WithHardLimitFactor(hardLimitFactor))
		}
		var l limiter.Limiter
		var err error
		switch {
		case sup && hyb:
			l, err = hybrid.NewSuppressed(c, o...)
		case sup:
			l, err = redissup.New(c, o...)
		case hyb:
			l, err = hybrid.NewAbsolute(c, o...)
		default:
			l, err = redisabs.New(c, o...)
		}
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, k string) (bool, error) {
			d, err := l.Inc(ctx, k, peerRate, 1)
			if err == nil && d.Degraded {
				err = errDegraded
			}
			return d.Allowed, err
		}, func() { l.Close(ctx) }, nil
	}
}

// peerRounds is how many slices of every contender one sample holds.
const peerRounds = 6

// BenchmarkPeers runs redis_rate, ulule/limiter's Redis store, sluice's
// Redis providers (batched and alone) and its hybrids (batched; on 10k
// keys, each called far less often than a lease lives, no lease serves a
// second call) in one process against the run's one redis-server, for 1,
// 8 and 64 goroutines on 10,000 keys and on one hot key. Each sample is
// peerRounds rounds; each round gives every
// contender a slice of b.N/peerRounds calls, in an order that rotates
// round by round, so a change of the machine's load falls on all alike.
// Per contender it reports ops/s over its slices; client µs per call (the
// benchmark process' CPU time, user + system, over its slices: go-redis,
// the limiter and the harness); server µs per call (the EVALSHA time of
// INFO commandstats: the scripts' run time) and server CPU µs per call
// (INFO cpu, user + system: the scripts plus reading, parsing and
// answering requests); the server's read events per call (INFO stats'
// total_reads_processed: one per read syscall that brought calls in, so
// batching shows as fewer than one); the share of calls refused; and per
// contender the median over the rounds of its ops/s ÷ redis_rate's in the
// same round:
//
//	go test -run '^$' -bench Peers -benchtime 24000x -count 3 | tee testdata/peers.txt
//
// PEERS_ONLY=redis_rate,redisabs,hybrid-abs (names, comma-separated) runs
// only those contenders; ratios need redis_rate among them.
func BenchmarkPeers(b *testing.B) {
	c := requireServer(b)
	hot := []string{"hot"}
	tenk := make([]string, 10_000)
	for i := range tenk {
		tenk[i] = "user:" + strconv.Itoa(i)
	}
	for _, load := range []struct {
		name string
		keys []string
	}{{"10k", tenk}, {"hot", hot}} {
		b.Run("load="+load.name, func(b *testing.B) {
			for _, g := range []int{1, 8, 64} {
				b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) {
					benchPeers(b, c, load.keys, g)
				})
			}
		})
	}
}

// peerSample is what one contender's slices add up to.
type peerSample struct {
	elapsed        time.Duration
	client         time.Duration
	serverCPU      float64 // s
	evalUsec       float64
	evalCalls      int64
	reads, refused int64
}

func benchPeers(b *testing.B, c *redis.Client, keys []string, g int) {
	if err := c.FlushAll(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	peerContenders := peerContenders
	if only := os.Getenv("PEERS_ONLY"); only != "" {
		names := strings.Split(only, ",")
		peerContenders = slices.DeleteFunc(slices.Clone(peerContenders), func(ct peerContender) bool {
			return !slices.Contains(names, ct.name)
		})
	}
	n := len(peerContenders)
	incs := make([]incFunc, n)
	for i, ct := range peerContenders {
		inc, closeFn, err := ct.build(c, "p"+strconv.Itoa(i))
		if err != nil {
			b.Fatalf("%s: %v", ct.name, err)
		}
		defer closeFn()
		// Scripts loaded, pooled connections open, every key touched.
		if _, err := parallel(poolSize, max(len(keys), 2000), func(j int) (bool, error) {
			return inc(ctx, keys[j%len(keys)])
		}); err != nil {
			b.Fatalf("%s: %v", ct.name, err)
		}
		incs[i] = inc
	}
	slice := max(b.N/peerRounds, 1)
	sums := make([]peerSample, n)
	ratios := make([][]float64, n)
	b.ResetTimer()
	for r := 0; r < peerRounds; r++ {
		ops := make([]float64, n)
		for o := range n {
			i := (o + r) % n
			st0, err := commandStat(stats, "evalsha")
			if err != nil {
				b.Fatal(err)
			}
			cpu0, reads0, err := serverSample(stats)
			if err != nil {
				b.Fatal(err)
			}
			cl0, start := processCPU(), time.Now()
			refused, err := parallel(g, slice, func(j int) (bool, error) {
				return incs[i](ctx, keys[(r*slice+j)%len(keys)])
			})
			d, cl := time.Since(start), processCPU()-cl0
			if err != nil {
				b.Fatalf("%s: %v", peerContenders[i].name, err)
			}
			if len(keys) > 1 && refused > 0 {
				b.Fatalf("%s: %d of %d calls refused on 10k keys; they are meant to be admitted", peerContenders[i].name, refused, slice)
			}
			cpu1, reads1, err := serverSample(stats)
			if err != nil {
				b.Fatal(err)
			}
			st1, err := commandStat(stats, "evalsha")
			if err != nil {
				b.Fatal(err)
			}
			s := &sums[i]
			s.elapsed += d
			s.client += cl
			s.serverCPU += cpu1 - cpu0
			s.evalUsec += st1.Usec - st0.Usec
			s.evalCalls += st1.Calls - st0.Calls
			s.reads += reads1 - reads0
			s.refused += refused
			ops[i] = float64(slice) / d.Seconds()
		}
		for i := range n {
			ratios[i] = append(ratios[i], ops[i]/ops[0])
		}
	}
	b.StopTimer()
	calls := float64(slice * peerRounds)
	for i, ct := range peerContenders {
		s := sums[i]
		b.ReportMetric(calls/s.elapsed.Seconds(), ct.name+"-ops/s")
		b.ReportMetric(float64(s.client.Microseconds())/calls, ct.name+"-client-µs/op")
		b.ReportMetric(s.serverCPU*1e6/calls, ct.name+"-servercpu-µs/op")
		if s.evalCalls > 0 {
			b.ReportMetric(s.evalUsec/float64(s.evalCalls), ct.name+"-server-µs/op")
		}
		b.ReportMetric(float64(s.reads)/calls, ct.name+"-reads/op")
		b.ReportMetric(float64(s.refused)/calls, ct.name+"-refused/op")
		if i > 0 {
			rs := slices.Clone(ratios[i])
			slices.Sort(rs)
			b.ReportMetric((rs[(len(rs)-1)/2]+rs[len(rs)/2])/2, ct.name+"/rate")
		}
	}
}
