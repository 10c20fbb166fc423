package main

import (
	"math/rand/v2"
	"time"

	"github.com/sluice-go/sluice/limiter"
)

// KeySpec is one limited key of a simulated workload: its policy and the
// traffic offered to it.
type KeySpec struct {
	// Name is the key passed to Inc.
	Name string
	// Tier labels the key's policy in tables ("free", "pro").
	Tier string
	// Rate is the key's policy, the rate passed to Inc.
	Rate limiter.Rate
	// Offered is the traffic offered to the key, in requests per second,
	// summed over every client of the key, outside bursts.
	Offered float64
	// BurstEvery is the mean time between the key's bursts (exponentially
	// distributed); 0 means no bursts.
	BurstEvery time.Duration
	// BurstLen is how long one burst lasts.
	BurstLen time.Duration
	// BurstFactor multiplies Offered during a burst.
	BurstFactor float64
}

// never is an instant no run reaches.
const never = time.Duration(1<<63 - 1)

// burst is one interval of raised traffic, [start, end) from the run's start.
type burst struct{ start, end time.Duration }

// bursts yields a key's bursts in order. Every generator built from the same
// key and seed yields the same bursts, so every provider sees the same
// workload.
type bursts struct {
	rng  *rand.Rand
	spec *KeySpec
	cur  burst
}

func newBursts(spec *KeySpec, seed uint64) *bursts {
	b := &bursts{rng: rand.New(rand.NewPCG(seed, 0xb0257)), spec: spec}
	b.cur = b.after(0)
	return b
}

// after draws the next burst starting after t.
func (b *bursts) after(t time.Duration) burst {
	if b.spec.BurstEvery <= 0 || b.spec.BurstLen <= 0 || b.spec.BurstFactor <= 0 {
		return burst{start: never, end: never}
	}
	gap := time.Duration(b.rng.ExpFloat64() * float64(b.spec.BurstEvery))
	s := t + gap
	return burst{start: s, end: s + b.spec.BurstLen}
}

// at returns the rate multiplier in force at t and when it next changes. t
// must not decrease between calls.
func (b *bursts) at(t time.Duration) (mult float64, until time.Duration) {
	for t >= b.cur.end && b.cur.end != never {
		b.cur = b.after(b.cur.end)
	}
	if t < b.cur.start {
		return 1, b.cur.start
	}
	return b.spec.BurstFactor, b.cur.end
}

// arrival is one request of a client: when it is sent (from the run's start)
// and the application instance the load balancer sends it to.
type arrival struct {
	at       time.Duration
	instance int
}

// arrivals generates one client's requests: a Poisson process at the
// client's share of its key's offered rate, raised during the key's bursts,
// each request sent to an instance picked uniformly at random. The sequence
// is a pure function of the seed.
type arrivals struct {
	rng       *rand.Rand
	perSecond float64 // this client's share of the key's offered rate
	bursts    *bursts
	instances int
	t         time.Duration
}

func newArrivals(spec *KeySpec, share float64, instances int, keySeed, clientSeed uint64) *arrivals {
	return &arrivals{
		rng:       rand.New(rand.NewPCG(clientSeed, 0xc11e47)),
		perSecond: spec.Offered * share,
		bursts:    newBursts(spec, keySeed),
		instances: instances,
	}
}

// next returns the client's next request; at is never for a client that
// sends nothing.
func (a *arrivals) next() arrival {
	for {
		mult, until := a.bursts.at(a.t)
		r := a.perSecond * mult
		if !(r > 0) {
			return arrival{at: never}
		}
		dt := time.Duration(a.rng.ExpFloat64() / r * float64(time.Second))
		if a.t+dt < until {
			a.t += dt
			break
		}
		// The rate changes before the draw lands: restart the
		// (memoryless) draw at the change.
		a.t = until
	}
	return arrival{at: a.t, instance: a.rng.IntN(a.instances)}
}
