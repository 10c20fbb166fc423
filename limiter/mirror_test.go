package limiter

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-go/sluice/internal/config"
)

// TestMirrorsConfig checks that the exported names this package defines
// for the configuration's values are those values: the policies convert
// to the same policy, and the configuration wraps the same sentinels.
func TestMirrorsConfig(t *testing.T) {
	for _, tc := range []struct {
		p    FailurePolicy
		want config.FailurePolicy
	}{
		{FallbackLocal, config.FallbackLocal},
		{FailOpen, config.FailOpen},
		{FailClosed, config.FailClosed},
		{FailError, config.FailError},
		{FailurePolicy(7), config.FailurePolicy(7)},
	} {
		if got := config.FailurePolicy(tc.p); got != tc.want {
			t.Errorf("config.FailurePolicy(%v) = %v, want %v", tc.p, got, tc.want)
		}
		if tc.p.String() != tc.want.String() {
			t.Errorf("%v.String() = %q, want %q", tc.want, tc.p.String(), tc.want.String())
		}
		c, err := config.New(WithFailurePolicy(tc.p))
		if valid := tc.p <= FailError; valid != (err == nil) {
			t.Errorf("config.New(WithFailurePolicy(%v)): %v", tc.p, err)
		} else if valid && c.Policy != tc.want {
			t.Errorf("WithFailurePolicy(%v): Policy = %v, want %v", tc.p, c.Policy, tc.want)
		}
	}
	for _, tc := range []struct {
		pub, internal error
	}{
		{ErrInvalidRate, config.ErrInvalidRate},
		{ErrInvalidConfig, config.ErrInvalidConfig},
		{ErrCapacityTooSmall, config.ErrCapacityTooSmall},
		{ErrInvalidCost, config.ErrInvalidCost},
		{ErrClosed, config.ErrClosed},
		{ErrUnavailable, config.ErrUnavailable},
	} {
		if !errors.Is(fmt.Errorf("op: %w", tc.internal), tc.pub) {
			t.Errorf("an error wrapping the configuration's %q does not match limiter's", tc.internal)
		}
	}
	if _, err := config.New(WithWindow(0)); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("config.New(WithWindow(0)) = %v, want ErrInvalidConfig", err)
	}
	if err := config.CheckCost(-1); !errors.Is(err, ErrInvalidCost) {
		t.Errorf("config.CheckCost(-1) = %v, want ErrInvalidCost", err)
	}
	// StateChange survives the round trip through the configuration's copy.
	sc := StateChange{Provider: "redisabs", Degraded: true, Cause: errors.New("x"), Policy: FailClosed,
		Duration: 3, Reconciled: 4, Unreconciled: 5, UnreconciledUnits: 6}
	if got := stateChange(internalStateChange(sc)); got != sc {
		t.Errorf("round trip of %+v = %+v", sc, got)
	}
	var got StateChange
	c, err := config.New(WithStateChange(func(s StateChange) { got = s }))
	if err != nil {
		t.Fatal(err)
	}
	c.OnStateChange(internalStateChange(sc))
	if got != sc {
		t.Errorf("WithStateChange hook got %+v, want %+v", got, sc)
	}
	if c, _ := config.New(WithStateChange(nil)); c.OnStateChange != nil {
		t.Error("WithStateChange(nil) set a hook")
	}
}
