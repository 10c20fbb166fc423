package hybrid

import (
	"fmt"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

// leaseAhead is D, the most ms a lease's bucket may start after now
// (WithLeaseAhead): W/20 at most DefaultLeaseAheadMax by default, 0 when
// turned off, an error above W/4.
func leaseAhead(cfg *window.Config) (int64, error) {
	switch a := cfg.LeaseAhead; {
	case a == 0:
		return min(cfg.WindowMs/20, DefaultLeaseAheadMax.Milliseconds()), nil
	case a > cfg.Window/4:
		return 0, fmt.Errorf("%w: lease ahead %v above W/4 (%v)", limiter.ErrInvalidConfig, a, cfg.Window/4)
	case a > 0:
		return a.Milliseconds(), nil
	}
	return 0, nil
}

// pace is what a key's entry knows of how often it is called, guarded by
// the entry's mu. slow: no history, or a lease expired with units unused
// and no plain lease was used up since; a slow key's leases ask to be
// forward-dated (WithLeaseAhead). fwd: the current lease is forward-dated.
type pace struct{ slow, fwd bool }

// ended updates slow as the current lease ends: unused tells whether it
// expired with units left.
func (p *pace) ended(unused bool) {
	switch {
	case unused:
		p.slow = true
	case !p.fwd:
		p.slow = false
	}
}

// wantFor is the next lease's size at capacity c (soft, when suppressed):
// want, and for a slow key at least its average admissions (C/W) over a
// forward-dated lease's life D + B, so it need not double up from one
// unit; never above c nor most. The scripts cap the grant further.
func (p *pace) wantFor(want, c, ahead, most int64, cfg *window.Config) int64 {
	if !p.slow || ahead == 0 {
		return want
	}
	share := (c*(ahead+cfg.BucketMs) + cfg.WindowMs - 1) / cfg.WindowMs
	return min(max(want, share), c, most)
}

// aheadArg is a lease request's D argument: ahead for a slow key, else 0.
func (p *pace) aheadArg(ahead int64) int64 {
	if p.slow {
		return ahead
	}
	return 0
}
