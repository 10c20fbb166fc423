package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	clusterMasters = 3
	clusterSlots   = 16384
	// clusterTimeout bounds redis-cli --cluster create plus convergence.
	clusterTimeout = 30 * time.Second
)

// cluster is a running Redis Cluster: three masters, and with replicas
// one replica of each.
type cluster struct {
	nodes    []*Server
	replicas bool
}

func (c *cluster) addrs() []string {
	a := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		a[i] = n.Addr
	}
	return a
}

func (c *cluster) destroy() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		if n != nil {
			wg.Add(1)
			go func(n *Server) {
				defer wg.Done()
				n.destroy()
			}(n)
		}
	}
	wg.Wait()
}

var sharedCluster lazy[*cluster]

func getCluster(t testing.TB, fn string) *cluster {
	t.Helper()
	shared(t, fn, "redis-server", "redis-cli")
	c, err := sharedCluster.get(startCluster)
	if err != nil {
		t.Fatalf("redistest.%s: %v", fn, err)
	}
	return c
}

// Cluster returns a new client, closed at t.Cleanup, for the three-master
// Redis Cluster (no replicas) shared by this test binary, starting it on
// first use; Main stops it. It is never flushed: isolate keys with Prefix.
// Cluster skips t, or fails it when Required, if redis-server or redis-cli
// is not on PATH, and fails t if the cluster does not start.
func Cluster(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(ClusterOptions(t))
	t.Cleanup(func() { c.Close() })
	return c
}

// ClusterOptions returns client options for the shared cluster with the
// harness's timeouts, for a test that wants to adjust them. It starts the
// cluster like Cluster.
func ClusterOptions(t testing.TB) *redis.ClusterOptions {
	t.Helper()
	return clusterOptions(getCluster(t, "ClusterOptions").addrs())
}

func clusterOptions(addrs []string) *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:        addrs,
		DialTimeout:  dialTimeout,
		ReadTimeout:  ioTimeout,
		WriteTimeout: ioTimeout,
		PoolTimeout:  poolTimeout,

		DialerRetries:      dialRetries,
		DialerRetryTimeout: dialBackoff,
	}
}

// ClusterMasters returns the addresses of the shared cluster's masters,
// starting it like Cluster. Each one can be reached on its own with
// redis.NewClient, e.g. to SCAN it.
func ClusterMasters(t testing.TB) []string {
	t.Helper()
	return getCluster(t, "ClusterMasters").addrs()
}

func startCluster() (*cluster, error) { return newCluster(false, true, "5000") }

// newCluster starts a cluster of three masters, with one replica each
// when replicas, whose nodes mark a silent peer failed after nodeTimeout
// ms.
func newCluster(replicas, shared bool, nodeTimeout string) (*cluster, error) {
	start := time.Now()
	n := clusterMasters
	if replicas {
		n *= 2
	}
	c := &cluster{nodes: make([]*Server, n), replicas: replicas}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			args := []string{"--cluster-node-timeout", nodeTimeout}
			if replicas {
				// a replica's first sync at once, not after 5 s; and the
				// healthy masters serve their slots while a dead master's
				// are uncovered (with the default, yes, every node replies
				// CLUSTERDOWN from the failure's mark to the promotion)
				args = append(args, "--repl-diskless-sync-delay", "0", "--cluster-require-full-coverage", "no")
			}
			c.nodes[i], errs[i] = newServer(shared, true, args)
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.destroy()
			return nil, fmt.Errorf("starting a cluster node: %w", err)
		}
	}
	if err := c.create(start.Add(clusterTimeout)); err != nil {
		c.destroy()
		return nil, err
	}
	return c, nil
}

// create joins the nodes with redis-cli --cluster create and waits until
// every node reports cluster_state:ok and a client sees every slot served.
func (c *cluster) create(deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.addrs()...)
	replicas := "0"
	if c.replicas {
		replicas = "1"
	}
	args = append(args, "--cluster-replicas", replicas, "--cluster-yes")
	cmd := exec.CommandContext(ctx, "redis-cli", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli %s: %v\n%s%s", strings.Join(args, " "), err, out, c.logs())
	}

	// Every node must agree that all slots are assigned and served.
	for _, n := range c.nodes {
		var last string
		for {
			info, err := rawCommand(n.Addr, "CLUSTER", "INFO")
			last = fmt.Sprintf("%q (%v)", info, err)
			if err == nil && clusterReady(info, len(c.nodes)) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("cluster node %s not ready by the deadline; last CLUSTER INFO: %s%s", n.Addr, last, c.logs())
			}
			time.Sleep(pollInterval)
		}
	}

	// Every replica must hold its master's data: one that never synced
	// cannot take a dead master's place.
	for _, n := range c.nodes {
		for c.replicas {
			info, err := rawCommand(n.Addr, "INFO", "replication")
			role, _ := infoField(info, "role")
			link, _ := infoField(info, "master_link_status")
			if err == nil && (role == "master" || link == "up") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("replica %s not in sync by the deadline: %q (%v)%s", n.Addr, info, err, c.logs())
			}
			time.Sleep(pollInterval)
		}
	}

	// And a cluster client must route every slot to one of our masters.
	client := redis.NewClusterClient(clusterOptions(c.addrs()))
	defer client.Close()
	for {
		err := c.checkRouting(ctx, client)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster client cannot route every slot: %v%s", err, c.logs())
		}
		client.ReloadState(ctx)
		time.Sleep(pollInterval)
	}
}

