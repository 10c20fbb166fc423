package hybrid_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/faults"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
)

func newFaultLimiter(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter {
	t.Helper()
	l, err := hybrid.NewAbsolute(c, opts...)
	if err != nil {
		t.Fatalf("hybrid.NewAbsolute: %v", err)
	}
	return l
}

// TestFaultMatrix: each failure of the Redis providers' fault matrix under
// 16 goroutines of Inc load on real Redis (docs/operations.md, When Redis
// fails).
func TestFaultMatrix(t *testing.T) { faults.RunMatrix(t, newFaultLimiter) }

// TestFailurePolicies: each policy during an outage, bad input, and
// reconciliation of the fallback's units, alone and in a fleet of three.
func TestFailurePolicies(t *testing.T) { faults.RunPolicies(t, "hybrid", newFaultLimiter) }

func newSupFaultLimiter(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter {
	t.Helper()
	l, err := hybrid.NewSuppressed(c, opts...)
	if err != nil {
		t.Fatalf("hybrid.NewSuppressed: %v", err)
	}
	return l
}

// TestSuppressedFaultMatrix: the fault matrix for the suppressed hybrid.
func TestSuppressedFaultMatrix(t *testing.T) { faults.RunMatrix(t, newSupFaultLimiter) }

// TestSuppressedFailurePolicies: the failure policies for the suppressed
// hybrid.
func TestSuppressedFailurePolicies(t *testing.T) {
	faults.RunPolicies(t, "hybrid", newSupFaultLimiter)
}

// TestLoud: a misconfiguration is loud by default, and Ping names the
// address, for both hybrids (docs/operations.md, Start-up check and
// logging).
func TestLoud(t *testing.T) {
	t.Run("Absolute", func(t *testing.T) { faults.RunLoud(t, newFaultLimiter) })
	t.Run("Suppressed", func(t *testing.T) { faults.RunLoud(t, newSupFaultLimiter) })
}

// TestSetWriteBack: a fleet of three absolute hybrids calling IncSet
// through each outage of the write-back matrix, and the suppressed ones
// through a stop and a kill (its set calls differ from the absolute
// hybrid's only in the script, which redissup's TestWriteBack runs through
// every cell): what the fallbacks admit is written back to every limit of
// the set, and no window holds more than the matrix allows.
func TestSetWriteBack(t *testing.T) {
	t.Run("Absolute", func(t *testing.T) { faults.RunWriteBackSets(t, newFaultLimiter) })
	t.Run("Suppressed", func(t *testing.T) {
		faults.RunWriteBackSets(t, newSupFaultLimiter, "SIGSTOP2s", "KilledAndRestarted")
	})
}

// TestGrace: in the grace after an outage a full fallback share refuses
// what a lease would otherwise answer from memory, for both hybrids.
func TestGrace(t *testing.T) {
	t.Run("Absolute", func(t *testing.T) { faults.RunGrace(t, newFaultLimiter, 10) })
	t.Run("Suppressed", func(t *testing.T) {
		faults.RunGrace(t, newSupFaultLimiter, 15, limiter.WithHardLimitFactor(1.5))
	})
}

// TestIncWriteBack: a fleet of three hybrids calling Inc through outages
// of the write-back matrix: what the fallbacks admit is written back, and
// in the grace after it no instance admits past its share from a lease.
// The cells are those whose instances come back at staggered times (a
// pause, then each probe finds Redis a few ms after another's), where a
// lease once answered past the share (213 and 214 in a span of C = 200,
// bound 210); the other cells' write-back is the Redis providers' own
// (their TestWriteBack), and TestGrace checks the suppressed hybrid's
// grace alone.
func TestIncWriteBack(t *testing.T) {
	t.Run("Absolute", func(t *testing.T) {
		faults.RunWriteBackInc(t, newFaultLimiter, "SIGSTOP2s", "ClientPause3000")
	})
	t.Run("Suppressed", func(t *testing.T) { faults.RunWriteBackInc(t, newSupFaultLimiter, "SIGSTOP2s") })
}
