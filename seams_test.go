package sluice_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// fleetProvider builds one of the four Redis-backed providers on client.
type fleetProvider struct {
	name string
	new  func(client *redis.Client, opts ...limiter.Option) (limiter.Limiter, error)
}

var fleetProviders = []fleetProvider{
	{"redisabs", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) { return redisabs.New(c, o...) }},
	{"redissup", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) { return redissup.New(c, o...) }},
	{"hybrid.Absolute", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) {
		return hybrid.NewAbsolute(c, o...)
	}},
	{"hybrid.Suppressed", func(c *redis.Client, o ...limiter.Option) (limiter.Limiter, error) {
		return hybrid.NewSuppressed(c, o...)
	}},
}

// readmeClient is the client the README builds: go-redis' defaults (dial
// retries included) but for MaxRetries.
func readmeClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// staleBound is how soon, after another instance changes a key, an
// instance that refused the key from memory must see the change: the
// documented bound (relief.MaxStale, 1 s) and half a second for a loaded
// machine.
const staleBound = 1500 * time.Millisecond

// TestMemoryStaleness: instance A spends a key and is refused (from
// memory from then on); another instance B then changes the key in Redis:
// a Reset, a hybrid instance's Close giving its lease back, a higher rate.
// A admits again within staleBound, at W = 1 min and W = 24 h, for every
// provider, with default options on the README's client
// (docs/algorithms.md, Staleness).
func TestMemoryStaleness(t *testing.T) {
	srv := redistest.Real(t)
	ctx := context.Background()
	windows := []time.Duration{time.Minute, 24 * time.Hour}
	cases := []string{"Reset", "GiveBack", "HigherRate"}
	for _, p := range fleetProviders {
		for _, w := range windows {
			for _, c := range cases {
				t.Run(fmt.Sprintf("%s/%v/%s", p.name, w, c), func(t *testing.T) {
					t.Parallel()
					prefix := limiter.WithPrefix(redistest.Prefix(t))
					opts := []limiter.Option{prefix, limiter.WithWindow(w)}
					a, err := p.new(readmeClient(t, srv.Addr), opts...)
					if err != nil {
						t.Fatal(err)
					}
					defer a.Close(ctx)
					rate := limiter.Every(5, w)
					k := "user:" + c
					if c == "GiveBack" {
						giveBack(t, p.name, srv.Addr, a, k, opts, w)
						return
					}
					spendAndRefuse(t, a, k, rate, 5)
					b, err := p.new(readmeClient(t, srv.Addr), opts...)
					if err != nil {
						t.Fatal(err)
					}
					defer b.Close(ctx)
					start := time.Now()
					switch c {
					case "Reset":
						if err := b.Reset(ctx, k); err != nil {
							t.Fatalf("B.Reset: %v", err)
						}
					case "HigherRate":
						rate = limiter.Every(10, w)
						if d, err := b.Inc(ctx, k, rate, 1); err != nil || !d.Allowed {
							t.Fatalf("B.Inc at the higher rate = %+v, %v; want allowed", d, err)
						}
					}
					admittedWithin(t, a, k, rate, start)
				})
			}
		}
	}
}

// giveBack: a hybrid instance B of a's strategy holds unused units of k
// in a lease while a spends the rest of k's room and is refused; B's
// Close gives them back, and a admits again.
func giveBack(t *testing.T, name, addr string, a limiter.Limiter, k string, opts []limiter.Option, w time.Duration) {
	ctx := context.Background()
	sup := name == "redissup" || name == "hybrid.Suppressed"
	var b, raw limiter.Limiter
	var err error
	if sup {
		b, err = hybrid.NewSuppressed(readmeClient(t, addr), opts...)
		if err == nil {
			raw, err = redissup.New(readmeClient(t, addr), opts...)
		}
	} else {
		b, err = hybrid.NewAbsolute(readmeClient(t, addr), opts...)
		if err == nil {
			raw, err = redisabs.New(readmeClient(t, addr), opts...)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(ctx)
	rate := limiter.Every(1000, w)
	// B calls until it holds a lease with units unused (Redis holds more
	// than B admitted), then a spends the rest of the room.
	held := false
	for i := 1; i <= 500 && !held; i++ {
		if d, err := b.Inc(ctx, k, rate, 1); err != nil || !d.Allowed {
			t.Fatalf("B.Inc = %+v, %v; want allowed", d, err)
		}
		u, err := raw.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		held = u.Used > int64(i)
	}
	if !held {
		t.Fatalf("B holds no lease of %q with units unused after 500 calls", k)
	}
	spendAndRefuse(t, a, k, rate, 1)
	start := time.Now()
	if err := b.Close(ctx); err != nil {
		t.Fatalf("B.Close: %v", err)
	}
	admittedWithin(t, a, k, rate, start)
}

// spendAndRefuse spends k's room on l (at least min units admitted) and
// calls until l refuses, then a few times more so that the refusal is
// remembered; it returns the units admitted.
func spendAndRefuse(t *testing.T, l limiter.Limiter, k string, rate limiter.Rate, min int) (admitted int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 2000; i++ {
		d, err := l.Inc(ctx, k, rate, 1)
		if err != nil {
			t.Fatalf("Inc(%q) = %v", k, err)
		}
		if d.Degraded || d.Shed {
			t.Fatalf("Inc(%q) = %+v; want an answer from Redis", k, d)
		}
		if d.Allowed {
			admitted++
			continue
		}
		if admitted < min {
			t.Fatalf("Inc(%q): refused after %d admitted, want at least %d", k, admitted, min)
		}
		for j := 0; j < 5; j++ {
			if d, err := l.Inc(ctx, k, rate, 1); err != nil || d.Allowed {
				t.Fatalf("Inc(%q) after a refusal = %+v, %v; want refused", k, d, err)
			}
		}
		return admitted
	}
	t.Fatalf("Inc(%q): 2000 calls admitted", k)
	return admitted
}

// admittedWithin calls l on k every 20 ms until it admits, and fails
// when that takes longer than staleBound from start.
func admittedWithin(t *testing.T, l limiter.Limiter, k string, rate limiter.Rate, start time.Time) {
	t.Helper()
	for {
		d, err := l.Inc(context.Background(), k, rate, 1)
		if err != nil {
			t.Fatalf("Inc(%q) = %v", k, err)
		}
		if d.Allowed {
			t.Logf("admitted again %v after the change", time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > staleBound {
			t.Fatalf("Inc(%q) still refused %v after the change (%+v); want admitted within %v",
				k, time.Since(start).Round(time.Millisecond), d, staleBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
