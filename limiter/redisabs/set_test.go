package redisabs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
)

func TestSets(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { conformance.RunSets(t, conformance.AbsoluteStrategy, b.f) })
	}
}

// setTraceSteps is the length of each differential trace of sets.
const setTraceSteps = 6_000

func TestSetTraceAgainstLocal(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			steps := setTraceSteps
			if b.name == "Cluster" || b.name == "Ring" {
				steps = 2_000
			}
			admitted, refused := conformance.RunSetTrace(t, conformance.AbsoluteStrategy, steps, 3, localAbsolute, b.f)
			t.Logf("set trace: %d admitted, %d refused", admitted, refused)
			if admitted == 0 || refused == 0 {
				t.Errorf("set trace admitted %d and refused %d calls; want both", admitted, refused)
			}
		})
	}
}

// TestSetConcurrent is the all-or-nothing check under concurrency: 64
// goroutines on one key of {20 per second, 100 per minute} on real Redis.
func TestSetConcurrent(t *testing.T) {
	conformance.RunSetConcurrent(t, onReal, localAbsolute, 64, 40, 20, 100)
}

// TestSetFailurePolicies checks sets under each failure policy with Redis
// gone: FallbackLocal enforces every limit in the instance, FailOpen
// admits, FailClosed refuses, FailError returns the error; every answer
// that did not come from Redis is Degraded.
func TestSetFailurePolicies(t *testing.T) {
	set, err := limiter.NewSet(
		limiter.Limit{Name: "second", Rate: limiter.PerSecond(3), Window: time.Second},
		limiter.Limit{Name: "minute", Rate: limiter.PerMinute(100), Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []limiter.FailurePolicy{limiter.FallbackLocal, limiter.FailOpen, limiter.FailClosed, limiter.FailError} {
		t.Run(p.String(), func(t *testing.T) {
			mr, c := redistest.Mini(t)
			l := newLimiter(t, c, limiter.WithFailurePolicy(p), limiter.WithTimeout(time.Second))
			defer l.Close(ctx)
			if d, err := l.IncSet(ctx, "k", set, 1); err != nil || !d.Allowed || d.Degraded {
				t.Fatalf("IncSet with Redis up = %s, %v; want admitted, not degraded", conformance.FormatSet(d), err)
			}
			mr.Close()
			admitted := 0
			for i := 0; i < 10; i++ {
				d, err := l.IncSet(ctx, "k", set, 1)
				if p == limiter.FailError {
					if err == nil {
						t.Fatalf("IncSet under FailError with Redis down = %s, want an error", conformance.FormatSet(d))
					}
					continue
				}
				if err != nil || !d.Degraded || len(d.Limits) != 2 {
					t.Fatalf("IncSet with Redis down = %s, %v; want a degraded decision on 2 limits", conformance.FormatSet(d), err)
				}
				if d.Allowed {
					admitted++
				}
			}
			want := map[limiter.FailurePolicy]int{limiter.FallbackLocal: 3, limiter.FailOpen: 10, limiter.FailClosed: 0}[p]
			if admitted != want {
				t.Errorf("%v admitted %d of 10 calls with Redis down, want %d", p, admitted, want)
			}
			if _, err := l.IncSet(ctx, "k", nil, 1); !errors.Is(err, limiter.ErrInvalidConfig) {
				t.Errorf("IncSet(nil set) with Redis down error = %v, want ErrInvalidConfig", err)
			}
		})
	}
}
