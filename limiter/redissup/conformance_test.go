package redissup_test

import (
	"testing"

	"github.com/sluice-go/sluice/internal/conformance"
)

// The backends run in parallel: miniredis runs the scripts in this
// process, the servers in theirs. miniredis runs the suite's smaller
// statistics and concurrency checks (conformance.RunSuppressedMini), the
// servers the whole.
func TestConformance(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			if p.name == "Mini" {
				conformance.RunSuppressedMini(t, p.f)
				return
			}
			conformance.RunSuppressed(t, p.f)
		})
	}
}

// TestTrace runs the shared differential trace (F = 1.5, one identically
// seeded source per provider) against the local reference: 5,000 steps
// per seed on the servers, 2,000 on miniredis (its gopher-lua runs in
// this process, slowly under the race detector: 20 s of make test at
// 5,000), which still reach every regime checked below.
func TestTrace(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			steps := 5000
			if p.name == "Mini" {
				steps = 2000
			}
			for _, seed := range []uint64{1, 2} {
				st := conformance.RunTrace(t, conformance.SuppressedStrategy, steps, seed, localFactory, p.f)
				t.Logf("seed %d: %+v", seed, st)
				if st.Allowed == 0 || st.Suppressed == 0 || st.SuppressedAdmitted == 0 || st.Never == 0 || st.Peeks == 0 {
					t.Errorf("seed %d: trace missed a regime: %+v", seed, st)
				}
			}
		})
	}
}

// TestHostile compares hostile calls (huge costs, saturated declined
// totals, clock edges) with the local provider on miniredis and real
// Redis, in parallel as TestConformance.
func TestHostile(t *testing.T) {
	t.Parallel() // deterministic: see TestMain
	for _, p := range providers[:2] {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			conformance.RunHostile(t, conformance.SuppressedStrategy, localFactory, p.f)
		})
	}
}
