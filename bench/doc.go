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
//
// Package healthy (healthy/) measures a release against another on a healthy
// Redis in one process, both linked into one binary: TestHealthyAB, behind
// "Failure policy: the healthy path" in ../docs/benchmarks.md.
//
// floor/run.sh measures server time per script call with redis-benchmark
// alone (no Go client): sluice's abs_inc.lua beside redis_rate's script and
// beside scripts that make only the commands a data model requires.
package bench
