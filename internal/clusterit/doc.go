// Package clusterit holds integration tests of sluice's Redis providers
// (limiter/redisabs and limiter/redissup) on real Redis topologies and on
// every kind of go-redis client: a three-master Redis Cluster through
// *redis.ClusterClient, a two-shard *redis.Ring, and a master with a
// replica behind Redis Sentinel through the failover clients.
//
// The tests check what docs/operations.md promises an operator:
//
//   - every Redis key of one limiter key lies in one cluster slot, so no
//     call can fail with CROSSSLOT, while many limiter keys spread evenly
//     over the masters;
//   - a hot key admits exactly its capacity under concurrent calls through
//     a cluster or a ring, for both strategies;
//   - after any mix of calls every key sluice wrote has an expiry of at
//     most W + B, and W + B after the last call nothing is left;
//   - every Sentinel client (failover, failover-cluster, universal) counts
//     exactly, and after SENTINEL FAILOVER the same client reaches the new
//     master with every replicated count intact;
//   - go-redis re-sends an increment whose reply is late unless retries are
//     turned off, which is why operations.md recommends turning them off.
//
// The package has no code outside its tests. Its servers come from
// internal/redistest (the Sentinel, which needs a config file, is started
// by the tests themselves), so the tests skip when redis-server is not
// installed (and fail when SLUICE_REQUIRE_REDIS=1). Every test writes under
// its own redistest.Prefix, so runs never see each other's keys:
//
//	go test -race -count=2 ./internal/clusterit/
package clusterit
