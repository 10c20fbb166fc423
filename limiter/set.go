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
	// Name identifies the limit: in the decision, in the Redis key of its
	// hash and, through package httplimit, as the policy name of the
	// RateLimit headers. 1 to 64 bytes of lowercase letters, digits, '_',
	// '-' and '.', starting with a letter ("per-second", "daily"). A key's
	// state of a limit is found by its name; its window and bucket are
	// recorded with it, and a call that gives a live state another Window
	// or Bucket under the same name is ErrWindowConflict (another Rate is
	// fine: a tier). Give another window its own name.
	Name string
	// Rate is the target rate; the limit's capacity is
	// Capacity(Rate, Window).
	Rate Rate
	// Window is the sliding window, 1 ms to 31 days, in whole ms. 0 means
	// the rate's default window: its period (1 s for PerSecond, 24 h for
	// PerDay(100), 10 s for Every(3, 10*time.Second) or "3/10s"), or the
	// shortest multiple of it that holds one unit (2 s for PerSecond(0.5)),
	// the rule of the sluice command's --window. A rate whose default would
	// be longer than 31 days (Every(1, 40*24*time.Hour)) is
	// ErrInvalidConfig: give the Window. (httplimit.New, which takes one
	// Limit beside a limiter, reads Window 0 as the limiter's window.)
	Window time.Duration
	// Bucket is the coalescing granularity, 1 ms to Window, in whole ms,
	// with Window/Bucket at most 500. 0 means Window/100 (at least 1 ms),
	// the default of WithBucket.
	Bucket time.Duration
}

// Set is several limits on one key decided as one: a call is admitted only
// if every limit has room for it, then recorded in every limit, and a
// refused call is recorded in none (the absolute strategy; the suppressed
// strategy counts every offer, see the redissup and local docs). Build one
// with NewSet; a Set is immutable and safe for concurrent use, so build
// each tier's set once and pass it to every call, as a Rate is passed.
// The zero Set holds no limits and every set call refuses it with
// ErrInvalidConfig.
type Set struct {
	limits []Limit // Window and Bucket resolved
	str    string
}

// NewSet validates limits and returns them as a Set, in the order given
// (the order of SetDecision.Limits and of GetSet's usages). It reports
// ErrInvalidConfig for no limits, more than 8 (each is one hash in Redis
// that a decision reads and may write: docs/algorithms.md, Bounded work), two limits of
// one name, a bad name (key.ErrInvalidLimitName too), window or bucket,
// and the rate's errors (ErrInvalidRate, ErrCapacityTooSmall) for a bad
// rate, each naming the limit.
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
		if l.Bucket < 0 {
			return nil, fmt.Errorf("limit %q: %w: bucket %v must be positive, or 0 for the default", l.Name, ErrInvalidConfig, l.Bucket)
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

// At returns the i-th limit, its Window and Bucket resolved (never 0), for
// 0 ≤ i < Len().
func (s *Set) At(i int) Limit { return s.limits[i] }

// String lists the limits as "name=C per W, …".
func (s *Set) String() string {
	if s == nil {
		return "<nil>"
	}
	return s.str
}

// LimitDecision is one limit's part of a SetDecision.
type LimitDecision struct {
	// Name is the limit's name.
	Name string
	// Limit is the limit's capacity (its soft capacity for suppressed).
	Limit int64
	// Remaining is the units this limit still has room for after the
	// call, never negative.
	Remaining int64
	// RetryAfter is how long until this limit alone would have room for
	// the call, with no new traffic: 0 when it has room now (absolute), or
	// when the call can never fit it.
	RetryAfter time.Duration
	// ResetAfter is how long until this limit's window holds nothing.
	ResetAfter time.Duration
	// SuppressionFactor is this limit's factor (suppressed strategy): 0 at
	// or below its soft capacity, 1 above its hard capacity.
	SuppressionFactor float64
	// Refused reports that this limit refused the call: it had no room
	// (absolute), or the call was above its hard capacity, or the random
	// draw fell below its factor (suppressed). A refused call may name
	// several limits; an admitted one names none.
	Refused bool
	// Never is true when the call's cost exceeds this limit's capacity
	// (hard capacity for suppressed).
	Never bool
}

// SetDecision is the answer to a call on a Set. The embedded Decision is
// the set's: Allowed, Suppressed, Never (the cost exceeds some limit's
// capacity), Degraded, SuppressionFactor (the largest of the limits'
// factors, the one the draw was compared with) and RetryAfter (the
// earliest time at which every limit has room for the call, with no new
// traffic: the largest of the limits' RetryAfter). Its Limit, Remaining
// and ResetAfter are those of the limit with the fewest units remaining
// (the first such in the set's order), the one a client runs into first.
// Limits holds every limit's part, in the set's order.
type SetDecision struct {
	Decision
	Limits []LimitDecision
}

// SetLimiter decides a Set of limits on one key as one. It is
// implemented, beside Limiter, by every provider: local.Absolute,
// local.Suppressed, redisabs.Limiter, redissup.Limiter, hybrid.Absolute
// and hybrid.Suppressed (the hybrids lease no set: their set calls are the
// Redis providers' own). The hashes (Redis) or states (local) of a set's limits are distinct
// from the key's single-limit state, and each limit's state is found by
// its name, so two sets that share a name share that limit's state (a
// tier's rates may differ for the same names). Implementations are safe
// for concurrent use.
type SetLimiter interface {
	// IncSet asks to consume n units of key in every limit of set: they
	// are recorded in every limit when every limit has room (all or
	// nothing). n = 0 is a peek: it reports whether one more unit would
	// be admitted by every limit now and records nothing (the suppressed
	// strategy still draws its number). The set carries the rates, so,
	// unlike IsAllowed, a peek needs no stored capacity.
	IncSet(ctx context.Context, key string, set *Set, n int64) (SetDecision, error)
	// GetSet returns key's usage in each limit of set, in the set's order.
	GetSet(ctx context.Context, key string, set *Set) ([]Usage, error)
	// ResetSet forgets key's state in every limit of set.
	ResetSet(ctx context.Context, key string, set *Set) error
}
