package adapter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-go/sluice/internal/redisprov"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/cleanup"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// Client is a client library's client seen through the narrow go-redis
// interfaces that sluice's Redis providers and its cleaner take. Each
// method sends one command (a Pipeline, one round trip) through the
// Driver, with its keys marked so that a cluster client routes it to the
// key's slot, and returns the reply in the go-redis command type the
// method's go-redis namesake returns. A reply error is a redis.Error (so
// redis.HasErrorPrefix and the providers' failure policy read it as
// go-redis' own), wrapping the library's error; a nil reply is redis.Nil;
// any other error (connection, context) is the library's as it is.
//
// No command is retried by the adapter, and none it sends is one rueidis
// or valkey-go retries (they retry read-only commands only): a script
// call that timed out may have counted, and sluice never sends it again.
// The per-call timeout of the providers (limiter.WithTimeout) bounds every
// call: see ContextTimeouts.
//
// A Client is safe for concurrent use. It holds no connection of its own:
// the library's client belongs to the caller. The zero value is not
// usable.
type Client struct {
	evals // sent at once, by eval
	d     Driver
}

// The interfaces the adapter is built to satisfy.
var (
	_ redisabs.Client = (*Client)(nil)
	_ hybrid.Client   = (*Client)(nil)
	_ cleanup.Client  = (*Client)(nil)
	_ cleanup.Nodes   = (*Client)(nil)
	// The write-back and the hybrid's sync pipeline through it.
	_ redisprov.ScriptPipeliner = (*Client)(nil)
)

// New returns the adapter of d.
func New(d Driver) *Client {
	a := &Client{d: d}
	a.evals = evals{send: a.eval}
	return a
}

// ContextTimeouts reports false: a rueidis (or valkey-go) call honours
// its context's deadline on the wire, but one that finds the connection being dialled
// waits for that dial (bounded by the client's Dialer.Timeout, 5 s by
// default) past its own deadline. The providers' failure policy then
// bounds each call itself, as it does for a go-redis client without
// ContextTimeoutEnabled: the call runs on a worker and the caller returns
// at its deadline.
func (a *Client) ContextTimeouts() bool { return false }

// Addr returns the addresses of the servers the client knows, sorted and
// joined by commas, for errors and logs (a provider's Ping names it).
func (a *Client) Addr() string {
	addrs := make([]string, 0, 4)
	for addr := range a.d.Nodes() {
		addrs = append(addrs, addr)
	}
	slices.Sort(addrs)
	return strings.Join(addrs, ",")
}

// do sends one command: name, then keys (which the library routes by),
// then args.
func (a *Client) do(ctx context.Context, name []string, keys []string, args []any) (any, error) {
	cmd, err := command(name, keys, args)
	if err != nil {
		return nil, err
	}
	return reply(a.d.Do(ctx, cmd))
}

// command makes the Command of name, keys and args; an argument of a type
// go-redis cannot send either is an error.
func command(name []string, keys []string, args []any) (Command, error) {
	strs := make([]string, len(args))
	for i, v := range args {
		s, err := argString(v)
		if err != nil {
			return Command{}, err
		}
		strs[i] = s
	}
	return Command{Name: name, Keys: keys, Args: strs}, nil
}

func newCmd(ctx context.Context, v any, err error, args ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	if err != nil {
		cmd.SetErr(err)
	} else {
		cmd.SetVal(v)
	}
	return cmd
}

func cmdArgs(name string, first string, keys []string, args []any) []any {
	out := make([]any, 0, 3+len(keys)+len(args))
	out = append(out, name, first, len(keys))
	for _, k := range keys {
		out = append(out, k)
	}
	return append(out, args...)
}

// evals is the script calls of redis.Scripter over one step, send, which
// a Client does at once and a pipeline queues.
type evals struct {
	send func(ctx context.Context, name, first string, keys []string, args []any) *redis.Cmd
}

// Eval is EVAL: it runs script (which the server then caches).
func (e evals) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return e.send(ctx, "EVAL", script, keys, args)
}

// EvalSha is EVALSHA: it runs the cached script of sha1; NOSCRIPT when
// the server has none (redis.Script.Run then sends Eval).
func (e evals) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return e.send(ctx, "EVALSHA", sha1, keys, args)
}

// EvalRO is EVAL_RO.
func (e evals) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return e.send(ctx, "EVAL_RO", script, keys, args)
}

// EvalShaRO is EVALSHA_RO.
func (e evals) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return e.send(ctx, "EVALSHA_RO", sha1, keys, args)
}

