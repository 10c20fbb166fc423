package hybrid_test

import (
	"testing"

	"github.com/sluice-go/sluice/internal/redistest"
)

// The tests that call t.Parallel at their top (the conformance suites
// with leases of one unit and the leased step tables, the set step tables
// and trace against the local provider, the two-window traces) decide on a
// fake clock with no timeout (newAbsolute and newSuppressed give
// WithTimeout(0)): a loaded machine slows them but sheds none of their
// calls, so they run after the sequential tests, two at a time, beside
// each other. The fault, outage, fleet and close tests (real time, the
// default options) stay sequential, run first, and have the package to
// themselves.
func TestMain(m *testing.M) { redistest.Main(m) }
