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
	// Fleet is the most units admitted in any window of W (any half-open
	// span [t, t + W)) by every instance together; PerInstance the same for
	// each instance's admissions alone. Both are exact: check.MostInAnyWindow
	// over the admissions, at the millisecond each was decided at.
	Fleet       int64
	PerInstance []int64
}

// MaxInstance is the most any one instance admitted in a window of W.
func (k *KeyReport) MaxInstance() int64 {
	var m int64
	for _, p := range k.PerInstance {
		m = max(m, p)
	}
	return m
}

// Bound is the most a key may admit in any window of W (docs/algorithms.md,
// The window guarantee): C for the absolute strategy, the hard capacity H
// for the suppressed one, whose soft target is not a per-window bound.
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

// Most returns the most in any window of W that the bound applies to: the
// fleet's on Redis, the worst instance's for local limiters.
func (p *ProviderReport) Most(k *KeyReport) int64 {
	if p.Target.Backend == Redis {
		return k.Fleet
	}
	return k.MaxInstance()
}

// Violations lists every key that admitted more than its bound in some
// window of W, where the bound must hold. Empty means the run kept every
// promise.
func (r *Report) Violations() []string {
	var v []string
	for i := range r.Providers {
		p := &r.Providers[i]
		for j := range p.Keys {
			k := &p.Keys[j]
			if got, bound := p.Most(k), p.Bound(k); got > bound {
				why := ""
				if p.Counts.Degraded > 0 {
					why = fmt.Sprintf(" (%d decisions of the run came from the local fallback)", p.Counts.Degraded)
				}
				v = append(v, fmt.Sprintf("%v: key %q admitted %d units %s in a window of %v, more than %d%s",
					p.Target, k.Key, got, p.Scope(), r.Window, bound, why))
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
