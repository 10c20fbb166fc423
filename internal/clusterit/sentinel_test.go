package clusterit_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

// masterName is the name the sentinel monitors the master under.
const masterName = "sluice-test"

// sentinelSetup is a private master, its replica and one Sentinel watching
// them (quorum 1).
type sentinelSetup struct {
	master, replica *redistest.Server
	sentinel        string // address
}

// startSentinelSetup starts a master, a replica of it and a Sentinel, all
// removed at t.Cleanup. It skips or fails t like redistest.StartServer when
// redis-server is missing.
func startSentinelSetup(t *testing.T) *sentinelSetup {
	t.Helper()
	// Without the 5 s default delay, a full sync starts at once.
	fast := []string{"--repl-diskless-sync-delay", "0"}
	master := redistest.StartServer(t, fast...)
	_, port, _ := net.SplitHostPort(master.Addr)
	replica := redistest.StartServer(t, append(fast, "--replicaof", "127.0.0.1", port)...)
	waitFor(t, 10*time.Second, "the replica's link to the master", func() (bool, string) {
		info, err := replica.Client(t).Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up"), fmt.Sprint(info, err)
	})
	return &sentinelSetup{master: master, replica: replica, sentinel: startSentinel(t, port)}
}

// startSentinel runs redis-server in sentinel mode, monitoring the master
// on 127.0.0.1:masterPort, stopped at t.Cleanup. Sentinel needs a writable
// config file, which redistest.StartServer cannot give it.
func startSentinel(t *testing.T, masterPort string) string {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		addr, err := trySentinel(t, masterPort)
		if err == nil {
			return addr
		}
		lastErr = err
	}
	t.Fatalf("starting a sentinel: %v", lastErr)
	return ""
}