// eval sends name (EVAL, EVALSHA and their _RO forms) of first (a script
// or its SHA1).
func (a *Client) eval(ctx context.Context, name, first string, keys []string, args []any) *redis.Cmd {
	v, err := a.do(ctx, []string{name, first, strconv.Itoa(len(keys))}, keys, args)
	return newCmd(ctx, v, err, cmdArgs(strings.ToLower(name), first, keys, args)...)
}

// ScriptLoad is SCRIPT LOAD, sent to every server the client knows (every
// node of a cluster, as go-redis' ClusterClient does), so that the EVALSHA
// calls that follow find the script wherever their keys live. It returns
// the SHA1 and the first error.
func (a *Client) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	cmd := redis.NewStringCmd(ctx, "script", "load", script)
	var mu sync.Mutex
	var sha string
	err := a.eachNode(ctx, func(ctx context.Context, n Driver) error {
		v, err := reply(n.Do(ctx, Command{Name: []string{"SCRIPT", "LOAD"}, Args: []string{script}}))
		if err != nil {
			return err
		}
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("sluicerueidis: SCRIPT LOAD replied %T", v)
		}
		mu.Lock()
		sha = s
		mu.Unlock()
		return nil
	})
	if err != nil {
		cmd.SetErr(err)
	} else {
		cmd.SetVal(sha)
	}
	return cmd
}

// ScriptExists is SCRIPT EXISTS on every server the client knows: a
// script exists when every one of them has it.
func (a *Client) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	args := make([]any, 0, 2+len(hashes))
	args = append(args, "script", "exists")
	for _, h := range hashes {
		args = append(args, h)
	}
	cmd := redis.NewBoolSliceCmd(ctx, args...)
	var mu sync.Mutex
	all := make([]bool, len(hashes))
	for i := range all {
		all[i] = true
	}
	err := a.eachNode(ctx, func(ctx context.Context, n Driver) error {
		r, err := reply(n.Do(ctx, Command{Name: []string{"SCRIPT", "EXISTS"}, Args: hashes}))
		if err != nil {
			return err
		}
		v, ok := r.([]any)
		if !ok || len(v) != len(hashes) {
			return fmt.Errorf("sluicerueidis: SCRIPT EXISTS replied %v, want %d values", r, len(hashes))
		}
		mu.Lock()
		for i, x := range v {
			all[i] = all[i] && x == int64(1)
		}
		mu.Unlock()
		return nil
	})
	if err != nil {
		cmd.SetErr(err)
	} else {
		cmd.SetVal(all)
	}
	return cmd
}

