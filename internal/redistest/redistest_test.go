package redistest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func testCtx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestRealPingSetGet(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := redistest.Real(t)
	if s2 := redistest.Real(t); s2 != s {
		t.Errorf("Real returned %p then %p, want one shared server", s, s2)
	}
	c := s.Client(t)
	if got, err := c.Ping(ctx).Result(); err != nil || got != "PONG" {
		t.Fatalf("PING = %q, %v, want PONG", got, err)
	}
	k := redistest.Prefix(t) + ":k"
	if err := c.Set(ctx, k, "v", time.Minute).Err(); err != nil {
		t.Fatalf("SET %s: %v", k, err)
	}
	if got, err := c.Get(ctx, k).Result(); err != nil || got != "v" {
		t.Errorf("GET %s = %q, %v, want v", k, got, err)
	}
	// The harness's defaults: no persistence.
	for param, want := range map[string]string{"save": "", "appendonly": "no", "bind": "127.0.0.1"} {
		got, err := c.ConfigGet(ctx, param).Result()
		if err != nil || got[param] != want {
			t.Errorf("CONFIG GET %s = %v, %v, want %q", param, got, err, want)
		}
	}
}

func TestRealStopPanics(t *testing.T) {
	t.Parallel()
	s := redistest.Real(t)
	defer func() {
		if recover() == nil {
			t.Errorf("Stop on the shared server did not panic")
		}
		if !s.Running() {
			t.Errorf("shared server stopped")
		}
	}()
	s.Stop()
}

func TestStartServerStopRestart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := redistest.StartServer(t)
	if s.Addr == redistest.Real(t).Addr {
		t.Fatalf("StartServer returned the shared server %s", s.Addr)
	}
	c := s.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}

	s.Stop()
	if s.Running() {
		t.Errorf("Running() = true after Stop")
	}
	start := time.Now()
	if err := c.Get(ctx, "k").Err(); err == nil || errors.Is(err, redis.Nil) {
		t.Errorf("GET after Stop = %v, want a connection error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("GET after Stop took %v", d)
	}
	s.Stop() // stopping twice is fine

	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	// The pool's old connections are dead; go-redis retries on a new one.
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET after Restart = %v, want redis.Nil (data is not persisted)", err)
	}
	if err := c.Set(ctx, "k", "v2", 0).Err(); err != nil {
		t.Errorf("SET after Restart: %v", err)
	}
}

func TestStartServerArgs(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := redistest.StartServer(t, "--maxmemory", "12345678", "--maxmemory-policy", "noeviction").Client(t)
	got, err := c.ConfigGet(ctx, "maxmemory").Result()
	if err != nil || got["maxmemory"] != "12345678" {
		t.Errorf("CONFIG GET maxmemory = %v, %v, want 12345678", got, err)
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("no SIGSTOP")
	}
	ctx := testCtx(t)
	s := redistest.StartServer(t)
	opt := s.Options()
	opt.ReadTimeout = 200 * time.Millisecond
	opt.MaxRetries = -1
	c := redis.NewClient(opt)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	if err := s.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	err := c.Ping(ctx).Err()
	var ne interface{ Timeout() bool }
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("PING on a paused server = %v, want a timeout", err)
	}
	if err := s.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after Resume: %v", err)
	}
	// Stop must not hang on a paused server.
	if err := s.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	start := time.Now()
	s.Stop()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Stop of a paused server took %v", d)
	}
}

func TestMini(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	mr, c := redistest.Mini(t)
	mr2, _ := redistest.Mini(t)
	if mr.Addr() == mr2.Addr() {
		t.Errorf("two Mini calls share %s", mr.Addr())
	}
	if err := c.Set(ctx, "k", "v", time.Second).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := mr.Get("k"); err != nil || got != "v" {
		t.Errorf("miniredis Get(k) = %q, %v, want v", got, err)
	}
	mr.FastForward(2 * time.Second)
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET after expiry = %v, want redis.Nil", err)
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := redistest.Cluster(t)
	masters := redistest.ClusterMasters(t)
	if len(masters) != 3 {
		t.Fatalf("ClusterMasters = %v, want 3", masters)
	}
	direct := make(map[string]*redis.Client)
	for _, addr := range masters {
		mc := redis.NewClient(&redis.Options{Addr: addr})
		defer mc.Close()
		direct[addr] = mc
		info, err := mc.ClusterInfo(ctx).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			t.Errorf("CLUSTER INFO on %s = %q, %v, want cluster_state:ok", addr, info, err)
		}
	}

	// Keys with different hash tags spread over every master, and each
	// lives where the client routes it.
	p := redistest.Prefix(t)
	for i := 0; i < 100; i++ {
		k := fmt.Sprintf("%s:{%d}:k", p, i)
		if err := c.Set(ctx, k, i, time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		m, err := c.MasterForKey(ctx, k)
		if err != nil {
			t.Fatalf("MasterForKey(%s): %v", k, err)
		}
		if n, err := direct[m.Options().Addr].Exists(ctx, k).Result(); err != nil || n != 1 {
			t.Errorf("EXISTS %s on %s = %d, %v, want 1", k, m.Options().Addr, n, err)
		}
	}
	for addr, mc := range direct {
		keys, _, err := mc.Scan(ctx, 0, p+":*", 1000).Result()
		if err != nil || len(keys) == 0 {
			t.Errorf("SCAN on %s found %d of the test's keys (%v), want some on every master", addr, len(keys), err)
		}
	}
	var n sync.Map
	if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n.Store(m.Options().Addr, true)
		return nil
	}); err != nil {
		t.Fatalf("ForEachMaster: %v", err)
	}
	for _, addr := range masters {
		if _, ok := n.Load(addr); !ok {
			t.Errorf("ForEachMaster skipped %s", addr)
		}
	}
}

