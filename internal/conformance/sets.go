package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/check"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// part is one limit's expected part of a set decision.
type part struct {
	remaining     int64
	retry, reset  time.Duration
	refused       bool
	never         bool
	factorPPM     int64
	limitOverride int64 // 0: the set's capacity of that limit
}

// setWant is an expected set decision: the set's suppressed, allowed, never,
// factor and RetryAfter, the index of the binding limit (whose Limit,
// Remaining and ResetAfter the set reports) and every limit's part.
type setWant struct {
	suppressed bool
	allowed    bool
	never      bool
	factorPPM  int64
	retry      time.Duration
	binding    int
	parts      []part
}

// build turns w into the SetDecision a provider must return for set.
func (w setWant) build(set *limiter.Set) limiter.SetDecision {
	d := limiter.SetDecision{Limits: make([]limiter.LimitDecision, len(w.parts))}
	for i, p := range w.parts {
		c, _ := limiter.Capacity(set.At(i).Rate, set.At(i).Window)
		if p.limitOverride != 0 {
			c = p.limitOverride
		}
		d.Limits[i] = limiter.LimitDecision{Name: set.At(i).Name, Limit: c, Remaining: p.remaining,
			RetryAfter: p.retry, ResetAfter: p.reset, Refused: p.refused, Never: p.never,
			SuppressionFactor: float64(p.factorPPM) / 1e6}
	}
	b := d.Limits[w.binding]
	d.Decision = limiter.Decision{Allowed: w.allowed, Suppressed: w.suppressed, Limit: b.Limit, Remaining: b.Remaining,
		RetryAfter: w.retry, ResetAfter: b.ResetAfter, Never: w.never, SuppressionFactor: float64(w.factorPPM) / 1e6}
	return d
}

// SameSet reports whether two set decisions agree on every field.
func SameSet(a, b limiter.SetDecision) bool {
	if a.Decision != b.Decision || len(a.Limits) != len(b.Limits) {
		return false
	}
	for i := range a.Limits {
		if a.Limits[i] != b.Limits[i] {
			return false
		}
	}
	return true
}

// FormatSet prints a set decision for failure messages.
func FormatSet(d limiter.SetDecision) string {
	var b strings.Builder
	b.WriteString(Format(d.Decision))
	for _, l := range d.Limits {
		fmt.Fprintf(&b, "\n\t\t%s: limit=%d remaining=%d retry=%v reset=%v factor=%.6f refused=%v never=%v",
			l.Name, l.Limit, l.Remaining, l.RetryAfter, l.ResetAfter, l.SuppressionFactor, l.Refused, l.Never)
	}
	return b.String()
}

// setStep is one call of a set table.
type setStep struct {
	advance time.Duration
	op      opKind // opInc, opIsAllowed, opGet, opReset
	n       int64
	want    setWant
	usage   []limiter.Usage
}

func sinc(n int64, w setWant) setStep { return setStep{op: opInc, n: n, want: w} }
func sget(u ...limiter.Usage) setStep { return setStep{op: opGet, usage: u} }
func safter(d time.Duration, s setStep) setStep {
	s.advance = d
	return s
}

type setTable struct {
	name  string
	opts  []limiter.Option
	set   *limiter.Set
	steps []setStep
	check func(t *testing.T)
}

// mustSet builds a set of the tables; a bad table is a bug in the suite.
func mustSet(ls ...limiter.Limit) *limiter.Set {
	s, err := limiter.NewSet(ls...)
	if err != nil {
		panic(err)
	}
	return s
}

func lim(name string, rate limiter.Rate, w, b time.Duration) limiter.Limit {
	return limiter.Limit{Name: name, Rate: rate, Window: w, Bucket: b}
}

// ok and no build expected parts.
func ok(remaining int64, reset time.Duration) part { return part{remaining: remaining, reset: reset} }
func no(remaining int64, retry, reset time.Duration) part {
	return part{remaining: remaining, retry: retry, reset: reset, refused: true}
}