func clusterReady(info string, nodes int) bool {
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": fmt.Sprint(clusterSlots),
		"cluster_slots_ok":       fmt.Sprint(clusterSlots),
		"cluster_known_nodes":    fmt.Sprint(nodes),
		"cluster_size":           fmt.Sprint(clusterMasters),
	}
	for k, v := range want {
		if got, ok := infoField(info, k); !ok || got != v {
			return false
		}
	}
	return true
}

func (c *cluster) checkRouting(ctx context.Context, client *redis.ClusterClient) error {
	slots, err := client.ClusterSlots(ctx).Result()
	if err != nil {
		return err
	}
	ours := make(map[string]bool)
	for _, a := range c.addrs() {
		ours[a] = true
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i].Start < slots[j].Start })
	next := 0
	masters := make(map[string]bool)
	for _, s := range slots {
		if s.Start != next || len(s.Nodes) == 0 || !ours[s.Nodes[0].Addr] {
			return fmt.Errorf("CLUSTER SLOTS = %v, want slots 0-%d on %v", slots, clusterSlots-1, c.addrs())
		}
		masters[s.Nodes[0].Addr] = true
		next = s.End + 1
	}
	if next != clusterSlots || len(masters) != clusterMasters {
		return fmt.Errorf("CLUSTER SLOTS = %v, want slots 0-%d on %v", slots, clusterSlots-1, c.addrs())
	}
	var mu sync.Mutex
	seen := 0
	err = client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		mu.Lock()
		seen++
		mu.Unlock()
		return m.Ping(ctx).Err()
	})
	if err != nil {
		return err
	}
	if seen != clusterMasters {
		return fmt.Errorf("ForEachMaster visited %d masters, want %d", seen, clusterMasters)
	}
	return nil
}

func (c *cluster) logs() string {
	var b strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "\n--- log of %s ---\n%s", n.Addr, n.tail())
	}
	return b.String()
}

// ReplicatedCluster is a Redis Cluster of three masters with one replica
// each, private to one test (so that it may kill a master), whose nodes
// mark a silent peer failed after one second (a replica takes a dead
// master's place one to three seconds after the kill) and do not require
// full coverage (cluster-require-full-coverage no: the other masters
// serve on while a dead master's slots wait for their replica).
type ReplicatedCluster struct {
	c *cluster
}

// StartReplicatedCluster starts a ReplicatedCluster, stopped at
// t.Cleanup. It skips t, or fails it when Required, if redis-server or
// redis-cli is not on PATH.
func StartReplicatedCluster(t testing.TB) *ReplicatedCluster {
	t.Helper()
	shared(t, "StartReplicatedCluster", "redis-server", "redis-cli")
	c, err := newCluster(true, false, "1000")
	if err != nil {
		t.Fatalf("redistest.StartReplicatedCluster: %v", err)
	}
	t.Cleanup(c.destroy)
	return &ReplicatedCluster{c: c}
}

// Options returns client options for the cluster with go-redis' defaults
// but for the harness's timeouts.
func (r *ReplicatedCluster) Options() *redis.ClusterOptions {
	return clusterOptions(r.c.addrs())
}

// MasterOf returns the address of the master that serves slot now, as
// the nodes still running report it (CLUSTER SLOTS); "" when none does.
func (r *ReplicatedCluster) MasterOf(slot int) string {
	for _, n := range r.c.nodes {
		if !n.Running() {
			continue
		}
		c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: dialTimeout, ReadTimeout: ioTimeout})
		slots, err := c.ClusterSlots(context.Background()).Result()
		c.Close()
		if err != nil {
			continue
		}
		for _, s := range slots {
			if s.Start <= slot && slot <= s.End && len(s.Nodes) > 0 {
				return s.Nodes[0].Addr
			}
		}
		return ""
	}
	return ""
}

// Kill kills the node at addr with SIGKILL.
func (r *ReplicatedCluster) Kill(addr string) {
	for _, n := range r.c.nodes {
		if n.Addr == addr {
			n.Kill()
			return
		}
	}
}

// Logs returns the tail of every node's log.
func (r *ReplicatedCluster) Logs() string { return r.c.logs() }
