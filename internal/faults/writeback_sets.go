package faults

import (
	"slices"
	"testing"
)

// RunWriteBackSets is the IncSet half of RunWriteBack, for a provider
// that runs the halves with cells of its own (the hybrid, whose set calls
// are the Redis providers' own and lease nothing): a fleet of three
// through each outage of the write-back matrix, or only the cells named,
// calling IncSet on a set of two limits, with RunWriteBack's checks. The
// calling package's TestMain must run redistest.Main.
func RunWriteBackSets(t *testing.T, newLimiter NewLimiter, cells ...string) {
	runWriteBackCells(t, newLimiter, setCalls, cells)
}

// RunWriteBackInc is the Inc half of RunWriteBack, for the hybrid, whose
// single-limit calls lease: a fleet of three through each outage of the
// write-back matrix, or only the cells named, calling Inc on one limit,
// with RunWriteBack's checks.
func RunWriteBackInc(t *testing.T, newLimiter NewLimiter, cells ...string) {
	runWriteBackCells(t, newLimiter, func(*testing.T) fleetCalls { return singleCalls() }, cells)
}

// runWriteBackCells runs the cells named (all when none is) with what
// calls returns.
func runWriteBackCells(t *testing.T, newLimiter NewLimiter, calls func(*testing.T) fleetCalls, cells []string) {
	for _, c := range writeBackCells() {
		if len(cells) > 0 && !slices.Contains(cells, c.Name) {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			runWriteBackCell(t, c, newLimiter, calls(t))
		})
	}
}