func absoluteSetTables() []setTable {
	// a: 5 per 1 s, b: 8 per 2 s, both with B = 100 ms: buckets live
	// 1100 and 2100 ms.
	ab := mustSet(lim("a", limiter.PerSecond(5), time.Second, ms(100)), lim("b", limiter.PerSecond(4), 2*time.Second, ms(100)))
	return []setTable{
		{name: "one limit refusing", set: mustSet(
			lim("per-second", limiter.PerSecond(5), time.Second, ms(100)),
			lim("per-minute", limiter.PerMinute(20), time.Minute, time.Second)), steps: []setStep{
			sinc(3, setWant{allowed: true, parts: []part{ok(2, ms(1100)), ok(17, ms(61000))}}),
			sinc(3, setWant{retry: ms(1100), parts: []part{no(2, ms(1100), ms(1100)), ok(17, ms(61000))}}),
			sget(limiter.Usage{Used: 3, Limit: 5}, limiter.Usage{Used: 3, Limit: 20}),
			safter(ms(1100), sinc(3, setWant{allowed: true, parts: []part{ok(2, ms(1100)), ok(14, ms(61000))}})),
			sget(limiter.Usage{Used: 3, Limit: 5}, limiter.Usage{Used: 6, Limit: 20}),
		}},
		{name: "two refusing with different retry times", set: ab, steps: []setStep{
			sinc(4, setWant{allowed: true, parts: []part{ok(1, ms(1100)), ok(4, ms(2100))}}),
			safter(ms(500), sinc(1, setWant{allowed: true, parts: []part{ok(0, ms(1100)), ok(3, ms(2100))}})),
			safter(ms(100), sinc(4, setWant{retry: ms(1500),
				parts: []part{no(0, ms(500), ms(1000)), no(3, ms(1500), ms(2000))}})),
			// One ms early, b still refuses; on time, both have room.
			safter(ms(1499), sinc(4, setWant{retry: ms(1), binding: 1,
				parts: []part{ok(5, 0), no(3, ms(1), ms(501))}})),
			safter(ms(1), sinc(4, setWant{allowed: true, parts: []part{ok(1, ms(1100)), ok(3, ms(2100))}})),
			sget(limiter.Usage{Used: 4, Limit: 5}, limiter.Usage{Used: 5, Limit: 8}),
		}},
		// Each limit applies the rule of the single tables of that name
		// with its own W + B: a step back of 1100 ms kills a's key
		// (newest exactly W + B ahead) and keeps b's (2100 ms).
		{name: "clock jumps a year ahead and back", set: ab, steps: []setStep{
			sinc(5, setWant{allowed: true, parts: []part{ok(0, ms(1100)), ok(3, ms(2100))}}),
			safter(year, sinc(4, setWant{allowed: true, parts: []part{ok(1, ms(1100)), ok(4, ms(2100))}})),
			safter(-year, sinc(1, setWant{allowed: true, parts: []part{ok(4, ms(1100)), ok(7, ms(2100))}})),
			sget(limiter.Usage{Used: 1, Limit: 5}, limiter.Usage{Used: 1, Limit: 8}),
			safter(-ms(1100), sget(limiter.Usage{}, limiter.Usage{Used: 1, Limit: 8})),
			sinc(5, setWant{allowed: true, parts: []part{ok(0, ms(1100)), ok(2, ms(3200))}}),
			sget(limiter.Usage{Used: 5, Limit: 5}, limiter.Usage{Used: 6, Limit: 8}),
		}},
		{name: "n = 0 is a peek", set: ab, steps: []setStep{
			sinc(0, setWant{allowed: true, parts: []part{ok(5, 0), ok(8, 0)}}),
			sget(limiter.Usage{}, limiter.Usage{}),
			sinc(5, setWant{allowed: true, parts: []part{ok(0, ms(1100)), ok(3, ms(2100))}}),
			sinc(0, setWant{retry: ms(1100), parts: []part{no(0, ms(1100), ms(1100)), ok(3, ms(2100))}}),
			{op: opIsAllowed, want: setWant{retry: ms(1100), parts: []part{no(0, ms(1100), ms(1100)), ok(3, ms(2100))}}},
			sget(limiter.Usage{Used: 5, Limit: 5}, limiter.Usage{Used: 5, Limit: 8}),
		}},
		{name: "n over one capacity", set: ab, steps: []setStep{
			sinc(6, setWant{never: true, parts: []part{{remaining: 5, refused: true, never: true}, ok(8, 0)}}),
			sinc(9, setWant{never: true, parts: []part{{remaining: 5, refused: true, never: true}, {remaining: 8, refused: true, never: true}}}),
			sinc(math.MaxInt64, setWant{never: true, parts: []part{{remaining: 5, refused: true, never: true}, {remaining: 8, refused: true, never: true}}}),
			sget(limiter.Usage{}, limiter.Usage{}),
			sinc(5, setWant{allowed: true, parts: []part{ok(0, ms(1100)), ok(3, ms(2100))}}),
		}},
		{name: "windows 1000 times apart", set: mustSet(
			lim("burst", limiter.Every(2, ms(100)), ms(100), ms(10)),
			lim("long", limiter.Every(5, 100*time.Second), 100*time.Second, time.Second)), steps: []setStep{
			sinc(2, setWant{allowed: true, parts: []part{ok(0, ms(110)), ok(3, ms(101000))}}),
			sinc(1, setWant{retry: ms(110), parts: []part{no(0, ms(110), ms(110)), ok(3, ms(101000))}}),
			safter(ms(110), sinc(2, setWant{allowed: true, parts: []part{ok(0, ms(110)), ok(1, ms(100890))}})),
			safter(ms(110), sinc(2, setWant{retry: ms(100780), binding: 1,
				parts: []part{ok(2, 0), no(1, ms(100780), ms(100780))}})),
			sget(limiter.Usage{}, limiter.Usage{Used: 4, Limit: 5}),
		}},
	}
}

