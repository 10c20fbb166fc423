package redissup_test

import (
	"testing"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

// TestSetTTL: the expiry rule of a set's hashes (sup_set.lua,
// docs/data-model.md) on miniredis, whose TTLs and TIME run on the fake
// clock, with two windows for one limit name (conformance.RunSetTTL).
func TestSetTTL(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	mr, c, clk := miniAt(t)
	prefix := redistest.Prefix(t)
	l := newLimiter(t, c, limiter.WithPrefix(prefix))
	conformance.RunSetTTL(t, conformance.SuppressedStrategy, mr, c, clk, l, prefix)
}

// TestSetTTLRealRedis: the same rule on a real server with its own clock
// (conformance.RunSetTTLReal).
func TestSetTTLRealRedis(t *testing.T) {
	c := redistest.Real(t).Client(t)
	prefix := redistest.Prefix(t)
	l := newLimiter(t, c, limiter.WithPrefix(prefix))
	conformance.RunSetTTLReal(t, conformance.SuppressedStrategy, c, l, prefix)
}
