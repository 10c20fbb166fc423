// Package bench compares the Redis providers of sluice with
// github.com/go-redis/redis_rate/v10 on one real redis-server.
//
// It is a separate module (bench/go.mod) so that the peers it measures
// against never become dependencies of the library. It has no API: the
// benchmarks and the interleaved driver are in its _test.go files, and the
// figures they produce, with the commands, are in ../docs/benchmarks.md.
//
// Every run starts its own redis-server on a free loopback port (no
// persistence) and stops it at the end; redis-server must be on PATH.
package bench
