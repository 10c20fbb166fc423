package redisx

import (
	"testing"

	"github.com/sluice-go/sluice/internal/window"
)

func TestDecisionRejectsMalformedReplies(t *testing.T) {
	ok := []any{int64(1), int64(0), int64(10), int64(0), int64(500), int64(900), int64(0), int64(0)}
	r, err := Decision(ok, window.OutcomeAllowed, window.OutcomeRejected)
	if err != nil || r.Outcome != window.OutcomeRejected || r.RetryAfter != 500 || r.ResetAfter != 900 || r.Limit != 10 {
		t.Fatalf("Decision(%v) = %+v, %v", ok, r, err)
	}
	short := []any{int64(10), int64(7), int64(900)}
	if r, err := Decision(short, window.OutcomeAllowed); err != nil ||
		r != (window.Result{Outcome: window.OutcomeAllowed, Allowed: true, Limit: 10, Remaining: 7, ResetAfter: 900}) {
		t.Fatalf("Decision(%v) = %+v, %v; want an admission with limit 10, remaining 7, reset 900", short, r, err)
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
		if _, err := Decision(v, window.OutcomeAllowed, window.OutcomeRejected); err == nil {
			t.Errorf("%s: Decision(%v) accepted a malformed reply", name, v)
		}
	}
}
