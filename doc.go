// Package sluice is sliding-window rate limiting for Go, in one process or
// across a fleet that shares Redis.
//
// The library is split by what you run:
//
//   - limiter: rates, options, the Decision every call returns, the Limiter
//     and SetLimiter interfaces, sets of limits, the observer hook, the
//     failure policy and the sentinel errors;
//   - limiter/local: in-process absolute and suppressed limiters;
//   - limiter/redisabs and limiter/redissup: the same strategies on Redis,
//     one atomic script call per decision, Redis server time, Cluster safe;
//   - limiter/hybrid: both strategies answered from memory against
//     capacity leased from Redis, for hot keys called many times per lease
//     (docs/algorithms.md, Hybrid leases; Where the hybrid stops paying
//     off);
//   - key: key validation, escaping and the Redis key schema;
//   - httplimit: HTTP middleware (keys by client address behind trusted
//     proxies, header or user; 429 with Retry-After and the IETF
//     RateLimit headers);
//   - cleanup: the SCAN cleanup loop and its lease lock, the safety net
//     behind the keys' own expiry;
//   - scripts: the Lua scripts, embedded;
//   - cmd/sluice: the command-line tool (demo, load, inspect, serve,
//     cleanup, version);
//   - sluiceotel (a module of its own, github.com/sluice-go/sluice/sluiceotel):
//     the OpenTelemetry adapter of the observer hook (docs/operations.md,
//     OpenTelemetry, says how to require it).
//
// Beside the core, in modules of their own so that the core depends on
// neither: grpclimit, gRPC server interceptors (ResourceExhausted with an
// exact RetryInfo and the RateLimit fields as metadata), and sluiceotel,
// OpenTelemetry metrics (and optionally spans) of what the providers do.
//
// Two strategies share one window model. Absolute admits a request while
// the sliding window has room for all of it and rejects it otherwise.
// Suppressed admits everything up to a soft target, then admits with a
// probability that falls as traffic rises, up to a hard ceiling: graceful
// degradation instead of a cliff. Every provider, fed the same calls at the
// same times, returns the same decisions; one conformance suite checks it.
//
// The window guarantee: no span of length W ever holds more admitted units
// than the capacity, for one local limiter or for any number of instances
// sharing one Redis (a bucket opened at s counts until s + W + B, so every
// unit counts for at least W and at most W + B). docs/algorithms.md explains
// the window, the guarantee, the capacity arithmetic and the bounded
// under-admission; docs/benchmarks.md has the figures.
package sluice
