package conformance

import (
	"testing"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
)

// LocalAbsolute is the Factory of the local absolute provider on clk: the
// reference the other providers' decisions are compared with.
func LocalAbsolute(t *testing.T, clk *Clock, opts ...limiter.Option) limiter.Limiter {
	t.Helper()
	l, err := local.NewAbsolute(append(opts, limiter.WithClock(clk.Now))...)
	if err != nil {
		t.Fatalf("local.NewAbsolute: %v", err)
	}
	return l
}
