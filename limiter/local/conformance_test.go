package local_test

import (
	"context"
	"testing"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
)

func absolute(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
	t.Helper()
	l, err := local.NewAbsolute(append(opts, limiter.WithClock(clk.Now))...)
	if err != nil {
		t.Fatalf("NewAbsolute: %v", err)
	}
	return l
}

func suppressed(t *testing.T, clk *conformance.Clock, opts ...limiter.Option) limiter.Limiter {
	t.Helper()
	l, err := local.NewSuppressed(append(opts, limiter.WithClock(clk.Now))...)
	if err != nil {
		t.Fatalf("NewSuppressed: %v", err)
	}
	return l
}

func TestAbsoluteConformance(t *testing.T)   { conformance.RunAbsolute(t, absolute) }
func TestSuppressedConformance(t *testing.T) { conformance.RunSuppressed(t, suppressed) }

func TestConfigErrors(t *testing.T) {
	conformance.ConfigErrors(t, func(opts ...limiter.Option) error {
		l, err := local.NewAbsolute(opts...)
		if err == nil {
			return l.Close(context.Background())
		}
		return err
	})
	conformance.ConfigErrors(t, func(opts ...limiter.Option) error {
		l, err := local.NewSuppressed(opts...)
		if err == nil {
			return l.Close(context.Background())
		}
		return err
	})
}

func TestAbsoluteSets(t *testing.T) {
	conformance.RunSets(t, conformance.AbsoluteStrategy, absolute)
}

func TestSuppressedSets(t *testing.T) {
	conformance.RunSets(t, conformance.SuppressedStrategy, suppressed)
}

func TestSetConcurrent(t *testing.T) {
	conformance.RunSetConcurrent(t, absolute, absolute, 64, 40, 20, 100)
}

// TestTwoWindows: one limit name with two windows in sets keeps both
// bounds (limiter.ErrWindowConflict); two local limiters share nothing.
func TestTwoWindows(t *testing.T) {
	t.Run("Absolute", func(t *testing.T) { conformance.RunTwoWindows(t, conformance.AbsoluteStrategy, absolute, nil) })
	t.Run("Suppressed", func(t *testing.T) { conformance.RunTwoWindows(t, conformance.SuppressedStrategy, suppressed, nil) })
}
