package hybrid_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
)

// TestOneRedisKeyPerKey: both hybrids keep one Redis key per limiter key,
// the hash of its strategy, whatever their leases, syncs and Close do: 1,000
// keys called once, then twice more 1 ms apart (leases, forward-dated
// ones included), through ticks of the sync, and after Close.
func TestOneRedisKeyPerKey(t *testing.T) {
	ctx := context.Background()
	for _, strategy := range []string{"abs", "sup"} {
		t.Run(strategy, func(t *testing.T) {
			c := redistest.Real(t).Client(t)
			prefix := redistest.Prefix(t)
			opts := []limiter.Option{limiter.WithPrefix(prefix), limiter.WithTimeout(5 * time.Second),
				hybrid.WithSyncInterval(10 * time.Millisecond)}
			var l limiter.Limiter
			var err error
			if strategy == "abs" {
				l, err = hybrid.NewAbsolute(c, opts...)
			} else {
				l, err = hybrid.NewSuppressed(c, opts...)
			}
			if err != nil {
				t.Fatal(err)
			}
			const n = 1000
			check := func(when string) {
				t.Helper()
				ks, err := c.Keys(ctx, prefix+":*").Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range ks {
					if !strings.HasSuffix(k, ":"+strategy+":h") {
						t.Errorf("%s: Redis key %q is not a %s hash", when, k, strategy)
					}
				}
				if len(ks) != n {
					t.Errorf("%s: %d Redis keys for %d limiter keys, want %d", when, len(ks), n, n)
				}
			}
			for r := 0; r < 3; r++ {
				for i := 0; i < n; i++ {
					if _, err := l.Inc(ctx, "user:"+strconv.Itoa(i), limiter.PerMinute(1000), 1); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(time.Millisecond)
			}
			check("after the calls")
			time.Sleep(100 * time.Millisecond) // ticks: renewals and releases
			check("after the ticks")
			if err := l.Close(ctx); err != nil {
				t.Fatal(err)
			}
			check("after Close")
		})
	}
}
