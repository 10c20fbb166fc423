package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var ctx = context.Background()

// The one server of the run, the client every contender uses and a
// one-connection client for INFO and CONFIG, so that reading statistics
// never takes a connection from the contenders' pool; nil when
// redis-server is missing.
var (
	srv    *server
	client *redis.Client
	stats  *redis.Client
)

// poolSize is the connection pool of the shared client: one connection per
// goroutine at the largest parallelism measured.
const poolSize = 64

// newClient returns the client every contender uses. MaxRetries -1: a
// timed-out increment is never re-sent (sluice's advice for its providers).
func newClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:         addr,
		PoolSize:     poolSize,
		MinIdleConns: poolSize,
		MaxRetries:   -1,
		DialTimeout:  5 * time.Second,
		ReadTimeout:  5 * time.Second,
		WriteTimeout: 5 * time.Second,
		PoolTimeout:  10 * time.Second,
	})
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	s, err := startServer()
	switch {
	case errors.Is(err, errNoServer) && os.Getenv("SLUICE_REQUIRE_REDIS") != "1":
		fmt.Fprintln(os.Stderr, "bench: redis-server not on PATH: benchmarks skip")
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		return 1
	default:
		defer s.Stop()
		srv = s
		client = newClient(s.Addr)
		defer client.Close()
		stats = redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 1, MaxRetries: -1})
		defer stats.Close()
	}
	return m.Run()
}

// requireServer skips tb when there is no server.
func requireServer(tb testing.TB) *redis.Client {
	tb.Helper()
	if client == nil {
		tb.Skip("redis-server not on PATH")
	}
	return client
}

// info returns field name of INFO section.
func info(c *redis.Client, section, name string) (string, error) {
	s, err := c.Info(ctx, section).Result()
	if err != nil {
		return "", err
	}
	v, ok := infoField(s, name)
	if !ok {
		return "", fmt.Errorf("no %s in INFO %s", name, section)
	}
	return v, nil
}

// memory is what INFO memory says of the server's size.
type memory struct {
	Used    int64 // used_memory
	Clients int64 // mem_clients_normal: the connections' query and reply buffers
}

// Data is used_memory without the connections' buffers.
func (m memory) Data() int64 { return m.Used - m.Clients }

func memoryInfo(c *redis.Client) (memory, error) {
	s, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return memory{}, err
	}
	var m memory
	for _, f := range []struct {
		name string
		v    *int64
	}{{"used_memory", &m.Used}, {"mem_clients_normal", &m.Clients}} {
		v, ok := infoField(s, f.name)
		if !ok {
			return memory{}, fmt.Errorf("no %s in INFO memory", f.name)
		}
		if *f.v, err = strconv.ParseInt(v, 10, 64); err != nil {
			return memory{}, fmt.Errorf("INFO memory %s: %w", f.name, err)
		}
	}
	return m, nil
}

// serverCPU returns the server's used_cpu_user + used_cpu_sys in seconds.
func serverCPU(c *redis.Client) (float64, error) {
	s, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, name := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, ok := infoField(s, name)
		if !ok {
			return 0, fmt.Errorf("no %s in INFO cpu", name)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, err
		}
		sum += f
	}
	return sum, nil
}

// serverReads is INFO stats' total_reads_processed: the read events the
// server handled (Redis 6 or newer), one per pipeline or single call that
// arrived alone.
func serverReads(c *redis.Client) (int64, error) {
	s, err := c.Info(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	v, ok := infoField(s, "total_reads_processed")
	if !ok {
		return 0, fmt.Errorf("no total_reads_processed in INFO stats")
	}
	return strconv.ParseInt(v, 10, 64)
}

// serverSample reads the server's CPU seconds (serverCPU) and read events
// (serverReads) at one moment of a measurement.
func serverSample(c *redis.Client) (cpu float64, reads int64, err error) {
	if cpu, err = serverCPU(c); err != nil {
		return 0, 0, err
	}
	reads, err = serverReads(c)
	return cpu, reads, err
}

// cmdStat is one line of INFO commandstats.
type cmdStat struct {
	Calls       int64
	Usec        float64 // all calls' µs
	UsecPerCall float64
}

// commandStat returns the INFO commandstats entry of cmd (e.g. "evalsha");
// a command not called since CONFIG RESETSTAT has zero stats.
func commandStat(c *redis.Client, cmd string) (cmdStat, error) {
	s, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return cmdStat{}, err
	}
	v, ok := infoField(s, "cmdstat_"+cmd)
	if !ok {
		return cmdStat{}, nil
	}
	var st cmdStat
	for _, kv := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(kv, "=")
		switch k {
		case "calls":
			st.Calls, err = strconv.ParseInt(val, 10, 64)
		case "usec":
			st.Usec, err = strconv.ParseFloat(val, 64)
		case "usec_per_call":
			st.UsecPerCall, err = strconv.ParseFloat(val, 64)
		}
		if err != nil {
			return cmdStat{}, fmt.Errorf("cmdstat_%s: %q: %w", cmd, v, err)
		}
	}
	return st, nil
}