func TestClusterScriptSlots(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := redistest.Cluster(t)
	p := redistest.Prefix(t)
	script := redis.NewScript(`
		redis.call("SET", KEYS[1], ARGV[1], "PX", 60000)
		redis.call("SET", KEYS[2], ARGV[2], "PX", 60000)
		return redis.call("MGET", KEYS[1], KEYS[2])`)

	same := []string{p + ":{tag}a", p + ":{tag}b"}
	got, err := script.Run(ctx, c, same, "1", "2").StringSlice()
	if err != nil || len(got) != 2 || got[0] != "1" || got[1] != "2" {
		t.Errorf("script on %v = %v, %v, want [1 2]", same, got, err)
	}

	// The cluster really enforces slots: keys in two slots are refused.
	var cross []string
	for i := 0; cross == nil; i++ {
		a, b := fmt.Sprintf("%s:{x%d}", p, i), fmt.Sprintf("%s:{y%d}", p, i)
		sa, _ := c.ClusterKeySlot(ctx, a).Result()
		sb, _ := c.ClusterKeySlot(ctx, b).Result()
		if sa != sb {
			cross = []string{a, b}
		}
	}
	if err := script.Run(ctx, c, cross, "1", "2").Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Errorf("script on %v = %v, want a CROSSSLOT error", cross, err)
	}
}

func TestRing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	r := redistest.Ring(t)
	shards := redistest.RingShards(t)
	if len(shards) != 2 {
		t.Fatalf("RingShards = %v, want 2", shards)
	}
	p := redistest.Prefix(t)
	for i := 0; i < 100; i++ {
		k := fmt.Sprintf("%s:%d", p, i)
		if err := r.Set(ctx, k, i, time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		if got, err := r.Get(ctx, k).Int(); err != nil || got != i {
			t.Fatalf("GET %s = %d, %v, want %d", k, got, err, i)
		}
	}
	total := 0
	for name, addr := range shards {
		sc := redis.NewClient(&redis.Options{Addr: addr})
		defer sc.Close()
		keys, _, err := sc.Scan(ctx, 0, p+":*", 1000).Result()
		if err != nil || len(keys) == 0 {
			t.Errorf("SCAN on shard %s (%s) found %d keys (%v), want some on each", name, addr, len(keys), err)
		}
		total += len(keys)
	}
	if total != 100 {
		t.Errorf("shards hold %d keys in all, want 100", total)
	}
}

// validPrefix is stricter than sluice's rule: only these bytes, at most 128.
var validPrefix = regexp.MustCompile(`^[A-Za-z0-9_:-]{1,128}$`)

func TestPrefix(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := make(map[string]string)
	check := func(t *testing.T) {
		for i := 0; i < 50; i++ {
			p := redistest.Prefix(t)
			if !validPrefix.MatchString(p) {
				t.Errorf("Prefix() = %q (%d bytes), want %s", p, len(p), validPrefix)
			}
			mu.Lock()
			if other, dup := seen[p]; dup {
				t.Errorf("Prefix() = %q for %s and %s", p, t.Name(), other)
			}
			seen[p] = t.Name()
			mu.Unlock()
		}
	}
	names := []string{
		"plain",
		"with space and {braces} * ? [x] \\ \t tab",
		"ünïcode/nested",
		strings.Repeat("long", 100),
		strings.Repeat("x", 200) + "{",
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			check(t)
		})
	}
}

func TestRequired(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want bool
	}{{"1", true}, {"", false}, {"0", false}, {"true", false}} {
		t.Setenv(redistest.RequireEnv, tc.env)
		if got := redistest.Required(); got != tc.want {
			t.Errorf("with %s=%q, Required() = %v, want %v", redistest.RequireEnv, tc.env, got, tc.want)
		}
	}
}

// TestParentDeath checks that a test binary killed outright (so neither
// Main nor t.Cleanup runs) does not leave its redis-server behind.
func TestParentDeath(t *testing.T) {
	if os.Getenv("REDISTEST_HELPER") == "1" {
		s := redistest.StartServer(t)
		fmt.Printf("ADDR %s\n", s.Addr)
		time.Sleep(time.Minute)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("Pdeathsig is Linux-only")
	}
	redistest.StartServer(t) // skips or fails like the helper would
	t.Parallel()

	cmd := exec.Command(os.Args[0], "-test.run=^TestParentDeath$", "-test.v")
	// The helper cannot clean up its server's directory: put it in ours.
	cmd.Env = append(os.Environ(), "REDISTEST_HELPER=1", "TMPDIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var addr string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "ADDR "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatalf("helper printed no address")
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING to the helper's server %s: %v", addr, err)
	}
	cmd.Process.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for c.Ping(context.Background()).Err() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server %s still answers 5s after its test binary was killed", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
