package redissup_test

import (
	"testing"

	"github.com/sluice-go/sluice/internal/conformance"
)

func TestConformanceMini(t *testing.T) { conformance.RunSuppressed(t, miniFactory) }

func TestConformanceReal(t *testing.T) { conformance.RunSuppressed(t, realFactory) }

// TestTrace runs the shared differential trace (F = 1.5, one seeded source
// per provider) against the local reference.
func TestTrace(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    conformance.Factory
	}{{"mini", miniFactory}, {"real", realFactory}} {
		t.Run(tc.name, func(t *testing.T) {
			for _, seed := range []uint64{1, 2} {
				st := conformance.RunTrace(t, conformance.SuppressedStrategy, 5000, seed, localFactory, tc.f)
				t.Logf("seed %d: %+v", seed, st)
				if st.Allowed == 0 || st.Suppressed == 0 || st.SuppressedAdmitted == 0 || st.Never == 0 || st.Peeks == 0 {
					t.Errorf("seed %d: trace missed a regime: %+v", seed, st)
				}
			}
		})
	}
}
