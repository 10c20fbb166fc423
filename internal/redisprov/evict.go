package redisprov

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Eviction (docs/operations.md, Memory policy): an evicted hash starts
// again from empty, so the guard asks the server's maxmemory-policy at
// Ping and at the first call and warns when it can evict the keys.

// configGetter is the client's CONFIG GET, which *redis.Client,
// *redis.ClusterClient and *redis.Ring have.
type configGetter interface {
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
}

// evictionTimeout bounds the check's CONFIG GET.
const evictionTimeout = time.Second

// checkEviction warns, once per limiter, when the server's policy can
// evict; a server refusing CONFIG or not answering is not checked. It
// uses the probe's client when there is one, so its dials are not the
// callers'.
func (g *Guard) checkEviction(ctx context.Context) {
	var c any = g.client
	if g.own != nil {
		c = g.own.client()
	}
	cg, ok := c.(configGetter)
	if !ok || g.evictWarned.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, evictionTimeout)
	defer cancel()
	m, err := cg.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return
	}
	policy := m["maxmemory-policy"]
	if !evicts(policy) || !g.evictWarned.CompareAndSwap(false, true) {
		return
	}
	if l := g.logger(); l != nil {
		l.Warn("sluice: Redis may evict the limiter's counts under memory pressure (an evicted key starts again from empty and admits up to its capacity more); use maxmemory-policy noeviction",
			"provider", g.pkg, "addr", Addr(g.client), "maxmemory-policy", policy)
	}
}

// evicts reports whether a maxmemory-policy can evict keys that carry a
// TTL: every policy but noeviction (and an empty answer, none known).
func evicts(policy string) bool {
	p := strings.ToLower(policy)
	return p != "" && p != "noeviction"
}

// firstCall starts the eviction check in the background at the
// limiter's first call (Decide, DecideSet): one atomic load per call.
func (g *Guard) firstCall() {
	if g.evictAsked.Load() || !g.evictAsked.CompareAndSwap(false, true) {
		return
	}
	g.background(func() { g.checkEviction(g.stopCtx) })
}
