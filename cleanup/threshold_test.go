package cleanup

import (
	"testing"

	"github.com/sluice-go/sluice/internal/settings"
)

// TestMaxTrimThreshold checks that the documented constant follows the
// providers' limit: a hash holds at most W/B + 1 buckets.
func TestMaxTrimThreshold(t *testing.T) {
	if MaxTrimThreshold != settings.MaxBuckets+1 {
		t.Errorf("MaxTrimThreshold = %d, want settings.MaxBuckets + 1 = %d", MaxTrimThreshold, settings.MaxBuckets+1)
	}
}
