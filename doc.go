// Package sluice is sliding-window rate limiting for Go, in one process or
// across a fleet that shares Redis. The library is split by what you run:
//
//   - limiter: rates, options, the Decision every call returns, the Limiter
//     and SetLimiter interfaces, sets of limits, the observer hook, the
//     failure policy and the sentinel errors;
//   - limiter/local: in-process absolute and suppressed limiters;
//   - limiter/redisabs and limiter/redissup: the same strategies on Redis,
//     one atomic script call per decision, Redis server time, Cluster safe;
//   - limiter/hybrid: both strategies answered from memory against
//     capacity leased from Redis, for hot keys (docs/algorithms.md, Hybrid
//     leases);
//   - key: key validation, escaping and the Redis key schema;
//   - httplimit: HTTP middleware (429 with Retry-After and the IETF
//     RateLimit headers);
//   - cleanup: the SCAN cleanup loop behind the keys' own expiry;
//   - scripts: the Lua scripts, embedded;
//   - cmd/sluice: the command-line tool.
//
// Modules of their own keep the core free of their dependencies: grpclimit
// (gRPC server interceptors) and sluiceotel (OpenTelemetry metrics and
// spans of the observer hook; docs/operations.md, OpenTelemetry).
//
// Absolute admits a request while the sliding window has room for all of
// it. Suppressed admits everything up to a soft target, then with a
// probability that falls as traffic rises, up to a hard ceiling. Every
// provider returns the same decisions for the same calls at the same
// times, and no span of length W ever holds more admitted units than the
// capacity, for one local limiter or any number of instances sharing one
// Redis (a unit counts for W to W + B). docs/algorithms.md explains the
// window and its guarantees, docs/benchmarks.md has the figures.
package sluice
