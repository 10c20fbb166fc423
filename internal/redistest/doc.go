// Package redistest is the shared test harness for sluice's Redis providers:
// real redis-server processes, a real three-master Redis Cluster, a
// two-shard Ring, and miniredis.
//
// A package that uses Real, Cluster, ClusterMasters, Ring or RingShards must
// call Main from its TestMain, so that the shared servers it starts lazily are
// stopped when the tests end:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
// The real servers are started from the redis-server binary found on PATH
// (Cluster also needs redis-cli). When it is missing the tests that ask for
// a real server are skipped, unless SLUICE_REQUIRE_REDIS=1 is set (as CI
// does), in which case they fail. Mini always works.
//
// Shared servers are never flushed: every test isolates its keys under its
// own Prefix. A test that needs to stop, restart or pause a server starts a
// private one with StartServer.
//
// Every server is a child process listening on a free 127.0.0.1 port, with
// persistence off and its working directory in a fresh temporary directory.
// On Linux it is killed by the kernel if the test binary dies (Pdeathsig).
// Each running server has one goroutine of this package waiting for its
// process to exit; goroutine-leak checks should ignore goroutines whose
// stack is in package redistest.
//
// All functions are safe for concurrent use by parallel tests.
package redistest
