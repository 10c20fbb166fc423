package sluicerueidis_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/faults"
	"github.com/sluice-go/sluice/limiter"
)

// faultFactory is p as the fault runners build it: on d's client of the
// address of c, the harness's client of a private server (or of the
// fault proxy in front of it), with the runner's options and the default
// timeout.
func (p provider) faultFactory(d driver) faults.NewLimiter {
	return func(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter {
		t.Helper()
		a, closeClient := d.adapt(t, c)
		l, err := p.build(a, opts...)
		if err != nil {
			t.Fatalf("%s on %s: %v", p.name, d.name, err)
		}
		return ownsClient{l, l.(limiter.SetLimiter), closeClient}
	}
}

// ownsClient is a limiter that closes its library's client after itself:
// the fault runners close the limiter and their go-redis client, then
// count goroutines, and the library's connections have goroutines of
// their own.
type ownsClient struct {
	limiter.Limiter
	limiter.SetLimiter
	closeClient func()
}

func (o ownsClient) Close(ctx context.Context) error {
	err := o.Limiter.Close(ctx)
	o.closeClient()
	return err
}

func providerNamed(name string) provider {
	for _, p := range providers {
		if p.name == name {
			return p
		}
	}
	panic(name)
}

// TestFaultMatrix: each failure of the fault matrix (killed and restarted,
// blackholed, CLIENT PAUSE, DEBUG SLEEP, SCRIPT FLUSH, OOM) under 16
// goroutines of Inc load, on redisabs over rueidis: no error, no call
// longer than the timeout and its slack, degraded answers while the
// breaker is open, back on Redis within the recovery bound. valkey-go's
// client is rueidis' and runs the policy checks below, not the matrix.
func TestFaultMatrix(t *testing.T) {
	faults.RunMatrix(t, providerNamed("redisabs").faultFactory(rueidisDriver))
}

// TestFailurePolicies: each policy through an outage (a killed server),
// bad input, and the write-back of the fallback's units, alone and in a
// fleet of three, for every provider on rueidis and for redisabs and
// redissup on valkey-go.
func TestFailurePolicies(t *testing.T) {
	for _, d := range drivers {
		ps := providers
		if d.name != rueidisDriver.name {
			ps = providers[:2]
		}
		for _, p := range ps {
			t.Run(d.name+"/"+p.name, func(t *testing.T) { faults.RunPolicies(t, p.pkg, p.faultFactory(d)) })
		}
	}
}

// TestWriteBack: a fleet of three through a frozen (SIGSTOP) and a killed
// server, on one limit and on a set: what the fallbacks admitted is in
// Redis before Redis decides again.
func TestWriteBack(t *testing.T) {
	faults.RunWriteBack(t, providerNamed("redisabs").faultFactory(rueidisDriver))
}

// TestOutage: with the server stopped and with it frozen, every call
// returns within its context's deadline with a wrapped network or
// deadline error (under FailError), on each library.
func TestOutage(t *testing.T) {
	for _, d := range drivers {
		for _, p := range providers[:2] {
			t.Run(d.name+"/"+p.name, func(t *testing.T) {
				conformance.RunOutage(t, p.pkg, func(t *testing.T, c *redis.Client) limiter.Limiter {
					a, _ := d.adapt(t, c)
					l, err := p.build(a, limiter.WithFailurePolicy(limiter.FailError))
					if err != nil {
						t.Fatal(err)
					}
					closeAtEnd(t, l)
					return l
				})
			})
		}
	}
}

// TestSetFailurePolicies: a set of limits under each policy while Redis is
// down, on rueidis.
func TestSetFailurePolicies(t *testing.T) {
	for _, p := range providers[:2] {
		t.Run(p.name, func(t *testing.T) {
			conformance.RunSetFailurePolicies(t, p.strategy, func(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter {
				a, _ := rueidisDriver.adapt(t, c)
				l, err := p.build(a, opts...)
				if err != nil {
					t.Fatal(err)
				}
				closeAtEnd(t, l)
				return l
			})
		})
	}
}
