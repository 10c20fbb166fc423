package main

import (
	"fmt"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// Report is the outcome of a run.
type Report struct {
	Elapsed, Duration time.Duration
	Interrupted       bool
	Window, Bucket    time.Duration
	Instances         int
	Clients           int
	Cost              int64
	HardLimitFactor   float64
	Providers         []ProviderReport
}

// ProviderReport is what one target decided over the run.
type ProviderReport struct {
	Target     Target
	Counts     Counts // requests
	P50, P99   time.Duration
	Keys       []KeyReport
	FirstError error
}

// KeyReport is what one target decided for one key.
type KeyReport struct {
	Key, Tier      string
	Rate           limiter.Rate
	Capacity, Hard int64  // C and H (H = C for absolute)
	Counts         Counts // requests
	// Offered and Admitted are units (requests × cost).
	Offered, Admitted int64
	// Fleet is the peak over every instance together, PerInstance the peak
	// of each instance's admissions alone.
	Fleet       Peak
	PerInstance []Peak
}

// Peak is the most units admitted in any interval of a given length.
type Peak struct {
	// Guaranteed is the most admitted in any interval of W − B + 1 ms, the
	// length over which a sliding window with buckets of B guarantees at
	// most its capacity.
	Guaranteed int64
	// Full is the most admitted in any interval of W, which coalescing may
	// push above capacity by part of one bucket.
	Full int64
}

// MaxInstance is the highest per-instance peak.
func (k *KeyReport) MaxInstance() Peak {
	var m Peak
	for _, p := range k.PerInstance {
		m.Guaranteed = max(m.Guaranteed, p.Guaranteed)
		m.Full = max(m.Full, p.Full)
	}
	return m
}

// Bound is the most a key may admit in any interval of W − B + 1 ms: C for
// the absolute strategy, H for the suppressed one.
func (p *ProviderReport) Bound(k *KeyReport) int64 {
	if p.Target.Strategy == Suppressed {
		return k.Hard
	}
	return k.Capacity
}

// Scope says over what the bound holds: the whole fleet for Redis (one
// shared window per key), each instance for local limiters.
func (p *ProviderReport) Scope() string {
	if p.Target.Backend == Redis {
		return "fleet-wide"
	}
	return "per instance"
}

// Peak returns the peak the bound applies to (fleet or worst instance).
func (p *ProviderReport) Peak(k *KeyReport) Peak {
	if p.Target.Backend == Redis {
		return k.Fleet
	}
	return k.MaxInstance()
}

// Violations lists every key that admitted more than its bound in an
// interval of W − B + 1 ms, where the bound must hold. Empty means the run
// kept every promise.
func (r *Report) Violations() []string {
	var v []string
	for i := range r.Providers {
		p := &r.Providers[i]
		for j := range p.Keys {
			k := &p.Keys[j]
			if got, bound := p.Peak(k).Guaranteed, p.Bound(k); got > bound {
				v = append(v, fmt.Sprintf("%v: key %q admitted %d units %s in %v, more than %d",
					p.Target, k.Key, got, p.Scope(), r.GuaranteedSpan(), bound))
			}
		}
	}
	return v
}

// Errors is the number of decisions that failed, over every provider.
func (r *Report) Errors() int64 {
	var n int64
	for _, p := range r.Providers {
		n += p.Counts.Errors
	}
	return n
}

// GuaranteedSpan is W − B + 1 ms.
func (r *Report) GuaranteedSpan() time.Duration { return r.Window - r.Bucket + time.Millisecond }
