// Package limiter holds what every sluice provider shares: the Rate type and
// the capacity arithmetic, the options, the Decision a call returns, the
// Limiter interface and the sentinel errors.
//
// Providers live in sub-packages: local (in-process), redisabs and redissup
// (Redis, absolute and suppressed strategies) and hybrid. They take the same
// options and, fed the same trace of calls and times, return the same
// decisions.
//
// # Capacity
//
// A window of length W at rate r admits C = floor(r × W + 1e-9) units. The
// epsilon absorbs binary rounding, so 0.7/s over 10 s is 7, not 6. A
// capacity below one unit is an error (ErrCapacityTooSmall), not a limiter
// that silently refuses everything.
package limiter