func suppressedSetTables() []setTable {
	// a: S = 4, H = 8; b: S = 6, H = 12 (F = 2), both over 1 s with
	// B = 100 ms, no factor cache: f = 1 − S/observed.
	seq := NewSeq(0.5, 0.5, 0.2, 0.9, 0.5)
	opts := []limiter.Option{limiter.WithHardLimitFactor(2), limiter.WithSuppressionCache(0), limiter.WithRandom(seq.Float64)}
	jseq := NewSeq(0.5)
	jopts := []limiter.Option{limiter.WithHardLimitFactor(2), limiter.WithSuppressionCache(0), limiter.WithRandom(jseq.Float64)}
	set := mustSet(lim("a", limiter.PerSecond(4), time.Second, ms(100)), lim("b", limiter.PerSecond(6), time.Second, ms(100)))
	return []setTable{{name: "factors combine by their maximum", opts: opts, set: set, steps: []setStep{
		sinc(4, setWant{allowed: true, parts: []part{ok(0, ms(1100)), ok(2, ms(1100))}}),
		// a is above S with f = 1 − 4/4 = 0: suppressed, admitted.
		sinc(2, setWant{suppressed: true, allowed: true, parts: []part{ok(0, ms(1100)), ok(0, ms(1100))}}),
		// a: f = 1 − 4/6; b: f = 1 − 6/6 = 0. The draw 0.2 is below a's
		// factor: refused by a alone, recorded as declined in both.
		sinc(2, setWant{suppressed: true, factorPPM: 333333, retry: ms(1100), parts: []part{
			{remaining: 0, retry: ms(1100), reset: ms(1100), refused: true, factorPPM: 333333},
			{remaining: 0, retry: ms(1100), reset: ms(1100)}}}),
		// a: 6 + 6 > H = 8, factor 1; b: f = 1 − 6/8.
		sinc(6, setWant{suppressed: true, factorPPM: 1e6, retry: ms(1100), parts: []part{
			{remaining: 0, retry: ms(1100), reset: ms(1100), refused: true, factorPPM: 1e6},
			{remaining: 0, retry: ms(1100), reset: ms(1100), factorPPM: 250000}}}),
		// 9 > H of a: never; recorded as H + 1 = 9 in a and 9 in b.
		sinc(9, setWant{suppressed: true, never: true, factorPPM: 1e6, parts: []part{
			{remaining: 0, reset: ms(1100), refused: true, never: true, factorPPM: 1e6},
			{remaining: 0, retry: ms(1100), reset: ms(1100), refused: true, factorPPM: 1e6}}}),
		sget(limiter.Usage{Used: 6, Declined: 17, Limit: 4}, limiter.Usage{Used: 6, Declined: 17, Limit: 6}),
	}, check: wantDraws(seq, 5)}, {
		// As in the absolute set table of that name.
		name: "clock jumps a year ahead and back", opts: jopts, set: set, steps: []setStep{
			sinc(4, setWant{allowed: true, parts: []part{ok(0, ms(1100)), ok(2, ms(1100))}}),
			safter(year, sinc(3, setWant{allowed: true, parts: []part{ok(1, ms(1100)), ok(3, ms(1100))}})),
			safter(-year, sinc(1, setWant{allowed: true, parts: []part{ok(3, ms(1100)), ok(5, ms(1100))}})),
			sget(limiter.Usage{Used: 1, Limit: 4}, limiter.Usage{Used: 1, Limit: 6}),
		}, check: wantDraws(jseq, 3)}}
}

