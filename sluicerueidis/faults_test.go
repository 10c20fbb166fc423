package sluicerueidis_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/faults"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/sluicerueidis"
)

// faultFactory is p as the fault runners build it: on a rueidis client of
// the address of c, the harness's client of a private server (or of the
// fault proxy in front of it), with the runner's options and the default
// timeout.
func (p provider) faultFactory() faults.NewLimiter {
	return func(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter {
		t.Helper()
		a := adapt(t, c)
		l, err := p.build(a, opts...)
		if err != nil {
			t.Fatalf("%s on rueidis: %v", p.name, err)
		}
		return ownsClient{l, l.(limiter.SetLimiter), a}
	}
}

// ownsClient is a limiter that closes its rueidis client after itself:
// the fault runners close the limiter and their go-redis client, then
// count goroutines, and rueidis' connections have goroutines of their own.
type ownsClient struct {
	limiter.Limiter
	limiter.SetLimiter
	a *sluicerueidis.Client
}

func (o ownsClient) Close(ctx context.Context) error {
	err := o.Limiter.Close(ctx)
	o.a.Rueidis().Close()
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
// breaker is open, back on Redis within the recovery bound.
func TestFaultMatrix(t *testing.T) { faults.RunMatrix(t, providerNamed("redisabs").faultFactory()) }

// TestFailurePolicies: each policy through an outage, bad input, and the
// write-back of the fallback's units, alone and in a fleet of three, for
// every provider on rueidis.
func TestFailurePolicies(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) { faults.RunPolicies(t, p.pkg, p.faultFactory()) })
	}
}

// TestWriteBack: a fleet of three through a frozen (SIGSTOP) and a killed
// server, on one limit and on a set: what the fallbacks admitted is in
// Redis before Redis decides again.
func TestWriteBack(t *testing.T) { faults.RunWriteBack(t, providerNamed("redisabs").faultFactory()) }

// TestOutage: with the server stopped and with it frozen, every call
// returns within its context's deadline with a wrapped network or
// deadline error (under FailError).
func TestOutage(t *testing.T) {
	for _, p := range providers[:2] {
		t.Run(p.name, func(t *testing.T) {
			conformance.RunOutage(t, p.pkg, func(t *testing.T, c *redis.Client) limiter.Limiter {
				l, err := p.build(adapt(t, c), limiter.WithFailurePolicy(limiter.FailError), limiter.WithTimeout(0))
				if err != nil {
					t.Fatal(err)
				}
				closeAtEnd(t, l)
				return l
			})
		})
	}
}

// TestSetFailurePolicies: a set of limits under each policy while Redis is
// down, on rueidis.
func TestSetFailurePolicies(t *testing.T) {
	for _, p := range providers[:2] {
		t.Run(p.name, func(t *testing.T) {
			conformance.RunSetFailurePolicies(t, p.strategy, func(t *testing.T, c *redis.Client, opts ...limiter.Option) limiter.Limiter {
				l, err := p.build(adapt(t, c), opts...)
				if err != nil {
					t.Fatal(err)
				}
				closeAtEnd(t, l)
				return l
			})
		})
	}
}
