package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// fuzzRates are the rates a fuzzed call may pass (W = 1 s): capacities 5,
// 10, 20 and 1; the hard capacities with F = 1.5 are 7, 15, 30 and 1.
var fuzzRates = []limiter.Rate{limiter.PerSecond(5), limiter.PerSecond(10), limiter.PerSecond(20), limiter.PerSecond(1.5)}

// fuzzMaxHard is the largest hard capacity of fuzzRates.
const fuzzMaxHard = 30

// RunFuzzOps decodes data into a sequence of calls (three bytes each: the
// call, its cost, and a clock step or rate), runs them on a fresh a and b
// on one fake clock that also steps back, and fails at the first decision
// or usage on which they differ or that breaks a count invariant: usage
// and declined units never negative, an absolute key never declines, no
// key holds more accepted units than the largest hard capacity, and
// Remaining within [0, Limit]. Costs range over 0, small numbers, just
// above the capacities and up to math.MaxInt64.
func RunFuzzOps(t *testing.T, s Strategy, data []byte, a, b Factory) {
	if len(data) > 3*400 {
		data = data[:3*400]
	}
	clk := NewClock()
	opts := []limiter.Option{limiter.WithWindow(time.Second), limiter.WithBucket(100 * time.Millisecond), limiter.WithClock(clk.Now)}
	if s == SuppressedStrategy {
		opts = append(opts, limiter.WithHardLimitFactor(1.5), limiter.WithSuppressionCache(50*time.Millisecond))
	}
	mk := func(f Factory) limiter.Limiter {
		o := append([]limiter.Option(nil), opts...)
		if s == SuppressedStrategy {
			o = append(o, limiter.WithRandom(NewRand(3)))
		}
		l := f(t, clk, o...)
		t.Cleanup(func() { closeLimiter(t, l) })
		return l
	}
	la, lb := mk(a), mk(b)
	ctx := context.Background()
	keys := []string{"k", "user:2"}
	for i := 0; i+2 < len(data); i += 3 {
		op, x, y := data[i], data[i+1], data[i+2]
		k := keys[op>>7]
		switch op % 8 {
		case 0, 1, 2, 3, 4:
			var n int64
			switch x % 8 {
			case 0:
				n = 0
			case 6:
				n = fuzzMaxHard + int64(x>>3)
			case 7:
				n = 1<<62 + int64(x)<<50
			default:
				n = 1 + int64(x>>3)%12
			}
			rate := fuzzRates[int(y)%len(fuzzRates)]
			da, ea := la.Inc(ctx, k, rate, n)
			db, eb := lb.Inc(ctx, k, rate, n)
			if ea != nil || eb != nil {
				t.Fatalf("op %d: Inc(%q, %v, %d) errors %v / %v", i/3, k, rate, n, ea, eb)
			}
			if !Same(da, db) {
				t.Fatalf("op %d at %v: Inc(%q, %v, %d) =\n\t%s\nwant\t%s", i/3, clk.Now().Sub(Start), k, rate, n, Format(db), Format(da))
			}
			if da.Remaining < 0 || da.Remaining > da.Limit || da.RetryAfter < 0 || da.ResetAfter < 0 {
				t.Fatalf("op %d: Inc(%q, %v, %d) = %s: a number out of range", i/3, k, rate, n, Format(da))
			}
		case 5:
			da, ea := la.IsAllowed(ctx, k)
			db, eb := lb.IsAllowed(ctx, k)
			if ea != nil || eb != nil || !Same(da, db) {
				t.Fatalf("op %d at %v: IsAllowed(%q) = %s, %v; want %s, %v", i/3, clk.Now().Sub(Start), k, Format(db), eb, Format(da), ea)
			}
		case 6:
			ua, ea := la.Get(ctx, k)
			ub, eb := lb.Get(ctx, k)
			if ea != nil || eb != nil || ua != ub {
				t.Fatalf("op %d at %v: Get(%q) = %+v, %v; want %+v, %v", i/3, clk.Now().Sub(Start), k, ub, eb, ua, ea)
			}
			if ua.Used < 0 || ua.Declined < 0 || ua.Used > fuzzMaxHard || s == AbsoluteStrategy && ua.Declined != 0 {
				t.Fatalf("op %d: Get(%q) = %+v breaks a count invariant", i/3, k, ua)
			}
		case 7:
			step := time.Duration(int8(y)) * 7 * time.Millisecond // −896 ms to +889 ms
			if y == 127 {
				step = 3 * time.Second
			}
			clk.Advance(step)
		}
	}
}
