package sluicerueidis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redisprov"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/redistest"
)

// TestReplies: the adapter's commands read as go-redis' do, on each
// library, on a server and on the cluster: script replies typed as
// go-redis types them, a reply error that is a redis.Error (and still the
// library's), NOSCRIPT that Script.Run answers with EVAL, nil as
// redis.Nil inside and outside arrays, and the cleaner's commands.
func TestReplies(t *testing.T) {
	for _, d := range drivers {
		for _, s := range servers {
			t.Run(d.name+"/"+s.name, func(t *testing.T) {
				testReplies(t, d, s)
			})
		}
	}
}

func testReplies(t *testing.T, d driver, s server) {
	ctx := context.Background()
	conn := s.conn(t)
	c, _ := d.adapt(t, conn)
	k := redistest.Prefix(t) + ":{k}"

	v, err := c.Eval(ctx, "return {1, 'two', false, {3}}", []string{k}).Result()
	want := []any{int64(1), "two", nil, []any{int64(3)}}
	if err != nil || !equal(v, want) {
		t.Fatalf("Eval = %#v, %v; want %#v", v, err, want)
	}
	_, err = c.Eval(ctx, "return redis.error_reply('LOADING not now')", []string{k}).Result()
	var re redis.Error
	if !errors.As(err, &re) || !redis.HasErrorPrefix(err, "LOADING") || !redisprov.Unavailable(err) {
		t.Fatalf("error reply %v (%T): want a redis.Error that means unavailable", err, err)
	}
	if !d.libErr(errors.Unwrap(err)) {
		t.Fatalf("error reply %v does not unwrap to the library's reply error", err)
	}
	_, err = c.Eval(ctx, "return redis.error_reply('SLUICEWINDOW x')", []string{k}).Result()
	if redisprov.Unavailable(err) {
		t.Fatalf("a script's own error %v reads as an outage", err)
	}
	if _, err := c.Eval(ctx, "return nil", []string{k}).Result(); err != redis.Nil {
		t.Fatalf("nil reply: error %v, want redis.Nil", err)
	}

	sc := redis.NewScript("return #KEYS + 41 + ARGV[1]")
	if err := conn.ScriptFlush(ctx).Err(); err != nil { // every node of a cluster
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	if err := sc.EvalSha(ctx, c, []string{k}, 0).Err(); !redis.HasErrorPrefix(err, "NOSCRIPT") {
		t.Fatalf("EvalSha after SCRIPT FLUSH: %v, want NOSCRIPT", err)
	}
	if n, err := sc.Run(ctx, c, []string{k}, 0).Int64(); err != nil || n != 42 {
		t.Fatalf("Run = %d, %v; want 42 (EVAL after NOSCRIPT)", n, err)
	}
	// SCRIPT LOAD and EXISTS go to every node, as go-redis'
	// ClusterClient sends them: after Run the script is on the
	// key's node only, after Load on all.
	if sha, err := sc.Load(ctx, c).Result(); err != nil || sha != sc.Hash() {
		t.Fatalf("Load = %q, %v; want %q", sha, err, sc.Hash())
	}
	if ok, err := sc.Exists(ctx, c).Result(); err != nil || len(ok) != 1 || !ok[0] {
		t.Fatalf("Exists after Load = %v, %v; want [true]", ok, err)
	}

	if ok, err := c.SetNX(ctx, k, "a", time.Minute).Result(); err != nil || !ok {
		t.Fatalf("SetNX of a new key = %v, %v", ok, err)
	}
	if ok, err := c.SetNX(ctx, k, "b", time.Minute).Result(); err != nil || ok {
		t.Fatalf("SetNX of a held key = %v, %v; want false", ok, err)
	}
	if d, err := c.PTTL(ctx, k).Result(); err != nil || d <= 0 || d > time.Minute {
		t.Fatalf("PTTL = %v, %v", d, err)
	}
	if n, err := c.Unlink(ctx, k).Result(); err != nil || n != 1 {
		t.Fatalf("Unlink = %d, %v", n, err)
	}
	if d, err := c.PTTL(ctx, k).Result(); err != nil || d != -2 {
		t.Fatalf("PTTL of no key = %v, %v; want -2", d, err)
	}

	// A pipeline of script calls, over the cluster's nodes.
	var cmds []*redis.Cmd
	err = c.ScriptPipelined(ctx, func(p redis.Scripter) {
		for _, key := range []string{"{a}", "{b}", "{c}", "{d}"} {
			cmds = append(cmds, sc.Eval(ctx, p, []string{key}, 1))
		}
		cmds = append(cmds, p.Eval(ctx, "return redis.error_reply('ERR no')", []string{"{e}"}))
	})
	// rueidis and valkey-go drop the generic "ERR " code from an
	// error's text (go-redis keeps it, and HasErrorPrefix skips it).
	if err == nil || err.Error() != "no" {
		t.Fatalf("ScriptPipelined: %v, want the failed call's error", err)
	}
	for i, cmd := range cmds[:4] {
		if n, err := cmd.Int64(); err != nil || n != 43 {
			t.Fatalf("pipelined call %d = %d, %v; want 43", i, n, err)
		}
	}
}

func equal(a, b any) bool {
	as, ok1 := a.([]any)
	bs, ok2 := b.([]any)
	if ok1 != ok2 {
		return false
	}
	if !ok1 {
		return a == b
	}
	if len(as) != len(bs) {
		return false
	}
	for i := range as {
		if !equal(as[i], bs[i]) {
			return false
		}
	}
	return true
}
