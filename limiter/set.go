package limiter

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-go/sluice/internal/settings"
	"github.com/sluice-go/sluice/key"
)

// maxSetLimits is the most limits one Set holds (NewSet's 8).
const maxSetLimits = 8

// Limit is one limit of a Set: at most Rate × Window units in any span of
// Window, reported under Name.
type Limit struct {
	// Name identifies the limit in decisions, in its Redis key and in the
	// RateLimit headers (httplimit): 1 to 64 bytes of lowercase letters,
	// digits, '_', '-' and '.', starting with a letter. A key's state of a
	// limit is found by name and records its window and bucket: another
	// Window or Bucket under the same name while that state lives is
	// ErrWindowConflict (another Rate is a tier, and fine).
	Name string
	// Rate is the target rate; the capacity is Capacity(Rate, Window).
	Rate Rate
	// Window is the sliding window, 1 ms to 31 days in whole ms. 0 means
	// the rate's period (24 h for PerDay(100)), or the shortest multiple of
	// it that holds one unit (2 s for PerSecond(0.5)); ErrInvalidConfig if
	// that passes 31 days.
	Window time.Duration
	// Bucket is the coalescing granularity, as WithBucket: 0 means
	// Window/100, at least 1 ms.
	Bucket time.Duration
}

// Set is several limits on one key decided as one: a call is admitted only
// if every limit has room for it, then recorded in every limit (the
// suppressed strategy records refused offers too). Build one with NewSet,
// once per tier: a Set is immutable and safe for concurrent use. The zero
// Set holds no limits; every set call refuses it with ErrInvalidConfig.
type Set struct {
	limits []Limit // Window and Bucket resolved
	str    string
}

// NewSet validates limits and returns them as a Set, in the order of
// SetDecision.Limits and GetSet. It reports ErrInvalidConfig for no
// limits, more than 8 (docs/algorithms.md, Bounded work), two of one name,
// a bad name (key.ErrInvalidLimitName too), window or bucket, and a rate's
// errors (ErrInvalidRate, ErrCapacityTooSmall), naming the limit.
func NewSet(limits ...Limit) (*Set, error) {
	if len(limits) == 0 || len(limits) > maxSetLimits {
		return nil, fmt.Errorf("%w: a set of %d limits (want 1 to %d)", ErrInvalidConfig, len(limits), maxSetLimits)
	}
	s := &Set{limits: make([]Limit, len(limits))}
	var b strings.Builder
	for i, l := range limits {
		if err := key.ValidateLimitName(l.Name); err != nil {
			return nil, fmt.Errorf("%w: limit %d: %w", ErrInvalidConfig, i, err)
		}
		for _, o := range limits[:i] {
			if o.Name == l.Name {
				return nil, fmt.Errorf("%w: two limits named %q", ErrInvalidConfig, l.Name)
			}
		}
		if l.Window == 0 {
			w, err := defaultWindow(l.Rate)
			if err != nil {
				return nil, fmt.Errorf("limit %q: window 0 (the rate's default): %w", l.Name, err)
			}
			l.Window = w
		}
		cfg, err := settings.New(ErrInvalidConfig, func(c *config) { c.Window, c.Bucket = l.Window, l.Bucket })
		if err != nil {
			return nil, fmt.Errorf("limit %q: %w", l.Name, err)
		}
		l.Bucket = cfg.Bucket
		c, err := Capacity(l.Rate, l.Window)
		if err != nil {
			return nil, fmt.Errorf("limit %q: %w", l.Name, err)
		}
		s.limits[i] = l
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%v per %v", l.Name, c, l.Window)
	}
	s.str = b.String()
	return s, nil
}

// Len returns the number of limits in s (0 for a nil or zero Set).
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.limits)
}

// At returns the i-th limit, its Window and Bucket resolved, for
// 0 ≤ i < Len().
func (s *Set) At(i int) Limit { return s.limits[i] }

// String lists the limits as "name=C per W, …".
func (s *Set) String() string {
	if s == nil {
		return "<nil>"
	}
	return s.str
}

// LimitDecision is one limit's part of a SetDecision; its fields mean
// what Decision's do, for this limit alone.
type LimitDecision struct {
	Name       string
	Limit      int64
	Remaining  int64
	RetryAfter time.Duration // 0 when it has room now or never will
	ResetAfter time.Duration
	// SuppressionFactor is 0 at or under the soft capacity, 1 above the
	// hard one.
	SuppressionFactor float64
	// Refused reports that this limit refused the call: no room, above its
	// hard capacity, or the draw fell below its factor. An admitted call
	// names none.
	Refused bool
	Never   bool
}

// SetDecision is the answer to a call on a Set. The embedded Decision is
// the set's: Never if some limit's, the largest SuppressionFactor and
// RetryAfter of the limits, and the Limit, Remaining and ResetAfter of the
// first limit with the fewest units remaining. Limits holds every limit's
// part, in the set's order.
type SetDecision struct {
	Decision
	Limits []LimitDecision
}

// SetLimiter decides a Set of limits on one key as one. Every provider
// implements it: local.Absolute, local.Suppressed, redisabs.Limiter,
// redissup.Limiter, hybrid.Absolute and hybrid.Suppressed (which lease no
// set). A set's limits have states apart from the key's single limit,
// found by name, so sets that share a name share that limit's state.
// Implementations are safe for concurrent use.
type SetLimiter interface {
	// IncSet asks to consume n units of key in every limit of set, all or
	// nothing. n = 0 is a peek for one unit that records nothing (the
	// suppressed strategy still draws).
	IncSet(ctx context.Context, key string, set *Set, n int64) (SetDecision, error)
	// GetSet returns key's usage in each limit of set, in the set's order.
	GetSet(ctx context.Context, key string, set *Set) ([]Usage, error)
	// ResetSet forgets key's state in every limit of set.
	ResetSet(ctx context.Context, key string, set *Set) error
}