// RunSets runs the set step tables of strategy s against f's providers,
// which must implement limiter.SetLimiter, then checks that a set's state
// is apart from the key's single limit and the set errors.
func RunSets(t *testing.T, s Strategy, f Factory) {
	t.Helper()
	tables := absoluteSetTables()
	if s == SuppressedStrategy {
		tables = suppressedSetTables()
	}
	for _, tc := range tables {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewClock()
			l := f(t, clk, tc.opts...)
			defer closeLimiter(t, l)
			sl := setLimiter(t, l)
			ctx := context.Background()
			for i, st := range tc.steps {
				if st.advance != 0 {
					clk.Advance(st.advance)
				}
				at := clk.Now().Sub(Start)
				switch st.op {
				case opInc, opIsAllowed:
					var got limiter.SetDecision
					var err error
					if st.op == opInc {
						got, err = sl.IncSet(ctx, "k", tc.set, st.n)
					} else {
						got, err = sl.IncSet(ctx, "k", tc.set, 0)
					}
					if err != nil {
						t.Fatalf("step %d at +%v: IncSet(k, %d) error: %v", i, at, st.n, err)
					}
					if want := st.want.build(tc.set); !SameSet(got, want) {
						t.Errorf("step %d at +%v: IncSet(k, %d) =\n\t%s\nwant\t%s", i, at, st.n, FormatSet(got), FormatSet(want))
					}
				case opGet:
					got, err := sl.GetSet(ctx, "k", tc.set)
					if err != nil || fmt.Sprint(got) != fmt.Sprint(st.usage) {
						t.Errorf("step %d at +%v: GetSet(k) = %+v, %v, want %+v", i, at, got, err, st.usage)
					}
				}
			}
			if tc.check != nil {
				tc.check(t)
			}
		})
	}
	t.Run("apart from the single limit", func(t *testing.T) { runSetApart(t, s, f) })
	t.Run("errors", func(t *testing.T) { runSetErrors(t, f) })
}

func setLimiter(t *testing.T, l limiter.Limiter) limiter.SetLimiter {
	t.Helper()
	sl, ok := l.(limiter.SetLimiter)
	if !ok {
		t.Fatalf("%T does not implement limiter.SetLimiter", l)
	}
	return sl
}

// runSetApart checks that a set's limits and the key's single limit keep
// separate counts, and that ResetSet forgets only the set's limits.
func runSetApart(t *testing.T, s Strategy, f Factory) {
	clk := NewClock()
	opts := []limiter.Option{limiter.WithWindow(time.Second)}
	if s == SuppressedStrategy {
		opts = append(opts, limiter.WithHardLimitFactor(1), limiter.WithRandom(NewSeq(0.5).Float64))
	}
	l := f(t, clk, opts...)
	defer closeLimiter(t, l)
	sl := setLimiter(t, l)
	ctx := context.Background()
	set := mustSet(lim("x", limiter.PerSecond(3), time.Second, 0))
	if _, err := l.Inc(ctx, "k", limiter.PerSecond(10), 2); err != nil {
		t.Fatal(err)
	}
	if d, err := sl.IncSet(ctx, "k", set, 3); err != nil || !d.Allowed {
		t.Fatalf("IncSet(k, 3) = %s, %v; want admitted: the single limit's units are not the set's", FormatSet(d), err)
	}
	if u, err := l.Get(ctx, "k"); err != nil || u.Used != 2 {
		t.Errorf("Get(k) = %+v, %v; want Used 2", u, err)
	}
	if err := sl.ResetSet(ctx, "k", set); err != nil {
		t.Fatal(err)
	}
	if u, err := sl.GetSet(ctx, "k", set); err != nil || u[0] != (limiter.Usage{}) {
		t.Errorf("GetSet after ResetSet = %+v, %v; want zero", u, err)
	}
	if u, err := l.Get(ctx, "k"); err != nil || u.Used != 2 {
		t.Errorf("Get(k) after ResetSet = %+v, %v; want Used 2", u, err)
	}
}