// eachNode calls fn with the client of every server the client knows,
// concurrently, and returns the first error.
func (a *Client) eachNode(ctx context.Context, fn func(ctx context.Context, n Driver) error) error {
	nodes := a.d.Nodes()
	if len(nodes) <= 1 || !a.d.Cluster() {
		return fn(ctx, a.d)
	}
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() { errs <- fn(ctx, n) }()
	}
	var first error
	for range nodes {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Unlink is UNLINK of keys (one slot in a cluster, as sluice's keys of one
// limiter key are).
func (a *Client) Unlink(ctx context.Context, keys ...string) *redis.IntCmd {
	args := make([]any, 0, 1+len(keys))
	args = append(args, "unlink")
	for _, k := range keys {
		args = append(args, k)
	}
	cmd := redis.NewIntCmd(ctx, args...)
	v, err := a.do(ctx, []string{"UNLINK"}, keys, nil)
	if err == nil {
		n, ok := v.(int64)
		if !ok {
			err = fmt.Errorf("sluicerueidis: UNLINK replied %T", v)
		}
		cmd.SetVal(n)
	}
	cmd.SetErr(err)
	return cmd
}

// SetNX is SET key value NX, with PX (or KEEPTTL, for redis.KeepTTL) when
// expiration is set, as go-redis' SetNX: true when the key was set.
func (a *Client) SetNX(ctx context.Context, k string, value any, expiration time.Duration) *redis.BoolCmd {
	var name []string
	var args []any
	switch {
	case expiration > 0:
		name, args = []string{"SET"}, []any{value, "PX", expiration.Milliseconds(), "NX"}
	case expiration == redis.KeepTTL:
		name, args = []string{"SET"}, []any{value, "KEEPTTL", "NX"}
	default:
		name, args = []string{"SETNX"}, []any{value}
	}
	cmd := redis.NewBoolCmd(ctx, append([]any{strings.ToLower(name[0]), k}, args...)...)
	v, err := a.do(ctx, name, []string{k}, args)
	switch {
	case errors.Is(err, redis.Nil):
		cmd.SetVal(false)
	case err != nil:
		cmd.SetErr(err)
	default:
		switch v := v.(type) {
		case string:
			cmd.SetVal(v == "OK")
		case int64:
			cmd.SetVal(v == 1)
		default:
			cmd.SetErr(fmt.Errorf("sluicerueidis: SET NX replied %T", v))
		}
	}
	return cmd
}

// PTTL is PTTL: the key's time to live, or -1 (no TTL) and -2 (no key) as
// they are, as go-redis returns them.
func (a *Client) PTTL(ctx context.Context, k string) *redis.DurationCmd {
	cmd := redis.NewDurationCmd(ctx, time.Millisecond, "pttl", k)
	v, err := a.do(ctx, []string{"PTTL"}, []string{k}, nil)
	if err != nil {
		cmd.SetErr(err)
		return cmd
	}
	n, ok := v.(int64)
	if !ok {
		cmd.SetErr(fmt.Errorf("sluicerueidis: PTTL replied %T", v))
		return cmd
	}
	if n >= 0 {
		cmd.SetVal(time.Duration(n) * time.Millisecond)
	} else {
		cmd.SetVal(time.Duration(n))
	}
	return cmd
}

// Scan is one step of SCAN cursor MATCH match COUNT count, on one server:
// on a cluster, the cleaner scans each master through ForEachNode.
func (a *Client) Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd {
	args := []any{strconv.FormatUint(cursor, 10)}
	if match != "" {
		args = append(args, "MATCH", match)
	}
	if count > 0 {
		args = append(args, "COUNT", count)
	}
	return a.scan(ctx, []string{"SCAN"}, nil, args)
}

// HScan is one step of HSCAN key cursor MATCH match COUNT count.
func (a *Client) HScan(ctx context.Context, k string, cursor uint64, match string, count int64) *redis.ScanCmd {
	args := []any{strconv.FormatUint(cursor, 10)}
	if match != "" {
		args = append(args, "MATCH", match)
	}
	if count > 0 {
		args = append(args, "COUNT", count)
	}
	var keys []string
	if k != "" {
		keys = []string{k}
	}
	return a.scan(ctx, []string{"HSCAN"}, keys, args)
}

func (a *Client) scan(ctx context.Context, name, keys []string, args []any) *redis.ScanCmd {
	all := []any{strings.ToLower(name[0])}
	for _, k := range keys {
		all = append(all, k)
	}
	cmd := redis.NewScanCmd(ctx, nil, append(all, args...)...)
	v, err := a.do(ctx, name, keys, args)
	if err != nil {
		cmd.SetErr(err)
		return cmd
	}
	page, cursor, err := scanReply(v)
	if err != nil {
		cmd.SetErr(err)
		return cmd
	}
	cmd.SetVal(page, cursor)
	return cmd
}

func scanReply(v any) ([]string, uint64, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return nil, 0, fmt.Errorf("sluicerueidis: SCAN replied %v", v)
	}
	cs, ok := arr[0].(string)
	if !ok {
		return nil, 0, fmt.Errorf("sluicerueidis: SCAN cursor is %T", arr[0])
	}
	cursor, err := strconv.ParseUint(cs, 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("sluicerueidis: SCAN cursor %q: %w", cs, err)
	}
	items, ok := arr[1].([]any)
	if !ok {
		return nil, 0, fmt.Errorf("sluicerueidis: SCAN page is %T", arr[1])
	}
	page := make([]string, len(items))
	for i, x := range items {
		if page[i], ok = x.(string); !ok {
			return nil, 0, fmt.Errorf("sluicerueidis: SCAN item %d is %T", i, x)
		}
	}
	return page, cursor, nil
}

// ForEachNode calls fn, concurrently, with an adapter of each master the
// client knows (each node of a cluster whose ROLE is master; the client
// itself when it is not a cluster's), and returns the first error. The
// cleaner walks a cluster through it, each key acted on at the master that
// holds it.
func (a *Client) ForEachNode(ctx context.Context, fn func(ctx context.Context, node cleanup.Client) error) error {
	if !a.d.Cluster() {
		return fn(ctx, a)
	}
	nodes := a.d.Nodes()
	errs := make(chan error, len(nodes))
	for addr, n := range nodes {
		go func() {
			v, err := reply(n.Do(ctx, Command{Name: []string{"ROLE"}}))
			if err != nil {
				errs <- fmt.Errorf("ROLE of %s: %w", addr, err)
				return
			}
			role, ok := v.([]any)
			if !ok || len(role) == 0 {
				errs <- fmt.Errorf("ROLE of %s: replied %v", addr, v)
				return
			}
			if r, _ := role[0].(string); r != "master" {
				errs <- nil
				return
			}
			errs <- fn(ctx, &node{Client: New(n), addr: addr})
		}()
	}
	var first error
	for range nodes {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// node is the adapter of one server of a cluster.
type node struct {
	*Client
	addr string
}

func (n *node) Addr() string { return n.addr }
