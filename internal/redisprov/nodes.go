// A cluster fails by node: a Guard made ByNode on a *redis.ClusterClient
// routes each call to the guard of the master owning the key's slot, each
// with its own breaker, probe, fallback, write-back and grace. The slot
// table is read in the background at the first call and when a node
// guard opens; until then calls use the router's own guard. A stale table
// only groups keys under the wrong breaker: calls still go where the
// cluster client routes them.

package redisprov

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/key"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// nodes is the routing of a Guard made ByNode.
type nodes struct {
	cc *redis.ClusterClient

	table   atomic.Pointer[[clusterSlots]*Guard] // each slot's master's guard
	loading atomic.Bool
	loaded  atomic.Int64 // when the table was last read (UnixNano)

	mu sync.Mutex
	by map[string]*Guard // master address → its guard, kept until Close
}

// ByNode makes g, on a *redis.ClusterClient, route every call by key to
// its master's guard. On any other client it does nothing. Call it right
// after Init.
func (g *Guard) ByNode() {
	if cc, ok := g.b.Client.(*redis.ClusterClient); ok {
		g.nodes = &nodes{cc: cc, by: make(map[string]*Guard)}
	}
}

// route returns the guard of k's master, or g until the slot table is read.
func (g *Guard) route(k string) *Guard {
	g.firstCall()
	t := g.nodes.table.Load()
	if t == nil {
		g.loadSlots()
		return g
	}
	if ng := t[Slot(key.Escape(k))]; ng != nil {
		return ng
	}
	return g
}

// loadSlots reads the slot table (CLUSTER SLOTS) in the background, one
// read at a time and at most once a probe interval.
func (g *Guard) loadSlots() {
	n := g.nodes
	if last := n.loaded.Load(); last != 0 && time.Since(time.Unix(0, last)) < g.cfg.ProbeInterval {
		return
	}
	if !n.loading.CompareAndSwap(false, true) {
		return
	}
	started := g.background(func() {
		defer n.loading.Store(false)
		ctx, cancel := context.WithTimeout(g.stopCtx, g.probeDeadline()+g.cfg.ProbeInterval)
		defer cancel()
		slots, err := n.cc.ClusterSlots(ctx).Result()
		n.loaded.Store(time.Now().UnixNano())
		if err != nil || len(slots) == 0 {
			return
		}
		t := new([clusterSlots]*Guard)
		for _, s := range slots {
			if len(s.Nodes) == 0 || s.Start < 0 || s.End >= clusterSlots || s.Start > s.End {
				continue
			}
			ng := g.nodeGuard(s.Nodes[0].Addr)
			if ng == nil {
				return // closed
			}
			for i := s.Start; i <= s.End; i++ {
				t[i] = ng
			}
		}
		n.table.Store(t)
	})
	if !started {
		n.loading.Store(false)
	}
}

// nodeGuard returns the guard of the master at addr, made at its first
// use with g's settings and Probe's call on a probe key in addr's slots
// (NodeProbeKey) through the cluster client, which after a failover
// reaches the promoted replica; nil once g is closed.
func (g *Guard) nodeGuard(addr string) *Guard {
	n := g.nodes
	n.mu.Lock()
	defer n.mu.Unlock()
	if ng := n.by[addr]; ng != nil {
		return ng
	}
	if g.stopCtx.Err() != nil { // closed
		return nil
	}
	// A probe key in one of addr's slots, else of another master's: the
	// guard still follows the client.
	tag := probeKeyTag(len(n.by))
	for i := 0; i < 4096; i++ {
		m, err := n.cc.MasterForKey(context.Background(), probeKeyTag(i))
		if err != nil {
			break
		}
		if m.Options().Addr == addr {
			tag = probeKeyTag(i)
			break
		}
	}
	// No dial hook or eviction check of its own: the router's serve.
	ng := &Guard{node: addr, parent: g}
	ng.init(g.b, g.opts, probeOf(g.cfg, NodeProbeKey(g.cfg.Prefix, tag, key.Absolute)))
	ng.evictAsked.Store(true)
	n.by[addr] = ng
	return ng
}

// probeKeyTag is the hash tag of the i-th node guard's probe key.
func probeKeyTag(i int) string { return fmt.Sprintf("%%probe-%d", i) }

// tripNode opens the breaker of the master at addr, for a failed dial to
// it; false when g does not route by node or has no guard for addr.
func (g *Guard) tripNode(addr string, err error) bool {
	if g.nodes == nil {
		return false
	}
	g.nodes.mu.Lock()
	ng := g.nodes.by[addr]
	g.nodes.mu.Unlock()
	if ng == nil {
		return false
	}
	ng.trip(err)
	return true
}

// closeNodes closes every node guard of g until ctx is done.
func (g *Guard) closeNodes(ctx context.Context) error {
	if g.nodes == nil {
		return nil
	}
	g.nodes.mu.Lock()
	all := make([]*Guard, 0, len(g.nodes.by))
	for _, ng := range g.nodes.by {
		all = append(all, ng)
	}
	g.nodes.mu.Unlock()
	var err error
	for _, ng := range all {
		err = cmp.Or(err, ng.Close(ctx))
	}
	return err
}

// followTopology, after a failed probe, asks a cluster client to reload
// its slots and a node guard's router to read its table again.
func (g *Guard) followTopology() {
	if cc, ok := g.b.Client.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
	if g.parent != nil {
		g.parent.loadSlots()
	}
}

// Slot is the Redis Cluster hash slot of a key with no hash tag of its
// own: CRC16 (XMODEM) of the key, mod 16384. An escaped key (package key)
// has no braces, and is the hash tag of its Redis keys.
func Slot(k string) int {
	var crc uint16
	for i := 0; i < len(k); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^k[i]]
	}
	return int(crc) % clusterSlots
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for j := 0; j < 8; j++ {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
