package redisabs_test

import (
	"testing"

	"github.com/sluice-go/sluice/internal/conformance"
)

// FuzzAgainstLocal runs fuzzed sequences of calls (any cost, clock steps
// back and forth) on the local provider and on miniredis, which must agree
// on every decision and keep every count exact. `make test` runs it for a
// few seconds; `make fuzz` for longer.
func FuzzAgainstLocal(f *testing.F) {
	f.Add([]byte{0, 9, 0, 1, 7, 1, 7, 3, 0, 2, 255, 2, 6, 0, 0, 7, 200, 0, 5, 0, 0})
	f.Add([]byte{0, 95, 2, 1, 95, 2, 7, 14, 0, 0, 6, 2, 7, 130, 0, 6, 0, 0, 128, 9, 1, 134, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		conformance.RunFuzzOps(t, conformance.AbsoluteStrategy, data, localAbsolute, onMini)
	})
}