func runSetErrors(t *testing.T, f Factory) {
	l := f(t, NewClock(), limiter.WithWindow(time.Second))
	sl := setLimiter(t, l)
	ctx := context.Background()
	set := mustSet(lim("x", limiter.PerSecond(3), time.Second, 0))
	if _, err := sl.IncSet(ctx, "k", nil, 1); !errors.Is(err, limiter.ErrInvalidConfig) {
		t.Errorf("IncSet(nil set) error = %v, want ErrInvalidConfig", err)
	}
	if _, err := sl.IncSet(ctx, "k", &limiter.Set{}, 1); !errors.Is(err, limiter.ErrInvalidConfig) {
		t.Errorf("IncSet(zero set) error = %v, want ErrInvalidConfig", err)
	}
	if _, err := sl.IncSet(ctx, "k", set, -1); !errors.Is(err, limiter.ErrInvalidCost) {
		t.Errorf("IncSet(n = -1) error = %v, want ErrInvalidCost", err)
	}
	if _, err := sl.IncSet(ctx, "", set, 1); !errors.Is(err, key.ErrInvalid) {
		t.Errorf("IncSet(empty key) error = %v, want key.ErrInvalid", err)
	}
	// Each call's errors name it.
	for _, n := range []int64{0, 1} {
		if _, err := sl.IncSet(ctx, "", set, n); !errors.Is(err, key.ErrInvalid) || !strings.Contains(err.Error(), "inc set:") {
			t.Errorf("IncSet(empty key, %d) error = %v, want key.ErrInvalid naming the call", n, err)
		}
	}
	if _, err := sl.GetSet(ctx, "", set); !errors.Is(err, key.ErrInvalid) {
		t.Errorf("GetSet(empty key) error = %v, want key.ErrInvalid", err)
	}
	if err := sl.ResetSet(ctx, "k", nil); !errors.Is(err, limiter.ErrInvalidConfig) {
		t.Errorf("ResetSet(nil set) error = %v, want ErrInvalidConfig", err)
	}
	if u, err := sl.GetSet(ctx, "k", set); err != nil || u[0] != (limiter.Usage{}) {
		t.Errorf("GetSet after refused calls = %+v, %v; want zero", u, err)
	}
	closeLimiter(t, l)
	if _, err := sl.IncSet(ctx, "k", set, 1); !errors.Is(err, limiter.ErrClosed) {
		t.Errorf("IncSet after Close error = %v, want ErrClosed", err)
	}
}

// traceSets are the sets of RunSetTrace: three limits each, two tiers
// sharing names with different rates, and windows from 200 ms to 20 s.
func traceSets(s Strategy) []*limiter.Set {
	return []*limiter.Set{
		mustSet(lim("fast", limiter.PerSecond(20), ms(200), ms(20)), lim("mid", limiter.PerSecond(8), 2*time.Second, ms(100)), lim("slow", limiter.PerSecond(3), 20*time.Second, time.Second)),
		mustSet(lim("fast", limiter.PerSecond(40), ms(200), ms(20)), lim("mid", limiter.PerSecond(12), 2*time.Second, ms(100)), lim("slow", limiter.PerSecond(5), 20*time.Second, time.Second)),
		mustSet(lim("slow", limiter.PerSecond(2), 20*time.Second, 0), lim("other", limiter.PerSecond(10), time.Second, 0), lim("mid", limiter.PerSecond(6), 2*time.Second, ms(100))),
	}
}

