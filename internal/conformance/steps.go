package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

type opKind int

const (
	opInc opKind = iota
	opIsAllowed
	opGet
	opReset
)

// step is one call of a table: advance the clock, call, compare.
type step struct {
	advance time.Duration
	op      opKind
	key     string
	rate    limiter.Rate
	n       int64
	want    limiter.Decision // for Inc and IsAllowed
	usage   limiter.Usage    // for Get
}

func inc(key string, rate limiter.Rate, n int64, want limiter.Decision) step {
	return step{op: opInc, key: key, rate: rate, n: n, want: want}
}

func isAllowed(key string, want limiter.Decision) step {
	return step{op: opIsAllowed, key: key, want: want}
}

func get(key string, want limiter.Usage) step { return step{op: opGet, key: key, usage: want} }

func reset(key string) step { return step{op: opReset, key: key} }

// after returns s preceded by an advance of the clock by d (a negative d
// steps it back).
func after(d time.Duration, s step) step { s.advance = d; return s }

// table is one scenario: a fresh provider built with opts runs steps in
// order on a fresh clock.
type table struct {
	name  string
	opts  []limiter.Option
	steps []step
	// check runs after the steps (extra assertions such as draw counts).
	check func(t *testing.T)
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// year is the clock jump of the tables "clock jumps a year ahead and back".
const year = 365 * 24 * time.Hour

// clockJumpSteps is the table "clock jumps a year ahead and back" at 10/s
// over W = 1 s, B = 100 ms (buckets live 1100 ms), for a strategy whose
// admissions are ok and whose refusal of refuseN units of a full key, its
// newest bucket 1099 ms ahead, is refused. A key whose newest bucket
// starts W + B or more after now is dead, not held for the length of the
// jump (docs/algorithms.md, Clocks that jump); less than W + B ahead, it
// counts until that bucket dies.
func clockJumpSteps(ok func(limit, remaining int64, reset time.Duration) limiter.Decision, refuseN int64, refused limiter.Decision) []step {
	return []step{
		inc("k", ten, 10, ok(10, 0, ms(1100))),
		after(year, inc("k", ten, 8, ok(10, 2, ms(1100)))),
		after(-year, inc("k", ten, 1, ok(10, 9, ms(1100)))),
		isAllowed("k", ok(10, 9, ms(1100))),
		get("k", limiter.Usage{Used: 1, Limit: 10}),
		inc("b", ten, 10, ok(10, 0, ms(1100))),
		after(-ms(1099), inc("b", ten, refuseN, refused)),
		after(-ms(1), isAllowed("b", unknown)),
		get("b", limiter.Usage{}),
		inc("b", ten, 1, ok(10, 9, ms(1100))),
	}
}

// runTables runs every table against a fresh provider from f.
func runTables(t *testing.T, f Factory, tables []table) {
	t.Helper()
	for _, tc := range tables {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewClock()
			l := f(t, clk, tc.opts...)
			defer closeLimiter(t, l)
			ctx := context.Background()
			for i, s := range tc.steps {
				if s.advance != 0 {
					clk.Advance(s.advance)
				}
				at := clk.Now().Sub(Start)
				switch s.op {
				case opInc:
					got, err := l.Inc(ctx, s.key, s.rate, s.n)
					if err != nil {
						t.Fatalf("step %d at +%v: Inc(%q, %v, %d) error: %v", i, at, s.key, s.rate, s.n, err)
					}
					if !Same(got, s.want) {
						t.Errorf("step %d at +%v: Inc(%q, %v, %d) =\n\t%s\nwant\t%s", i, at, s.key, s.rate, s.n, Format(got), Format(s.want))
					}
				case opIsAllowed:
					got, err := l.IsAllowed(ctx, s.key)
					if err != nil {
						t.Fatalf("step %d at +%v: IsAllowed(%q) error: %v", i, at, s.key, err)
					}
					if !Same(got, s.want) {
						t.Errorf("step %d at +%v: IsAllowed(%q) =\n\t%s\nwant\t%s", i, at, s.key, Format(got), Format(s.want))
					}
				case opGet:
					got, err := l.Get(ctx, s.key)
					if err != nil {
						t.Fatalf("step %d at +%v: Get(%q) error: %v", i, at, s.key, err)
					}
					if got != s.usage {
						t.Errorf("step %d at +%v: Get(%q) = %+v, want %+v", i, at, s.key, got, s.usage)
					}
				case opReset:
					if err := l.Reset(ctx, s.key); err != nil {
						t.Fatalf("step %d at +%v: Reset(%q) error: %v", i, at, s.key, err)
					}
				}
			}
			if tc.check != nil {
				tc.check(t)
			}
		})
	}
}