func trySentinel(t *testing.T, masterPort string) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\n"+
		"sentinel monitor %s 127.0.0.1 %s 1\n"+
		"sentinel down-after-milliseconds %s 1000\n"+
		"sentinel failover-timeout %s 10000\n",
		port, dir, masterName, masterPort, masterName, masterName)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return "", err
	}
	logf, err := os.Create(filepath.Join(dir, "sentinel.log"))
	if err != nil {
		return "", err
	}
	defer logf.Close()
	cmd := exec.Command("redis-server", conf, "--sentinel")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	stop := func() { cmd.Process.Kill(); <-done }
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(10 * time.Second); ; {
		if answers(addr) {
			t.Cleanup(stop)
			return addr, nil
		}
		select {
		case <-done:
			log, _ := os.ReadFile(logf.Name())
			return "", fmt.Errorf("sentinel exited; log:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			stop()
			log, _ := os.ReadFile(logf.Name())
			return "", fmt.Errorf("sentinel on %s did not answer; log:\n%s", addr, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// answers reports whether a server on addr answers PING. It dials first,
// so that a server still starting costs no go-redis log line.
func answers(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	c := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	return c.Ping(ctx).Err() == nil
}

// waitFor polls cond every 10 ms until it holds, failing t after timeout
// with what cond last reported.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s; last: %s", timeout, what, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *sentinelSetup) failoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:            masterName,
		SentinelAddrs:         []string{s.sentinel},
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
		DialTimeout:           2 * time.Second,
		ReadTimeout:           3 * time.Second,
		WriteTimeout:          3 * time.Second,
	}
}

// waitReplicated waits until the replica has applied everything the master
// has written so far.
func (s *sentinelSetup) waitReplicated(t *testing.T, master, replica *redistest.Server) {
	t.Helper()
	off := func(srv *redistest.Server, field string) (int64, string) {
		info, err := srv.Client(t).Info(ctx, "replication").Result()
		if err != nil {
			return -1, err.Error()
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, field+":"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n, info
			}
		}
		return -1, info
	}
	want, info := off(master, "master_repl_offset")
	if want < 0 {
		t.Fatalf("master INFO replication: %s", info)
	}
	waitFor(t, 10*time.Second, "the replica to catch up", func() (bool, string) {
		got, info := off(replica, "slave_repl_offset")
		return got >= want, fmt.Sprintf("offset %d < %d: %s", got, want, info)
	})
}

// TestSentinelClients runs both strategies through every go-redis client
// that finds its master through Sentinel: NewFailoverClient,
// NewFailoverClusterClient and NewUniversalClient with a MasterName. Each
// counts exactly, writes only on the master, and the replica receives the
// hash with its expiry.
func TestSentinelClients(t *testing.T) {
	t.Parallel()
	s := startSentinelSetup(t)
	clients := []struct {
		name string
		open func() redisabs.Client
	}{
		{"FailoverClient", func() redisabs.Client { return redis.NewFailoverClient(s.failoverOptions()) }},
		{"FailoverClusterClient", func() redisabs.Client { return redis.NewFailoverClusterClient(s.failoverOptions()) }},
		{"UniversalClient", func() redisabs.Client {
			o := s.failoverOptions()
			return redis.NewUniversalClient(&redis.UniversalOptions{
				MasterName:            o.MasterName,
				Addrs:                 o.SentinelAddrs,
				MaxRetries:            o.MaxRetries,
				ContextTimeoutEnabled: o.ContextTimeoutEnabled,
				DialTimeout:           o.DialTimeout,
				ReadTimeout:           o.ReadTimeout,
				WriteTimeout:          o.WriteTimeout,
			})
		}},
	}
	rate := limiter.PerMinute(5)
	prefix := redistest.Prefix(t)
	var names []string
	for _, cl := range clients {
		c := cl.open()
		t.Cleanup(func() { c.(interface{ Close() error }).Close() })
		for _, st := range strategies {
			l := st.limiter(t, c, limiter.WithPrefix(prefix))
			k := cl.name
			for i := 1; i <= 6; i++ {
				d, err := l.Inc(ctx, k, rate, 1)
				if err != nil {
					t.Fatalf("%s/%s: Inc(%q, 1): %v", cl.name, st.name, k, err)
				}
				if d.Allowed != (i <= 5) {
					t.Errorf("%s/%s: Inc #%d (%q, 1) = %+v, want Allowed %v", cl.name, st.name, i, k, d, i <= 5)
				}
			}
			if u, err := l.Get(ctx, k); err != nil || u.Used != 5 {
				t.Errorf("%s/%s: Get(%q) = %+v, %v, want Used 5", cl.name, st.name, k, u, err)
			}
			names = append(names, hashName(t, prefix, k, st.name))
		}
	}
	s.waitReplicated(t, s.master, s.replica)
	for _, srv := range []*redistest.Server{s.master, s.replica} {
		for _, name := range names {
			if ttl, err := srv.Client(t).PTTL(ctx, name).Result(); err != nil || ttl <= 0 || ttl > time.Minute+600*time.Millisecond {
				t.Errorf("PTTL %q on %s = %v, %v, want in (0, W + B]", name, srv.Addr, ttl, err)
			}
		}
	}
}

// TestSentinelFailover counts through a FailoverClient, lets the replica
// catch up, has Sentinel promote it (SENTINEL FAILOVER), and checks that
// the same client reaches the new master by itself and that every count
// survived: the window goes on where it was.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	s := startSentinelSetup(t)
	fc := redis.NewFailoverClient(s.failoverOptions())
	t.Cleanup(func() { fc.Close() })
	rate := limiter.PerMinute(100)
	prefix := redistest.Prefix(t)
	ls := make([]limiter.Limiter, len(strategies))
	for i, st := range strategies {
		ls[i] = st.limiter(t, fc, limiter.WithPrefix(prefix), limiter.WithWindow(time.Minute))
		for j := 0; j < 10; j++ {
			if _, err := ls[i].Inc(ctx, "k", rate, 1); err != nil {
				t.Fatalf("%s: Inc(k, 1): %v", st.name, err)
			}
		}
	}
	s.waitReplicated(t, s.master, s.replica)

	sc := redis.NewSentinelClient(&redis.Options{Addr: s.sentinel})
	t.Cleanup(func() { sc.Close() })
	start := time.Now()
	// The sentinel learns about the replica from the master's INFO; until
	// then SENTINEL FAILOVER answers NOGOODSLAVE.
	waitFor(t, 15*time.Second, "SENTINEL FAILOVER to be accepted", func() (bool, string) {
		err := sc.Failover(ctx, masterName).Err()
		return err == nil, fmt.Sprint(err)
	})
	waitFor(t, 15*time.Second, "the sentinel to name the replica as master", func() (bool, string) {
		addr, err := sc.GetMasterAddrByName(ctx, masterName).Result()
		return err == nil && net.JoinHostPort(addr[0], addr[1]) == s.replica.Addr, fmt.Sprint(addr, err)
	})
	_, replicaPort, _ := net.SplitHostPort(s.replica.Addr)
	waitFor(t, 15*time.Second, "the FailoverClient to reach the new master", func() (bool, string) {
		v, err := fc.ConfigGet(ctx, "port").Result()
		return err == nil && v["port"] == replicaPort, fmt.Sprint(v, err)
	})
	t.Logf("failover took %v", time.Since(start))

	for i, st := range strategies {
		if u, err := ls[i].Get(ctx, "k"); err != nil || u.Used != 10 {
			t.Errorf("%s: after the failover Get(k) = %+v, %v, want Used 10", st.name, u, err)
		}
		d, err := ls[i].Inc(ctx, "k", rate, 1)
		if err != nil || !d.Allowed || d.Remaining != 89 {
			t.Errorf("%s: after the failover Inc(k, 1) = %+v, %v, want allowed with Remaining 89", st.name, d, err)
		}
	}
}
