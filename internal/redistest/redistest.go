package redistest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// RequireEnv is the environment variable that, set to "1", turns a missing
// redis-server or redis-cli from a skip into a test failure.
const RequireEnv = "SLUICE_REQUIRE_REDIS"

// Required reports whether SLUICE_REQUIRE_REDIS=1, that is whether tests
// needing a real Redis must fail rather than skip when it is unavailable.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

var mainCalled atomic.Bool

// Main runs the tests, stops every server and cluster this process started,
// and exits with the tests' status. Call it from TestMain.
func Main(m *testing.M) {
	mainCalled.Store(true)
	code := m.Run()
	stopAll()
	os.Exit(code)
}

// registry holds every server not yet destroyed, so Main can stop them.
var registry struct {
	sync.Mutex
	servers map[*Server]struct{}
}

func register(s *Server) {
	registry.Lock()
	defer registry.Unlock()
	if registry.servers == nil {
		registry.servers = make(map[*Server]struct{})
	}
	registry.servers[s] = struct{}{}
}

func unregister(s *Server) {
	registry.Lock()
	defer registry.Unlock()
	delete(registry.servers, s)
}

// stopAll destroys every registered server, in parallel.
func stopAll() {
	registry.Lock()
	servers := make([]*Server, 0, len(registry.servers))
	for s := range registry.servers {
		servers = append(servers, s)
	}
	registry.Unlock()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func(s *Server) {
			defer wg.Done()
			s.destroy()
		}(s)
	}
	wg.Wait()
}

// lazy starts a shared resource once. Unlike sync.Once it remembers the
// error, so every later test fails with the same message instead of
// retrying a slow start.
type lazy[T any] struct {
	mu   sync.Mutex
	done bool
	v    T
	err  error
}

func (l *lazy[T]) get(start func() (T, error)) (T, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.v, l.err = start()
		l.done = true
	}
	return l.v, l.err
}

// requireBinaries skips t, or fails it when Required, if a program is not
// on PATH.
func requireBinaries(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			if Required() {
				t.Fatalf("redistest: %s=1 but %s is not on PATH, so the real-Redis tests cannot run. "+
					"Install it (Debian: apt-get install redis-server) or unset %s.", RequireEnv, name, RequireEnv)
			}
			t.Skipf("redistest: %s not on PATH: skipping real-Redis tests (miniredis tests still run); "+
				"set %s=1 to make this a failure", name, RequireEnv)
		}
	}
}

// shared checks the preconditions of a shared resource.
func shared(t testing.TB, fn string, binaries ...string) {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatalf("redistest.%s: the package's TestMain must call redistest.Main(m), which stops the shared servers", fn)
	}
	requireBinaries(t, binaries...)
}

var realServer lazy[*Server]

// Real returns the real redis-server shared by this test binary, starting
// it on first use; Main stops it. It is never flushed: isolate keys with
// Prefix. Do not stop or pause it (use StartServer for that). Real skips t,
// or fails it when Required, if redis-server is not on PATH, and fails t if
// the server does not start.
func Real(t testing.TB) *Server {
	t.Helper()
	shared(t, "Real", "redis-server")
	s, err := realServer.get(func() (*Server, error) { return newServer(true, false, nil) })
	if err != nil {
		t.Fatalf("redistest.Real: %v", err)
	}
	return s
}

// Mini returns a fresh miniredis and a client connected to it, both closed
// at t.Cleanup. Tests move its clock with SetTime.
func Mini(t testing.TB) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	c := redis.NewClient(clientOptions(mr.Addr()))
	t.Cleanup(func() { c.Close() })
	return mr, c
}

// maxPrefix is the longest prefix sluice accepts.
const maxPrefix = 128

var prefixSeq atomic.Uint64

// Prefix returns a Redis key prefix unique within this test binary:
// "t:<test name>:<n>", where the name is cut to fit and every byte outside
// [A-Za-z0-9_-] becomes '_'. The result is a valid sluice prefix (at most
// 128 bytes, no braces, glob characters or whitespace).
func Prefix(t testing.TB) string {
	n := strconv.FormatUint(prefixSeq.Add(1), 36)
	name := sanitize(t.Name())
	if room := maxPrefix - len("t::") - len(n); len(name) > room {
		name = name[:room]
	}
	return "t:" + name + ":" + n
}

func sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Counted starts a private server (StartServer) and returns a client of
// it, closed with the test, for counting commands with CommandCalls: the
// server has run nothing yet.
func Counted(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(StartServer(t).Options())
	t.Cleanup(func() { c.Close() })
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		t.Fatalf("CONFIG RESETSTAT: %v", err)
	}
	return c
}

// CommandCalls returns how many times c's server has run cmd (in lower
// case, such as "hgetall") since its statistics were last reset (CONFIG
// RESETSTAT), the commands that scripts make included, from INFO
// commandstats. Use a private server (StartServer): a shared one counts
// every test's commands.
func CommandCalls(t testing.TB, c *redis.Client, cmd string) int {
	t.Helper()
	stats, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	m := regexp.MustCompile(`(?m)^cmdstat_` + regexp.QuoteMeta(cmd) + `:calls=(\d+)`).FindStringSubmatch(stats)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatalf("INFO commandstats: %s calls %q: %v", cmd, m[1], err)
	}
	return n
}

// UsedMemory returns INFO memory's used_memory of c's server: the
// difference of two readings is what the writes in between cost, the
// clients' buffers included (so a test keeps its connections alike between
// the readings).
func UsedMemory(t testing.TB, c *redis.Client) int64 {
	t.Helper()
	return infoInt(t, c, "memory", "used_memory")
}

// WaitClients waits up to 10 s until the server of c has n clients
// connected (INFO clients): a closed client's connections are freed when
// the server reads their end, a moment after Close.
func WaitClients(t testing.TB, c *redis.Client, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := infoInt(t, c, "clients", "connected_clients")
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d clients connected after 10 s, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// infoInt returns the integer field of INFO section on c's server.
func infoInt(t testing.TB, c *redis.Client, section, field string) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatalf("INFO %s: %v", section, err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(field) + `:(\d+)`).FindStringSubmatch(info)
	if m == nil {
		t.Fatalf("no %s in INFO %s", field, section)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatalf("INFO %s: %s %q: %v", section, field, m[1], err)
	}
	return n
}

// DeadClient returns a client, closed with the test, of a loopback address
// where nothing listens: every call fails with connection refused, at once
// (no retries).
func DeadClient(t testing.TB) *redis.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}
