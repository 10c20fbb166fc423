package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// startTimeout bounds how long one redis-server may take to answer PING.
	startTimeout = 10 * time.Second
	// stopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	stopTimeout = 5 * time.Second
	// portAttempts is how many fresh ports a start tries when another
	// process takes the port between our probe and the server's bind.
	portAttempts = 5
	// logTail is how many bytes of a server's log an error message quotes.
	logTail = 4 << 10
)

// Client timeouts: generous enough for a loaded machine running -race,
// short enough that a test against a dead server fails fast.
const (
	dialTimeout  = 2 * time.Second
	ioTimeout    = 3 * time.Second
	poolTimeout  = 4 * time.Second
	dialRetries  = 2 // go-redis defaults to 5, 100ms apart
	dialBackoff  = 20 * time.Millisecond
	pollInterval = 10 * time.Millisecond
)

// Server is a real redis-server child process listening on 127.0.0.1.
//
// Methods are safe for concurrent use. Stop, Restart, Pause and Resume
// panic on a shared server (from Real, Ring or Cluster): a test that
// disturbs its server must start its own with StartServer.
type Server struct {
	// Addr is "127.0.0.1:<port>". It does not change on Restart.
	Addr string

	port    int
	busPort int // cluster bus port, 0 when not a cluster node
	args    []string
	dir     string
	logPath string
	shared  bool

	mu   sync.Mutex
	proc *process // nil while stopped
	gone bool     // dir removed, never starts again
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, set before done is closed
}

// StartServer starts a private redis-server for t, stopped and removed at
// t.Cleanup. Extra args are appended to the defaults (later ones win, e.g.
// "--maxmemory", "1mb"). It skips or fails t like Real when redis-server is
// missing, and fails t if the server does not start.
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	requireBinaries(t, "redis-server")
	s, err := newServer(false, false, args)
	if err != nil {
		t.Fatalf("redistest.StartServer: %v", err)
	}
	t.Cleanup(func() { s.destroy() })
	return s
}

// newServer creates a server in a fresh temporary directory and starts it,
// retrying on fresh ports when the port is taken.
func newServer(shared, cluster bool, args []string) (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	s := &Server{
		args:    append([]string(nil), args...),
		dir:     dir,
		logPath: filepath.Join(dir, "redis.log"),
		shared:  shared,
	}
	var lastErr error
	for attempt := 0; attempt < portAttempts; attempt++ {
		ports, err := freePorts(1 + btoi(cluster))
		if err != nil {
			lastErr = err
			continue
		}
		s.port = ports[0]
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		if cluster {
			s.busPort = ports[1]
		}
		var retry bool
		retry, lastErr = s.start()
		if lastErr == nil {
			register(s)
			return s, nil
		}
		if !retry {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// freePorts returns n distinct ports that were free on 127.0.0.1 a moment
// ago. They are held open together so the kernel cannot hand out one twice.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (s *Server) commandLine() []string {
	a := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--dir", s.dir,
		"--enable-debug-command", "local",
	}
	if s.busPort != 0 {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-port", strconv.Itoa(s.busPort),
		)
	}
	return append(a, s.args...)
}

// start launches the process and waits until it answers. retry reports
// whether the failure looks like a port race worth another port.
func (s *Server) start() (retry bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return false, fmt.Errorf("redis-server on %s is already running", s.Addr)
	}
	if s.gone {
		return false, fmt.Errorf("redis-server on %s was destroyed", s.Addr)
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return false, err
	}
	defer logf.Close() // the child has its own copy
	logStart, _ := logf.Seek(0, io.SeekEnd)
	cmd := exec.Command("redis-server", s.commandLine()...)
	cmd.Dir = s.dir
	cmd.Stdout = logf // *os.File: no copying goroutines
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("starting redis-server: %w", err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go p.wait()

	pid := cmd.Process.Pid
	deadline := time.Now().Add(startTimeout)
	for {
		// Ask for the pid, not just PONG: if another server took the port,
		// it answers too, and ours exits with "Address already in use".
		got, rerr := serverPID(s.Addr)
		if rerr == nil && got == pid {
			s.proc = p
			return false, nil
		}
		select {
		case <-p.done:
			log := s.tailFrom(logStart)
			return strings.Contains(log, "already in use"),
				fmt.Errorf("redis-server on %s exited before answering (%v); log:\n%s", s.Addr, p.err, log)
		default:
		}
		if time.Now().After(deadline) {
			p.kill()
			return false, fmt.Errorf("redis-server on %s (pid %d) did not answer within %v (last: pid %d, %v); log:\n%s",
				s.Addr, pid, startTimeout, got, rerr, s.tailFrom(logStart))
		}
		time.Sleep(pollInterval)
	}
}