func closeLimiter(t *testing.T, l limiter.Limiter) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// Same reports whether two decisions agree on every field. Factors are
// compared exactly: every provider rounds them to parts per million.
func Same(a, b limiter.Decision) bool { return a == b }

// Format prints a decision on one line for failure messages.
func Format(d limiter.Decision) string {
	return fmt.Sprintf("{suppressed=%v allowed=%v limit=%d remaining=%d retry=%v reset=%v factor=%.6f never=%v degraded=%v}",
		d.Suppressed, d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.SuppressionFactor, d.Never, d.Degraded)
}

// Decision builders for tables.
func allowed(limit, remaining int64, reset time.Duration) limiter.Decision {
	return limiter.Decision{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
}

func rejected(limit, remaining int64, retry, reset time.Duration) limiter.Decision {
	return limiter.Decision{Limit: limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

func never(limit, remaining int64, reset time.Duration) limiter.Decision {
	return limiter.Decision{Limit: limit, Remaining: remaining, ResetAfter: reset, Never: true}
}

// unknown is IsAllowed's answer for a key with no state.
var unknown = limiter.Decision{Allowed: true}

// RunErrors checks that bad input returns the documented sentinel errors,
// never a panic, and that a closed limiter returns ErrClosed.
func RunErrors(t *testing.T, f Factory) {
	t.Helper()
	ctx := context.Background()
	l := f(t, NewClock(), limiter.WithWindow(time.Second))
	ok := limiter.PerSecond(10)
	long := string(make([]byte, 513))
	cases := []struct {
		name string
		key  string
		rate limiter.Rate
		n    int64
		want error
	}{
		{"NaN rate", "k", limiter.PerSecond(nan()), 1, limiter.ErrInvalidRate},
		{"+Inf rate", "k", limiter.PerSecond(inf(1)), 1, limiter.ErrInvalidRate},
		{"-Inf rate", "k", limiter.PerSecond(inf(-1)), 1, limiter.ErrInvalidRate},
		{"zero rate", "k", limiter.PerSecond(0), 1, limiter.ErrInvalidRate},
		{"negative rate", "k", limiter.PerSecond(-3), 1, limiter.ErrInvalidRate},
		{"zero Rate value", "k", limiter.Rate{}, 1, limiter.ErrInvalidRate},
		{"Every zero duration", "k", limiter.Every(1, 0), 1, limiter.ErrInvalidRate},
		{"huge rate", "k", limiter.PerSecond(1e300), 1, limiter.ErrInvalidRate},
		{"capacity below one", "k", limiter.PerSecond(0.5), 1, limiter.ErrCapacityTooSmall},
		{"negative cost", "k", ok, -1, limiter.ErrInvalidCost},
		{"most negative cost", "k", ok, math.MinInt64, limiter.ErrInvalidCost},
		{"empty key", "", ok, 1, errKey},
		{"oversized key", long, ok, 1, errKey},
	}
	for _, c := range cases {
		_, err := l.Inc(ctx, c.key, c.rate, c.n)
		if !errorsIs(err, c.want) {
			t.Errorf("%s: Inc(%.10q, %v, %d) error = %v, want %v", c.name, c.key, c.rate, c.n, err, c.want)
		}
	}
	for _, k := range []string{"", long} {
		if _, err := l.IsAllowed(ctx, k); !errorsIs(err, errKey) {
			t.Errorf("IsAllowed(%.10q) error = %v, want key.ErrInvalid", k, err)
		}
		if _, err := l.Get(ctx, k); !errorsIs(err, errKey) {
			t.Errorf("Get(%.10q) error = %v, want key.ErrInvalid", k, err)
		}
		if err := l.Reset(ctx, k); !errorsIs(err, errKey) {
			t.Errorf("Reset(%.10q) error = %v, want key.ErrInvalid", k, err)
		}
	}
	// Nothing above may have recorded anything.
	if u, err := l.Get(ctx, "k"); err != nil || u != (limiter.Usage{}) {
		t.Errorf("Get(k) after refused calls = %+v, %v; want zero usage", u, err)
	}
	closeLimiter(t, l)
	if _, err := l.Inc(ctx, "k", ok, 1); !errors.Is(err, limiter.ErrClosed) {
		t.Errorf("Inc after Close error = %v, want ErrClosed", err)
	}
	if _, err := l.IsAllowed(ctx, "k"); !errors.Is(err, limiter.ErrClosed) {
		t.Errorf("IsAllowed after Close error = %v, want ErrClosed", err)
	}
	if _, err := l.Get(ctx, "k"); !errors.Is(err, limiter.ErrClosed) {
		t.Errorf("Get after Close error = %v, want ErrClosed", err)
	}
	if err := l.Reset(ctx, "k"); !errors.Is(err, limiter.ErrClosed) {
		t.Errorf("Reset after Close error = %v, want ErrClosed", err)
	}
}

// ConfigErrors checks that a provider constructor rejects every bad option
// with ErrInvalidConfig. newFn builds and closes a provider.
func ConfigErrors(t *testing.T, newFn func(opts ...limiter.Option) error) {
	t.Helper()
	cases := []struct {
		name string
		opts []limiter.Option
	}{
		{"zero window", []limiter.Option{limiter.WithWindow(0)}},
		{"negative window", []limiter.Option{limiter.WithWindow(-time.Second)}},
		{"oversized window", []limiter.Option{limiter.WithWindow(32 * 24 * time.Hour)}},
		{"sub-millisecond window", []limiter.Option{limiter.WithWindow(1500 * time.Microsecond)}},
		{"zero bucket", []limiter.Option{limiter.WithBucket(0)}},
		{"bucket larger than window", []limiter.Option{limiter.WithWindow(time.Second), limiter.WithBucket(2 * time.Second)}},
		{"too many buckets", []limiter.Option{limiter.WithWindow(time.Hour), limiter.WithBucket(time.Millisecond)}},
		{"one bucket too many", []limiter.Option{limiter.WithWindow(501 * time.Millisecond), limiter.WithBucket(time.Millisecond)}},
		{"sub-millisecond bucket", []limiter.Option{limiter.WithBucket(1500 * time.Microsecond)}},
		{"hard factor below one", []limiter.Option{limiter.WithHardLimitFactor(0.5)}},
		{"hard factor NaN", []limiter.Option{limiter.WithHardLimitFactor(nan())}},
		{"hard factor Inf", []limiter.Option{limiter.WithHardLimitFactor(inf(1))}},
		{"negative suppression cache", []limiter.Option{limiter.WithSuppressionCache(-time.Millisecond)}},
		{"nil clock", []limiter.Option{limiter.WithClock(nil)}},
		{"nil random", []limiter.Option{limiter.WithRandom(nil)}},
		{"empty prefix", []limiter.Option{limiter.WithPrefix("")}},
		{"prefix with brace", []limiter.Option{limiter.WithPrefix("a{b")}},
		{"prefix with space", []limiter.Option{limiter.WithPrefix("a b")}},
		{"prefix with glob", []limiter.Option{limiter.WithPrefix("a*")}},
	}
	for _, c := range cases {
		if err := newFn(c.opts...); !errors.Is(err, limiter.ErrInvalidConfig) {
			t.Errorf("%s: New error = %v, want ErrInvalidConfig", c.name, err)
		}
	}
	if err := newFn(limiter.WithWindow(time.Hour), limiter.WithBucket(7200*time.Millisecond)); err != nil {
		t.Errorf("New with exactly 500 buckets (settings.MaxBuckets): %v", err)
	}
}
