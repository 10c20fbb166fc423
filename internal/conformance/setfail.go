package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// RunSetFailurePolicies checks sets under each failure policy with Redis
// gone (a miniredis closed after one call): FallbackLocal enforces every
// limit in the instance, FailOpen admits, FailClosed refuses (Rejected, or
// Suppressed with factor 1), FailError returns the error; every answer
// that did not come from Redis is Degraded, a nil set is still an error,
// and GetSet and ResetSet fail. newLimiter builds the provider on c with
// opts.
func RunSetFailurePolicies(t *testing.T, s Strategy, newLimiter func(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter) {
	ctx := context.Background()
	set := mustSet(
		limiter.Limit{Name: "second", Rate: limiter.PerSecond(3), Window: time.Second},
		limiter.Limit{Name: "minute", Rate: limiter.PerMinute(100), Window: time.Minute})
	for _, pp := range redistest.Policies {
		p := pp.P
		t.Run(pp.Name, func(t *testing.T) {
			mr, c := redistest.Mini(t)
			l := newLimiter(t, c, limiter.WithFailurePolicy(p), limiter.WithTimeout(time.Second))
			defer closeLimiter(t, l)
			sl := setLimiter(t, l)
			if d, err := sl.IncSet(ctx, "k", set, 1); err != nil || !d.Allowed || d.Degraded {
				t.Fatalf("IncSet with Redis up = %s, %v; want admitted, not degraded", FormatSet(d), err)
			}
			mr.Close()
			admitted := 0
			for i := 0; i < 10; i++ {
				d, err := sl.IncSet(ctx, "k", set, 1)
				if p == limiter.FailError {
					if err == nil {
						t.Fatalf("IncSet under FailError with Redis down = %s, want an error", FormatSet(d))
					}
					continue
				}
				if err != nil || !d.Degraded || len(d.Limits) != 2 {
					t.Fatalf("IncSet with Redis down = %s, %v; want a degraded decision on 2 limits", FormatSet(d), err)
				}
				switch {
				case d.Allowed:
					admitted++
				case s == SuppressedStrategy && (!d.Suppressed || d.SuppressionFactor != 1):
					t.Errorf("refused IncSet with Redis down = %s, want Suppressed with factor 1", FormatSet(d))
				case s == AbsoluteStrategy && d.Suppressed:
					t.Errorf("refused IncSet with Redis down = %s, want a refusal not Suppressed", FormatSet(d))
				}
			}
			want := map[limiter.FailurePolicy]int{limiter.FallbackLocal: 3, limiter.FailOpen: 10, limiter.FailClosed: 0}[p]
			if admitted != want {
				t.Errorf("%v admitted %d of 10 calls with Redis down, want %d", p, admitted, want)
			}
			if _, err := sl.IncSet(ctx, "k", nil, 1); !errors.Is(err, limiter.ErrInvalidConfig) {
				t.Errorf("IncSet(nil set) with Redis down error = %v, want ErrInvalidConfig", err)
			}
			if _, err := sl.GetSet(ctx, "k", set); err == nil {
				t.Errorf("GetSet with Redis down: no error, want one")
			}
			if err := sl.ResetSet(ctx, "k", set); err == nil {
				t.Errorf("ResetSet with Redis down: no error, want one")
			}
		})
	}
}
