package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/check"
	"github.com/sluice-go/sluice/limiter"
)

// RunHostile feeds providers a (the reference, normally local) and b the
// same hostile but valid calls and fails at the first decision or usage on
// which they differ, or at a count that is not exact:
//
//   - HugeCosts: 64 calls of n = 2^47 at 100 per minute (2^53 units in
//     all, past what a Lua number counts exactly), then 1,000 calls of n = 1: no more than the hard capacity is admitted in the window and
//     Get counts every unit as the documented rule says (a request over the
//     capacity records nothing under the absolute strategy and H + 1 units
//     under the suppressed one).
//   - DeclinedSaturates (suppressed): refused units stop at 2^52 per key,
//     plus one unit per further refusal, and the totals stay exact.
//   - ClockEdges: WithClock at the Unix epoch, before 1970, stepping back
//     over dead buckets (reads must not have dropped them), and a 31-day
//     window stepped back 20 days, whose ResetAfter passes 2^32 ms.
func RunHostile(t *testing.T, s Strategy, a, b Factory) {
	t.Run("HugeCosts", func(t *testing.T) { runHugeCosts(t, s, a, b) })
	if s == SuppressedStrategy {
		t.Run("DeclinedSaturates", func(t *testing.T) { runDeclinedSaturates(t, a, b) })
	}
	t.Run("ClockEdges", func(t *testing.T) { runClockEdges(t, s, a, b) })
}

// pair is two providers on one fake clock, compared call by call.
type pair struct {
	t      *testing.T
	clk    *Clock
	a, b   limiter.Limiter
	ctx    context.Context
	nCalls int
}

func newPair(t *testing.T, s Strategy, clk *Clock, a, b Factory, opts ...limiter.Option) *pair {
	opts = append(opts, limiter.WithClock(clk.Now))
	mk := func(f Factory) limiter.Limiter {
		o := append([]limiter.Option(nil), opts...)
		if s == SuppressedStrategy {
			o = append(o, limiter.WithRandom(NewRand(9)))
		}
		l := f(t, clk, o...)
		t.Cleanup(func() { closeLimiter(t, l) })
		return l
	}
	return &pair{t: t, clk: clk, a: mk(a), b: mk(b), ctx: context.Background()}
}

func (p *pair) inc(k string, rate limiter.Rate, n int64) limiter.Decision {
	p.t.Helper()
	p.nCalls++
	da, ea := p.a.Inc(p.ctx, k, rate, n)
	db, eb := p.b.Inc(p.ctx, k, rate, n)
	if ea != nil || eb != nil {
		p.t.Fatalf("call %d: Inc(%q, %v, %d) errors: %v / %v", p.nCalls, k, rate, n, ea, eb)
	}
	if !Same(da, db) {
		p.t.Fatalf("call %d at %v: Inc(%q, %v, %d) =\n\t%s\nwant\t%s", p.nCalls, p.clk.Now().UTC(), k, rate, n, Format(db), Format(da))
	}
	return da
}

func (p *pair) isAllowed(k string) limiter.Decision {
	p.t.Helper()
	da, ea := p.a.IsAllowed(p.ctx, k)
	db, eb := p.b.IsAllowed(p.ctx, k)
	if ea != nil || eb != nil {
		p.t.Fatalf("IsAllowed(%q) errors: %v / %v", k, ea, eb)
	}
	if !Same(da, db) {
		p.t.Fatalf("at %v: IsAllowed(%q) =\n\t%s\nwant\t%s", p.clk.Now().UTC(), k, Format(db), Format(da))
	}
	return da
}

func (p *pair) get(k string) limiter.Usage {
	p.t.Helper()
	ua, ea := p.a.Get(p.ctx, k)
	ub, eb := p.b.Get(p.ctx, k)
	if ea != nil || eb != nil {
		p.t.Fatalf("Get(%q) errors: %v / %v", k, ea, eb)
	}
	if ua != ub {
		p.t.Fatalf("at %v: Get(%q) = %+v, want %+v", p.clk.Now().UTC(), k, ub, ua)
	}
	return ua
}