func (p *process) wait() {
	p.err = p.cmd.Wait()
	close(p.done)
}

// stop sends SIGTERM, then SIGKILL after stopTimeout, and waits.
func (p *process) stop() {
	if p.cmd.Process.Signal(sigTerm) != nil {
		p.kill()
		return
	}
	if sigCont != nil {
		p.cmd.Process.Signal(sigCont) // a paused server must run to exit
	}
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		p.kill()
	}
}

func (p *process) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// tail returns the end of the server's log.
func (s *Server) tail() string { return s.tailFrom(0) }

// tailFrom returns the end of the server's log after byte offset from.
func (s *Server) tailFrom(from int64) string {
	f, err := os.Open(s.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size()-from > logTail {
		from = fi.Size() - logTail
	}
	f.Seek(from, io.SeekStart)
	b, _ := io.ReadAll(f)
	return string(b)
}

// Stop stops the server (SIGTERM, then SIGKILL after a few seconds) and
// waits for it to exit. Its data is lost; clients now get errors. Stopping
// a stopped server does nothing.
func (s *Server) Stop() {
	s.mustBePrivate("Stop")
	s.halt()
}

// Kill kills the server with SIGKILL, as a crash or an OOM killer would,
// and waits for it to exit. Restart starts it again.
func (s *Server) Kill() {
	s.mustBePrivate("Kill")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.kill()
		s.proc = nil
	}
}

func (s *Server) halt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.stop()
		s.proc = nil
	}
}

// Restart stops the server if it is running and starts it again, empty,
// on the same address. Existing clients reconnect on their next command.
// It returns an error if the port has been taken meanwhile or the server
// does not answer.
func (s *Server) Restart() error {
	s.mustBePrivate("Restart")
	s.halt()
	var err error
	deadline := time.Now().Add(startTimeout)
	for {
		var retry bool
		retry, err = s.start()
		if err == nil || !retry || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Pause freezes the server process (SIGSTOP): connections stay open but
// nothing answers, so clients time out. Resume undoes it. Pause is not
// supported on every platform.
func (s *Server) Pause() error {
	s.mustBePrivate("Pause")
	return s.signal(sigStop)
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error {
	s.mustBePrivate("Resume")
	return s.signal(sigCont)
}

func (s *Server) signal(sig os.Signal) error {
	if sig == nil {
		return errors.New("redistest: pausing a process is not supported on this platform")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return fmt.Errorf("redistest: redis-server on %s is not running", s.Addr)
	}
	return s.proc.cmd.Process.Signal(sig)
}

// Running reports whether the server process is running.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil
}

// Log returns the last few kilobytes of the server's log, for test failure
// messages.
func (s *Server) Log() string { return s.tail() }

func (s *Server) mustBePrivate(op string) {
	if s.shared {
		panic("redistest: " + op + " on a shared server; start a private one with StartServer")
	}
}

// destroy stops the server for good and removes its directory.
func (s *Server) destroy() {
	s.halt()
	s.mu.Lock()
	s.gone = true
	s.mu.Unlock()
	unregister(s)
	os.RemoveAll(s.dir)
}

// Options returns client options for the server with the harness's
// timeouts, for a test that wants to adjust them before redis.NewClient:
// dial 2s, read and write 3s, pool 4s, and two dial attempts 20ms apart so
// commands to a stopped server fail within a second. Other fields keep
// go-redis's defaults (3 retries, RESP3).
func (s *Server) Options() *redis.Options { return clientOptions(s.Addr) }

func clientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:               addr,
		DialTimeout:        dialTimeout,
		ReadTimeout:        ioTimeout,
		WriteTimeout:       ioTimeout,
		PoolTimeout:        poolTimeout,
		DialerRetries:      dialRetries,
		DialerRetryTimeout: dialBackoff,
	}
}

// Client returns a new client for the server, closed at t.Cleanup.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(s.Options())
	t.Cleanup(func() { c.Close() })
	return c
}

// serverPID asks the server at addr for INFO server and returns its
// process_id, speaking RESP directly so that polling a server that is not
// up yet neither needs nor disturbs a go-redis client.
func serverPID(addr string) (int, error) {
	info, err := rawCommand(addr, "INFO", "server")
	if err != nil {
		return 0, err
	}
	v, ok := infoField(info, "process_id")
	if !ok {
		return 0, fmt.Errorf("INFO server has no process_id: %q", info)
	}
	return strconv.Atoi(v)
}

// infoField returns the value of "name:value" in an INFO or CLUSTER INFO
// reply.
func infoField(info, name string) (string, bool) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v, true
		}
	}
	return "", false
}

// rawCommand sends one command on a new connection and returns a status or
// bulk-string reply. Error replies (such as -LOADING) are returned as errors.
func rawCommand(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
