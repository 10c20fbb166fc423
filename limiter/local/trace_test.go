package local_test

import (
	"testing"

	"github.com/sluice-go/sluice/internal/conformance"
)

// The trace runner compares two providers; two local providers must agree
// with each other (a sanity check of the runner itself, and of determinism:
// no hidden wall clock or global randomness).
func TestTraceLocalAgreesWithItself(t *testing.T) {
	st := conformance.RunTrace(t, conformance.AbsoluteStrategy, 5000, 1, absolute, absolute)
	if st.Allowed == 0 || st.Rejected == 0 || st.Never == 0 || st.Peeks == 0 {
		t.Errorf("absolute trace missed a regime: %+v", st)
	}
	st = conformance.RunTrace(t, conformance.SuppressedStrategy, 5000, 2, suppressed, suppressed)
	if st.Allowed == 0 || st.Suppressed == 0 || st.SuppressedAdmitted == 0 || st.Never == 0 {
		t.Errorf("suppressed trace missed a regime: %+v", st)
	}
	t.Logf("suppressed trace: %+v", st)
}