// runHugeCosts offers 2^53 units in huge refused calls: were they counted
// as offered, a Lua number could not hold the total exactly. 64 calls of
// 2^47 reach that total as 8,192 calls of 2^40 did, in a 128th of the
// round trips (each call is a decision compared on both providers, and the
// refusals are identical, so the many calls proved nothing more).
func runHugeCosts(t *testing.T, s Strategy, a, b Factory) {
	const huge, calls = int64(1) << 47, 64
	rate := limiter.PerMinute(100) // C = S = H = 100 over the default minute
	p := newPair(t, s, NewClock(), a, b)
	for i := 0; i < calls; i++ {
		if d := p.inc("k", rate, huge); d.Allowed || !d.Never {
			t.Fatalf("Inc(k, 2^47) = %s, want refused with Never", Format(d))
		}
	}
	var adm []check.Admission
	var admitted int64
	for i := 0; i < 1000; i++ {
		p.clk.Advance(time.Millisecond)
		if d := p.inc("k", rate, 1); d.Allowed {
			admitted++
			adm = append(adm, check.Admission{At: p.clk.Now(), Units: 1})
		}
	}
	if most, _ := check.MostInAnyWindow(adm, time.Minute); most > 100 || admitted > 100 {
		t.Fatalf("after 64 calls of 2^47: %d of 1,000 Inc(1) admitted, %d in one window; want at most 100", admitted, most)
	}
	u := p.get("k")
	want := limiter.Usage{Used: admitted, Limit: 100}
	if s == SuppressedStrategy {
		want.Declined = calls*101 + (1000 - admitted) // each huge request counts as H + 1 = 101
	} else if admitted != 100 {
		t.Fatalf("absolute: %d of 1,000 Inc(1) admitted after refused huge requests, want exactly 100 (they record nothing)", admitted)
	}
	if u != want {
		t.Fatalf("Get(k) = %+v, want %+v", u, want)
	}
	t.Logf("admitted %d of 1,000; Get %+v", admitted, u)
}

func runDeclinedSaturates(t *testing.T, a, b Factory) {
	const c = int64(1) << 50
	rate := limiter.PerSecond(float64(c)) // S = H = 2^50 over 1 s
	p := newPair(t, SuppressedStrategy, NewClock(), a, b, limiter.WithWindow(time.Second))
	if d := p.inc("k", rate, c); !d.Allowed {
		t.Fatalf("Inc(k, 2^50) = %s, want admitted", Format(d))
	}
	for i := 0; i < 6; i++ {
		if d := p.inc("k", rate, c); d.Allowed {
			t.Fatalf("refusal %d: Inc(k, 2^50) = %s, want refused", i, Format(d))
		}
	}
	// 2^50 accepted; four refusals of 2^50 reach 2^52, the next two record
	// one unit each.
	want := limiter.Usage{Used: c, Declined: 1<<52 + 2, Limit: c}
	if u := p.get("k"); u != want {
		t.Fatalf("Get(k) = %+v, want %+v", u, want)
	}
}

func runClockEdges(t *testing.T, s Strategy, a, b Factory) {
	rate := limiter.PerSecond(10) // C = 10 over 1 s
	opts := []limiter.Option{limiter.WithWindow(time.Second), limiter.WithBucket(100 * time.Millisecond)}
	t.Run("Epoch", func(t *testing.T) {
		clk := NewClock()
		p := newPair(t, s, clk, a, b, opts...)
		clk.Advance(time.Unix(0, 0).Sub(clk.Now())) // exactly 0 ms
		p.inc("k", rate, 4)
		if u := p.get("k"); u.Used != 4 {
			t.Fatalf("Get(k) at the Unix epoch = %+v, want Used 4 (the instant 0 is a time, not \"use TIME\")", u)
		}
		clk.Advance(-150 * time.Millisecond) // before 1970
		p.inc("k", rate, 3)
		clk.Advance(-500 * time.Millisecond)
		p.inc("k", rate, 2) // opens a bucket at −650 ms
		clk.Advance(1200 * time.Millisecond)
		p.isAllowed("k")
		p.inc("k", rate, 5)
		p.get("k")
	})
	t.Run("StepBack", func(t *testing.T) {
		clk := NewClock()
		p := newPair(t, s, clk, a, b, opts...)
		p.inc("k", rate, 6)
		clk.Advance(500 * time.Millisecond)
		p.inc("k", rate, 3)
		clk.Advance(900 * time.Millisecond) // the first bucket is dead
		p.isAllowed("k")
		p.get("k")
		p.inc("k", rate, 0)                   // a peek
		clk.Advance(-1200 * time.Millisecond) // back before it died
		if u := p.get("k"); u.Used != 9 {
			t.Fatalf("Get(k) after the clock stepped back = %+v, want Used 9: a read dropped a bucket", u)
		}
		p.isAllowed("k")
		p.inc("k", rate, 1)
		p.inc("k", rate, 1)
		clk.Advance(2 * time.Second)
		p.inc("k", rate, 2)
		p.get("k")
	})
	t.Run("LongWindowResetAfter", func(t *testing.T) {
		clk := NewClock()
		const day = 24 * time.Hour
		p := newPair(t, s, clk, a, b, limiter.WithWindow(31*day))
		r := limiter.Every(10, 31*day)
		p.inc("k", r, 2)
		clk.Advance(-20 * day)
		d := p.inc("k", r, 1)
		if d.ResetAfter < time.Duration(1<<32)*time.Millisecond || d.Remaining != 7 {
			t.Fatalf("Inc after a 20-day step back = %s, want 7 remaining and ResetAfter past 2^32 ms", Format(d))
		}
		p.isAllowed("k")
	})
}