// RunSetTrace feeds a and b the same random trace of set calls (IncSet
// with costs from 0 (a peek) to beyond a capacity, GetSet, ResetSet,
// and single-limit Incs on the same keys) on one fake clock and fails at
// the first difference. It returns how many set calls were admitted and
// refused.
func RunSetTrace(t *testing.T, s Strategy, steps int, seed uint64, a, b Factory) (admitted, refused int) {
	t.Helper()
	clk := NewClock()
	opts := []limiter.Option{limiter.WithWindow(time.Second), limiter.WithBucket(50 * time.Millisecond)}
	if s == SuppressedStrategy {
		opts = append(opts, limiter.WithHardLimitFactor(1.5), limiter.WithSuppressionCache(100*time.Millisecond))
	}
	withRand := func() []limiter.Option {
		if s != SuppressedStrategy {
			return opts
		}
		return append(append([]limiter.Option(nil), opts...), limiter.WithRandom(NewRand(seed)))
	}
	la := a(t, clk, withRand()...)
	defer closeLimiter(t, la)
	lb := b(t, clk, withRand()...)
	defer closeLimiter(t, lb)
	sa, sb := setLimiter(t, la), setLimiter(t, lb)
	sets := traceSets(s)
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := context.Background()
	for i := 0; i < steps; i++ {
		switch x := rng.IntN(100); {
		case x < 30:
		case x < 85:
			clk.Advance(time.Duration(1+rng.IntN(60)) * time.Millisecond)
		case x < 98:
			clk.Advance(time.Duration(60+rng.IntN(1500)) * time.Millisecond)
		default:
			clk.Advance(time.Duration(5000+rng.IntN(20000)) * time.Millisecond)
		}
		k := traceKeys[rng.IntN(3)]
		set := sets[rng.IntN(len(sets))]
		at := clk.Now().Sub(Start)
		switch x := rng.IntN(100); {
		case x < 75:
			var n int64
			switch y := rng.IntN(100); {
			case y < 8:
				n = 0
			case y < 75:
				n = 1
			case y < 97:
				n = int64(2 + rng.IntN(4))
			default:
				n = int64(5 + rng.IntN(60))
			}
			da, ea := sa.IncSet(ctx, k, set, n)
			db, eb := sb.IncSet(ctx, k, set, n)
			if bothConflict(ea, eb) {
				continue
			}
			if ea != nil || eb != nil {
				t.Fatalf("step %d at +%v: IncSet(%q, %v, %d) errors: %v / %v", i, at, k, set, n, ea, eb)
			}
			if !SameSet(da, db) {
				t.Fatalf("step %d at +%v: IncSet(%q, %v, %d) differs:\n\ta: %s\n\tb: %s", i, at, k, set, n, FormatSet(da), FormatSet(db))
			}
			if da.Allowed {
				admitted++
			} else {
				refused++
			}
		case x < 83:
			da, ea := sa.IncSet(ctx, k, set, 0)
			db, eb := sb.IncSet(ctx, k, set, 0)
			if bothConflict(ea, eb) {
				continue
			}
			if ea != nil || eb != nil || !SameSet(da, db) {
				t.Fatalf("step %d at +%v: IncSet(%q, %v, 0) differs:\n\ta: %s, %v\n\tb: %s, %v", i, at, k, set, FormatSet(da), ea, FormatSet(db), eb)
			}
		case x < 93:
			ua, ea := sa.GetSet(ctx, k, set)
			ub, eb := sb.GetSet(ctx, k, set)
			if bothConflict(ea, eb) {
				continue
			}
			if ea != nil || eb != nil || fmt.Sprint(ua) != fmt.Sprint(ub) {
				t.Fatalf("step %d at +%v: GetSet(%q, %v) = %+v, %v / %+v, %v", i, at, k, set, ua, ea, ub, eb)
			}
		case x < 98:
			da, ea := la.Inc(ctx, k, limiter.PerSecond(5), 1)
			db, eb := lb.Inc(ctx, k, limiter.PerSecond(5), 1)
			if ea != nil || eb != nil || !Same(da, db) {
				t.Fatalf("step %d at +%v: Inc(%q) differs: %s, %v / %s, %v", i, at, k, Format(da), ea, Format(db), eb)
			}
		default:
			if ea, eb := sa.ResetSet(ctx, k, set), sb.ResetSet(ctx, k, set); ea != nil || eb != nil {
				t.Fatalf("step %d at +%v: ResetSet(%q) errors: %v / %v", i, at, k, ea, eb)
			}
		}
	}
	return admitted, refused
}

