// Package adapter is the client-neutral half of sluicerueidis and
// sluicevalkey: a Client with the go-redis-shaped methods sluice's Redis
// providers and its cleaner call, sent through a Driver, the few things a
// client library (rueidis, or its fork valkey-go) does for it. Lib makes a
// Driver of any library whose client, command and result types have the
// shape the two share.
package adapter

import "context"

// Command is one command as the adapter sends it: Name, its words (the
// command's name and any words before the keys: "EVALSHA", the SHA1 and
// the key count), then Keys, by which a cluster client routes it, then
// Args.
type Command struct {
	Name, Keys, Args []string
}

// Reply is one command's reply as the library's ToAny reads it, and its
// error as the library returns it.
type Reply struct {
	Val any
	Err error
}

// Driver is a client library's side of the adapter. The adapter reads a
// reply error by its IsNil method, which both libraries' reply error
// types (*rueidis.RedisError, *valkey.ValkeyError) have: a nil reply
// reports true, any other reply error false.
type Driver interface {
	// Do sends cmd and returns its reply.
	Do(ctx context.Context, cmd Command) Reply
	// DoMulti sends cmds together (one round trip per node) and returns
	// their replies in order.
	DoMulti(ctx context.Context, cmds []Command) []Reply
	// Nodes returns a driver of each server the client knows, by address.
	Nodes() map[string]Driver
	// Cluster reports whether the client is a cluster client.
	Cluster() bool
}

// Result is a library's reply to one command.
type Result interface {
	ToAny() (any, error)
}

// Conn is the part of a library's client the adapter uses, over its own
// client type C, completed command type M and result type R.
type Conn[C any, M any, R Result] interface {
	Do(ctx context.Context, cmd M) R
	DoMulti(ctx context.Context, multi ...M) []R
	Nodes() map[string]C
}

// Lib is what differs between two libraries of one shape: how a Command
// becomes the library's command, and how to tell a cluster client. A Lib
// is read-only once built, and safe for concurrent use.
type Lib[C Conn[C, M, R], M any, R Result] struct {
	Build   func(c C, cmd Command) M
	Cluster func(c C) bool
}

// Driver returns the driver of c.
func (l *Lib[C, M, R]) Driver(c C) Driver { return &driver[C, M, R]{c: c, lib: l} }

type driver[C Conn[C, M, R], M any, R Result] struct {
	c   C
	lib *Lib[C, M, R]
}

func (d *driver[C, M, R]) Do(ctx context.Context, cmd Command) Reply {
	v, err := d.c.Do(ctx, d.lib.Build(d.c, cmd)).ToAny()
	return Reply{v, err}
}

func (d *driver[C, M, R]) DoMulti(ctx context.Context, cmds []Command) []Reply {
	built := make([]M, len(cmds))
	for i, cmd := range cmds {
		built[i] = d.lib.Build(d.c, cmd)
	}
	out := make([]Reply, len(cmds))
	for i, r := range d.c.DoMulti(ctx, built...) {
		out[i].Val, out[i].Err = r.ToAny()
	}
	return out
}

func (d *driver[C, M, R]) Nodes() map[string]Driver {
	nodes := d.c.Nodes()
	out := make(map[string]Driver, len(nodes))
	for addr, n := range nodes {
		out[addr] = d.lib.Driver(n)
	}
	return out
}

func (d *driver[C, M, R]) Cluster() bool { return d.lib.Cluster(d.c) }
