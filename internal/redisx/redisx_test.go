package redisx

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
