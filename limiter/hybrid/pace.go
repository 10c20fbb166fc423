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

// pace is what a key's entry knows of how often it is called, for both
// strategies' leases, guarded by the entry's mu. slow: the key has no
// history, or a lease of it expired with units unused, and no lease of B
// (not forward-dated) was used up since: the key is called less often
// than such a lease lives, and its leases ask to be forward-dated
// (WithLeaseAhead). A busy key gains nothing from a longer lease, and its
// units should die W + B after its grant. fwd: the current lease is
// forward-dated (its bucket started after the script's now).
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

// wantFor is the next lease's size at capacity c (the soft one for the
// suppressed strategy) given want, the size the key's use asks for: want,
// and for a slow key at least the units the key may admit on average
// (C/W) over a forward-dated lease's life, D + B, never above c nor most.
// A key called once in a while would otherwise take many leases, doubling
// from one unit, before one outlived the gap between its calls. The
// scripts cap the grant at a quarter of the room left, and forward-date it
// only while the grant leaves more than a quarter of the capacity free.
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
