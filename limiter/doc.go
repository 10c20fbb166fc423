// Package limiter holds what every sluice provider shares: the Rate type and
// the capacity arithmetic, the options, the Decision a call returns, the
// Limiter and SetLimiter interfaces and the sentinel errors.
//
// Providers live in sub-packages: local (in-process), redisabs and redissup
// (Redis, absolute and suppressed strategies). They take the same options
// and, fed the same trace of calls and times, return the same decisions.
//
// # Capacity
//
// A window of length W at rate r admits C = floor(r × W + 1e-9) units. The
// epsilon absorbs binary rounding, so 0.7/s over 10 s is 7, not 6. A
// capacity below one unit is an error (ErrCapacityTooSmall), not a limiter
// that silently refuses everything.
//
// # Rates from text
//
// ParseRate reads "100/s", "1000/min", "5/h", "20000/day" and "3/10s";
// Rate.String writes the same form back.
//
// # Sets of limits
//
// A Set holds up to MaxSetLimits named limits, each with its own rate,
// window and bucket ("10 per second and 20,000 per day"). Every provider
// implements SetLimiter: IncSet admits a call only if every limit has room
// and then records it in every limit; a refused call is recorded in none.
// SetDecision reports each limit's part and an exact RetryAfter for the
// whole set.
//
// # Waiting instead of refusing
//
// Wait blocks until a call is admitted, sleeping each refusal's exact
// RetryAfter, and returns ErrNeverFits at once for a call larger than the
// capacity.
//
// # When Redis fails
//
// The Redis providers take WithTimeout, WithFailurePolicy (FallbackLocal,
// FailOpen, FailClosed, FailError), WithFallbackInstances,
// WithProbeInterval, WithStateChange and WithLogger: an unavailable Redis
// costs one timeout, then a circuit breaker sends calls to the policy until
// a background probe finds Redis back. Decisions the policy made have
// Decision.Degraded set. By default (FallbackLocal) Inc and IncSet return
// no error then: a local limiter answers, and what it admitted is written
// to Redis as admitted when Redis is back; Get and Reset return
// ErrUnavailable. The first failed call and each outage are logged through
// slog.Default() unless WithLogger says otherwise, and each Redis provider
// has a Ping for a start-up check.
//
// # Batching
//
// The Redis providers batch concurrent calls (WithBatching, default 128):
// up to 8 calls in progress to one Redis node each goes alone, as without
// batching, so a few concurrent callers never wait for a batch; above 8,
// the calls that arrive while two round trips to the node are in flight
// are sent together, as one pipeline of at most the cap, and one round trip
// carries many decisions. WithBatching(0) sends every call alone.
//
// # Metrics, traces and logs
//
// WithObserver registers an Observer that every provider calls once per
// decision and once per backend event (a failed Redis call, the breaker
// opening or closing, a cleanup run); NewLogObserver logs them with slog,
// and the separate module github.com/sluice-go/sluice/sluiceotel exports
// them as OpenTelemetry metrics and spans (docs/operations.md, Metrics,
// traces and logs). With no observer a call pays one nil check.
package limiter
