package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// errNoServer reports that redis-server is not on PATH.
var errNoServer = errors.New("bench: redis-server not found on PATH")

// server is a redis-server child process on 127.0.0.1 with persistence
// off. It is not safe for concurrent Stop calls.
type server struct {
	Addr string

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	dir  string
}

// startServer starts redis-server --port P --save "" --appendonly no on a
// free loopback port and waits until it answers PING with its own pid.
func startServer() (*server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errNoServer
	}
	dir, err := os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // another process may take the port first
		var s *server
		s, lastErr = tryStart(bin, dir)
		if lastErr == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func tryStart(bin, dir string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--dir", dir,
		"--logfile", logPath,
	)
	cmd.Dir = dir
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting redis-server: %w", err)
	}
	s := &server{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		cmd:  cmd,
		done: make(chan struct{}),
		dir:  dir,
	}
	go func() { cmd.Wait(); close(s.done) }()

	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-s.done:
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("bench: redis-server on %s exited: %s", s.Addr, tail(log))
		default:
		}
		// Our pid, not just an answer: another server may own the port.
		if pid, err := serverPID(c); err == nil {
			if pid == cmd.Process.Pid {
				return s, nil
			}
			s.kill()
			return nil, fmt.Errorf("bench: port %d answered by pid %d", port, pid)
		}
		if time.Now().After(deadline) {
			s.kill()
			return nil, fmt.Errorf("bench: redis-server on %s did not answer within 10s", s.Addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func serverPID(c *redis.Client) (int, error) {
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		return 0, err
	}
	v, ok := infoField(info, "process_id")
	if !ok {
		return 0, errors.New("no process_id in INFO server")
	}
	return strconv.Atoi(v)
}

// Stop stops the server (SIGTERM, then SIGKILL after 5 s) and removes its
// directory.
func (s *server) Stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.kill()
	}
	os.RemoveAll(s.dir)
}

func (s *server) kill() {
	s.cmd.Process.Kill()
	<-s.done
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("bench: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// infoField returns the value of "name:value" in an INFO reply.
func infoField(info, name string) (string, bool) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v, true
		}
	}
	return "", false
}

func tail(b []byte) string {
	const n = 2048
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
