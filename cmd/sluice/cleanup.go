package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/internal/settings"
)

func cleanupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("cleanup",
		"Makes one pass of the cleanup loop over the keys of a prefix (SCAN MATCH <prefix>:{*,\n"+
			"on every master with --cluster) and prints its report: hashes with no live\n"+
			"bucket are deleted, keys without a TTL get the one their newest bucket implies,\n"+
			"dead buckets of large live hashes are trimmed. Each hash is judged by the window\n"+
			"it records; --window can only make the pass more careful (the longer of the\n"+
			"two counts). A hash written before the record is never deleted or trimmed.\n"+
			"--dry-run lists what would be deleted. Keys it does not read are reported and\n"+
			"left alone.\n"+
			"docs/operations.md (Cleanup) explains when to run it.")
	redisURL := fs.String("redis", "", "the Redis server, as a `URL` (redis://[user:password@]host:port[/db]); required")
	cluster := fs.Bool("cluster", false, "--redis is a node of a Redis Cluster (extra nodes as ?addr=host:port): walk every master")
	prefix := fs.String("prefix", settings.DefaultPrefix, "the limiters' key `prefix` (WithPrefix)")
	window := fs.Duration("window", 0, "optional: a window no hash is judged by less than (each hash's own recorded window counts when longer)")
	bucket := fs.Duration("bucket", 0, "the bucket (WithBucket) that goes with --window; default window/100, at least 1ms")
	dryRun := fs.Bool("dry-run", false, "write nothing: report what a pass would do")
	rate := fs.Float64("keys-per-second", cleanup.DefaultRate, "the pacing budget: `N` keys per second (inf: no pacing)")
	threshold := fs.Int("trim-threshold", cleanup.DefaultTrimThreshold, "trim a live hash holding more than `N` dead buckets")
	if st, done := parse(fs, args, stdout, stderr); done {
		return st
	}
	switch {
	case fs.NArg() > 0:
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	case *redisURL == "":
		return usageError(fs, stderr, "--redis is required")
	case *bucket != 0 && *window == 0:
		return usageError(fs, stderr, "--bucket needs --window")
	case math.IsNaN(*rate) || *rate <= 0:
		return usageError(fs, stderr, "--keys-per-second %v: want a positive number of keys per second", *rate)
	}
	windowGiven := false
	fs.Visit(func(f *flag.Flag) { windowGiven = windowGiven || f.Name == "window" })
	if windowGiven && *window <= 0 {
		return usageError(fs, stderr, "--window %v: want a positive window such as 1m, or leave --window out to judge each hash by its own record", *window)
	}
	opts := []cleanup.Option{cleanup.WithPrefix(*prefix), cleanup.WithRate(*rate), cleanup.WithTrimThreshold(*threshold)}
	if *window != 0 {
		opts = append(opts, cleanup.WithWindow(*window, *bucket))
	}
	if *dryRun {
		opts = append(opts, cleanup.WithDryRun())
	}
	var client interface {
		cleanup.Client
		Ping(ctx context.Context) *redis.StatusCmd
		Close() error
	}
	var addr string
	if *cluster {
		o, err := redis.ParseClusterURL(*redisURL)
		if err != nil {
			return usageError(fs, stderr, "--redis %q: %v", shellURL(*redisURL), err)
		}
		o.MaxRetries = -1
		client, addr = redis.NewClusterClient(o), fmt.Sprintf("the Redis Cluster at %v", o.Addrs)
	} else {
		o, err := redis.ParseURL(*redisURL)
		if err != nil {
			return usageError(fs, stderr, "--redis %q: %v", shellURL(*redisURL), err)
		}
		o.MaxRetries = -1
		client, addr = redis.NewClient(o), "Redis at "+o.Addr
	}
	defer client.Close()
	cl, err := cleanup.New(client, opts...)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err = client.Ping(pctx).Err()
	cancel()
	if err != nil {
		fmt.Fprintln(stderr, plain(fmt.Sprintf("sluice cleanup: cannot reach %s: %v", addr, err)))
		return exitFailure
	}
	r, err := cl.Run(ctx)
	if r.Scanned > 0 || err == nil {
		fmt.Fprint(stdout, r.String())
	}
	switch {
	case errors.Is(err, cleanup.ErrLocked):
		fmt.Fprintln(stderr, plain(fmt.Sprintf("sluice cleanup: another cleaner holds the lease on prefix %q (key %s:cleanup:lock); try again when it is done", *prefix, *prefix)))
		return exitFailure
	case err != nil:
		fmt.Fprintln(stderr, plain(fmt.Sprintf("sluice cleanup: %v", err)))
		return exitFailure
	}
	return exitOK
}
