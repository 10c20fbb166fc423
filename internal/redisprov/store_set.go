package redisprov

import (
	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/key"
	"github.com/sluice-go/sluice/limiter"
)

// CheckSet validates a call on a set, as Check does for a single limit,
// then the set and the cost (n < 0 is ErrInvalidCost; pass 0 for calls
// without a cost), and returns the Redis hash of each of the set's limits,
// in the set's order.
func (b *Base) CheckSet(op, k string, set *limiter.Set, n int64) ([]string, error) {
	if _, err := b.Check(op, k); err != nil {
		return nil, err
	}
	if err := window.CheckSet(set); err != nil {
		return nil, b.Errorf(op, err)
	}
	if err := window.CheckCost(n); err != nil {
		return nil, b.Errorf(op, err)
	}
	hs := make([]string, set.Len())
	for i := range hs {
		h, err := key.LimitName(b.Cfg.Prefix, k, b.strat, set.At(i).Name)
		if err != nil {
			return nil, b.Errorf(op, err)
		}
		hs[i] = h
	}
	return hs, nil
}

// SetTTL is the PEXPIRE of a write to limit l's hash: its W + B, plus the
// clock slack when the caller's clock replaces Redis TIME (see TTLMs).
func SetTTL(cfg *window.Config, l *window.Limit) int64 {
	ttl := l.P.Span()
	if cfg.ClockSet {
		ttl += ClockSlackMs
	}
	return ttl
}
