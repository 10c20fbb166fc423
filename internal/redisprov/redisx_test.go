package redisprov

import (
	"testing"

	"github.com/sluice-go/sluice/internal/window"
)

func TestDecisionRejectsMalformedReplies(t *testing.T) {
	ok := []any{int64(1), int64(0), int64(10), int64(0), int64(500), int64(900), int64(0), int64(0)}
	r, err := Decision(ok, 10, window.OutcomeAllowed, window.OutcomeRejected)
	if err != nil || r.Outcome != window.OutcomeRejected || r.RetryAfter != 500 || r.ResetAfter != 900 || r.Limit != 10 {
		t.Fatalf("Decision(%v) = %+v, %v", ok, r, err)
	}
	short := []any{int64(10), int64(7), int64(900)}
	if r, err := Decision(short, 0, window.OutcomeAllowed); err != nil ||
		r != (window.Result{Outcome: window.OutcomeAllowed, Allowed: true, Limit: 10, Remaining: 7, ResetAfter: 900}) {
		t.Fatalf("Decision(%v) = %+v, %v; want an admission with limit 10, remaining 7, reset 900", short, r, err)
	}
	packed := int64(7)<<32 | 900
	if r, err := Decision(packed, 10, window.OutcomeAllowed); err != nil ||
		r != (window.Result{Outcome: window.OutcomeAllowed, Allowed: true, Limit: 10, Remaining: 7, ResetAfter: 900}) {
		t.Fatalf("Decision(%d, 10) = %+v, %v; want an admission with limit 10, remaining 7, reset 900", packed, r, err)
	}
	wide := int64(1<<21-1)<<32 | (31*24*3600*1000 - 1) // the largest remaining and reset the form carries
	if r, err := Decision(wide, 1<<50, window.OutcomeAllowed); err != nil || r.Remaining != 1<<21-1 || r.ResetAfter != 31*24*3600*1000-1 || r.Limit != 1<<50 {
		t.Fatalf("Decision(%d, 2^50) = %+v, %v", wide, r, err)
	}
	for _, c := range []struct{ r, c int64 }{{-1, 10}, {packed, 0}} {
		if _, err := Decision(c.r, c.c, window.OutcomeAllowed); err == nil {
			t.Errorf("Decision(%d, %d) accepted a packed reply that is negative or has no capacity to go with it", c.r, c.c)
		}
	}
	bad := map[string]any{
		"not an array":     "OK",
		"short":            ok[:7],
		"four values":      ok[:4],
		"short, a string":  []any{int64(10), "7", int64(900)},
		"string value":     append(append([]any{}, ok[:7]...), "0"),
		"foreign outcome":  []any{int64(2), int64(0), int64(10), int64(0), int64(0), int64(0), int64(0), int64(0)},
		"allowed flag 2":   []any{int64(0), int64(2), int64(10), int64(0), int64(0), int64(0), int64(0), int64(0)},
		"factor above ppm": []any{int64(0), int64(1), int64(10), int64(0), int64(0), int64(0), int64(window.PPM + 1), int64(0)},
		"never flag -1":    []any{int64(0), int64(1), int64(10), int64(0), int64(0), int64(0), int64(0), int64(-1)},
	}
	for name, v := range bad {
		if _, err := Decision(v, 10, window.OutcomeAllowed, window.OutcomeRejected); err == nil {
			t.Errorf("%s: Decision(%v) accepted a malformed reply", name, v)
		}
	}
}

// TestDecisionReadsOneIntegerRefusals reads the one-integer form of a
// decision with nothing remaining (abs_inc.lua's refusals, sup_inc.lua's
// suppressed decisions), as the scripts compute it, at the ends of its
// ranges, and rejects the replies it cannot come from.
func TestDecisionReadsOneIntegerRefusals(t *testing.T) {
	abs := func(retry, reset int64) int64 { return -(retry<<26 + reset) - 1 }
	sup := func(f, allowed, retry, reset int64) int64 { return -(((f*2+allowed)<<16+retry)<<16 + reset) - 1 }
	for _, c := range []struct {
		r    int64
		sup  bool
		want window.Result
	}{
		{abs(500, 900), false, window.Result{Outcome: window.OutcomeRejected, Limit: 10, RetryAfter: 500, ResetAfter: 900}},
		{abs(1<<26-1, 1<<26-1), false, window.Result{Outcome: window.OutcomeRejected, Limit: 10, RetryAfter: 1<<26 - 1, ResetAfter: 1<<26 - 1}},
		{sup(900000, 0, 7, 9), true, window.Result{Outcome: window.OutcomeSuppressed, Limit: 10, RetryAfter: 7, ResetAfter: 9, FactorPPM: 900000}},
		{sup(window.PPM, 1, 1<<16-1, 1<<16-1), true, window.Result{Outcome: window.OutcomeSuppressed, Allowed: true, Limit: 10, RetryAfter: 1<<16 - 1, ResetAfter: 1<<16 - 1, FactorPPM: window.PPM}},
		{sup(0, 1, 0, 0), true, window.Result{Outcome: window.OutcomeSuppressed, Allowed: true, Limit: 10}},
	} {
		outcomes := []int64{window.OutcomeAllowed, window.OutcomeRejected}
		if c.sup {
			outcomes = []int64{window.OutcomeAllowed, window.OutcomeSuppressed}
		}
		if r, err := Decision(c.r, 10, outcomes...); err != nil || r != c.want {
			t.Errorf("Decision(%d, 10, %v) = %+v, %v; want %+v", c.r, outcomes, r, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		r, c int64
		sup  bool
	}{
		{"no capacity sent", abs(1, 1), 0, false},
		{"absolute retry of 2^26 ms", abs(1<<26, 1), 10, false},
		{"below -2^53", -1<<53 - 1, 10, true},
		{"factor above ppm", sup(window.PPM+1, 0, 1, 1), 10, true},
	} {
		outcomes := []int64{window.OutcomeAllowed, window.OutcomeRejected}
		if c.sup {
			outcomes = []int64{window.OutcomeAllowed, window.OutcomeSuppressed}
		}
		if r, err := Decision(c.r, c.c, outcomes...); err == nil {
			t.Errorf("%s: Decision(%d, %d) = %+v, want an error", c.name, c.r, c.c, r)
		}
	}
}

func TestBucketValue(t *testing.T) {
	for _, c := range []struct{ v, count, link int64 }{
		{3<<32 + 150, 3, 150},
		{(1<<21-1)<<32 + (1<<32 - 1), 1<<21 - 1, 1<<32 - 1}, // the largest linked count and link
		{-(1 << 40), 1 << 40, 0},                            // too large to link
		{7, 7, 0},                                           // a plain count (earlier layout)
	} {
		if count, link := BucketValue(c.v); count != c.count || link != c.link {
			t.Errorf("BucketValue(%d) = %d, %d; want %d, %d", c.v, count, link, c.count, c.link)
		}
	}
}
