// Package overload holds the tests that certify "a busy client is not an
// outage" and "the timeout is a bound on every client" across the Redis
// providers (redisabs, redissup, and both hybrids), with default options on
// a real redis-server: the contention matrix and the freeze tests
// (docs/operations.md, When Redis fails). It has no code of its own.
package overload