// bothConflict reports whether both providers refused a call with
// ErrWindowConflict: the traces give one limit name two windows, and
// both providers must refuse the same calls.
func bothConflict(ea, eb error) bool {
	return errors.Is(ea, limiter.ErrWindowConflict) && errors.Is(eb, limiter.ErrWindowConflict)
}

// RunSetConcurrent runs g goroutines of IncSet on one key with the limits
// {c1 per 1 s, c2 per 1 min} (absolute strategy) through phases of a fake
// clock: within a phase every call sees the same instant, between phases
// the clock moves 150 ms, so that each admission's instant is known
// exactly. It checks that no span of either window ever holds more than
// its capacity, and replays the admissions on a local limiter after each
// phase: every one must be admitted there too, and GetSet must agree, so
// no refused call left a trace in any limit.
func RunSetConcurrent(t *testing.T, f, local Factory, g, phases int, c1, c2 int64) {
	t.Helper()
	clk := NewClock()
	l := f(t, clk)
	defer closeLimiter(t, l)
	ref := local(t, clk)
	defer closeLimiter(t, ref)
	sl, sr := setLimiter(t, l), setLimiter(t, ref)
	set := mustSet(
		limiter.Limit{Name: "second", Rate: limiter.PerSecond(float64(c1)), Window: time.Second},
		limiter.Limit{Name: "minute", Rate: limiter.PerMinute(float64(c2)), Window: time.Minute})
	ctx := context.Background()
	var adm [2][]check.Admission
	refused := 0
	for p := 0; p < phases; p++ {
		now := clk.Now()
		for _, r := range SetPhase(t, sl, "hot", set, g, p) {
			if !r.D.Allowed {
				refused++
				continue
			}
			for j := range adm {
				adm[j] = append(adm[j], check.Admission{At: now, Units: r.N})
			}
			if d, err := sr.IncSet(ctx, "hot", set, r.N); err != nil || !d.Allowed {
				t.Fatalf("phase %d: replaying an admission of %d refused: %s, %v", p, r.N, FormatSet(d), err)
			}
		}
		got, err := sl.GetSet(ctx, "hot", set)
		want, rerr := sr.GetSet(ctx, "hot", set)
		if err != nil || rerr != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("phase %d: GetSet = %+v, %v; the replay of the admissions gives %+v, %v", p, got, err, want, rerr)
		}
		clk.Advance(150 * time.Millisecond)
	}
	for j, w := range []time.Duration{time.Second, time.Minute} {
		c, _ := limiter.Capacity(set.At(j).Rate, set.At(j).Window)
		if most, at := check.MostInAnyWindow(adm[j], w); most > c {
			t.Errorf("limit %s: %d units in the window of %v from %v, capacity %d", set.At(j).Name, most, w, at.Sub(Start), c)
		}
	}
	if len(adm[0]) == 0 || refused == 0 {
		t.Errorf("%d admitted and %d refused calls; want both", len(adm[0]), refused)
	}
	t.Logf("%d goroutines × %d phases: %d admitted, %d refused", g, phases, len(adm[0]), refused)
}

// PhaseCall is one call of SetPhase: its cost and the decision.
type PhaseCall struct {
	N int64
	D limiter.SetDecision
}

// SetPhase runs phase p of a concurrency test: g goroutines each call
// IncSet once on key, goroutine i with a cost of 1 + (i + p) mod 3, all
// at once. It fails the test on any error and returns the calls in
// goroutine order.
func SetPhase(t *testing.T, sl limiter.SetLimiter, key string, set *limiter.Set, g, p int) []PhaseCall {
	t.Helper()
	out := make([]PhaseCall, g)
	errs := make([]error, g)
	var wg sync.WaitGroup
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := int64(1 + (i+p)%3)
			d, err := sl.IncSet(context.Background(), key, set, n)
			out[i], errs[i] = PhaseCall{n, d}, err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("phase %d: IncSet %d: %v", p, i, err)
		}
	}
	return out
}
