package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/redistest"
)

func TestServeUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--rate", "fast"}, "--rate"},
		{[]string{"serve", "--rate", "1/day", "--window", "1s"}, "capacity below one unit: 1/day over 1s is 1.15741e-05 units; raise --window to 24h0m0s or more"},
		{[]string{"serve", "--by", "cookie"}, `--by "cookie"`},
		{[]string{"serve", "--by", "header:"}, `--by "header:"`},
		{[]string{"serve", "--trust", "10.0.0.0/33"}, "--trust"},
		{[]string{"serve", "--trust", "10.0.0.0/8", "--proxy-header", "X-Client-IP"}, "X-Client-IP"},
		{[]string{"serve", "--by", "header:X-User", "--trust", "10.0.0.0/8"}, "--trust goes with --by ip"},
		{[]string{"serve", "--redis", "http://x"}, "--redis"},
		{[]string{"serve", "now"}, `unexpected argument "now"`},
	} {
		st, stdout, stderr := runArgs(t, tt.args...)
		if st != exitUsage || stdout != "" || !strings.Contains(firstLine(stderr), tt.want) ||
			!strings.HasPrefix(stderr, "sluice serve: ") || !strings.HasSuffix(stderr, "\nRun 'sluice serve --help' for usage.\n") {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, %q and a hint to --help", tt.args, st, stdout, stderr, exitUsage, tt.want)
		}
	}
}

// lineWriter collects output and hands the first line that starts with
// "sluice serve: listening on " to url.
type lineWriter struct {
	mu  sync.Mutex
	buf strings.Builder
	url chan string
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	before := w.buf.Len()
	w.buf.Write(b)
	if before == 0 {
		line, _, _ := strings.Cut(w.buf.String(), "\n")
		if u, ok := strings.CutPrefix(line, "sluice serve: listening on "); ok {
			w.url <- u
		}
	}
	return len(b), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

type served struct {
	status int
	header http.Header
}

func getURL(t *testing.T, c *http.Client, url string, hdr ...string) served {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return served{resp.StatusCode, resp.Header}
}

// TestServe runs serve in process on an embedded miniredis: 200s up to the
// capacity, then 429 with Retry-After and the RateLimit headers; keyed by
// a header, each value has its own limit; Ctrl-C stops it with status 0.
func TestServe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		hdrs [][]string // one header set per client; each gets the capacity
	}{
		{"ip", nil, [][]string{{"X-Forwarded-For", "1.2.3.4"}}},
		{"header", []string{"--by", "header:X-User"}, [][]string{{"X-User", "alice"}, {"X-User", "bob"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			url, out, stderr, done := startServe(t, ctx, append([]string{"--rate", "3/min", "--window", "1m", "--legacy-headers"}, tc.args...)...)
			c := &http.Client{Timeout: 10 * time.Second}
			for _, hdr := range tc.hdrs {
				var codes []int
				var last served
				for range 4 {
					last = getURL(t, c, url+"/", hdr...)
					codes = append(codes, last.status)
				}
				if fmt.Sprint(codes) != "[200 200 200 429]" {
					t.Errorf("%v: statuses %v, want [200 200 200 429]", hdr, codes)
				}
				ra := last.header.Get("Retry-After")
				if ra != "61" && ra != "60" { // W + B = 60.6 s, less the time the requests took
					t.Errorf("%v: Retry-After %q, want about 61", hdr, ra)
				}
				if got := last.header.Get("RateLimit-Policy"); got != `"default";q=3;w=60` {
					t.Errorf("%v: RateLimit-Policy %q", hdr, got)
				}
				if got := last.header.Get("RateLimit"); got != `"default";r=0;t=`+ra {
					t.Errorf("%v: RateLimit %q, want r=0 and t=Retry-After", hdr, got)
				}
				if got := last.header.Get("X-RateLimit-Limit"); got != "3" {
					t.Errorf("%v: X-RateLimit-Limit %q", hdr, got)
				}
			}
			if tc.name == "header" {
				if s := getURL(t, c, url+"/"); s.status != http.StatusBadRequest {
					t.Errorf("no X-User: status %d, want 400", s.status)
				}
			}
			cancel()
			select {
			case st := <-done:
				if st != exitOK {
					t.Errorf("serve = %d after Ctrl-C, want 0; stderr: %s", st, stderr.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("serve did not stop within 10 s of Ctrl-C")
			}
			o := out.String()
			for _, want := range []string{"embedded miniredis", "-> 429  RateLimit: \"default\";r=0", "sluice serve: stopped."} {
				if !strings.Contains(o, want) {
					t.Errorf("output has no %q:\n%s", want, o)
				}
			}
		})
	}
}

// startServe runs serve in process on 127.0.0.1:0 with args until ctx is
// done, and returns its URL once it listens, its output and the channel of
// its exit status.
func startServe(t *testing.T, ctx context.Context, args ...string) (url string, out *lineWriter, stderr *strings.Builder, done chan int) {
	t.Helper()
	out = &lineWriter{url: make(chan string, 1)}
	stderr = &strings.Builder{}
	done = make(chan int, 1)
	args = append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)
	go func() { done <- runContext(ctx, args, out, stderr) }()
	select {
	case url = <-out.url:
	case st := <-done:
		t.Fatalf("serve exited %d before listening: %s", st, stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not start listening within 20 s")
	}
	return url, out, stderr, done
}

// TestServeBinaryNoRedis runs the sluice binary with a PATH that holds no
// redis-server: serve starts on its embedded Redis, answers 200 then 429,
// and SIGINT stops it with status 0.
func TestServeBinaryNoRedis(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir(), "SLUICE_TEST_MAIN_ARGS=serve --listen 127.0.0.1:0 --rate 1/min --window 1m")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// A locked writer: read while exec's copier goroutine writes it.
	stderr := &lineWriter{url: make(chan string, 1)}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	url := ""
	if lines.Scan() {
		url, _ = strings.CutPrefix(lines.Text(), "sluice serve: listening on ")
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("first line %q, want the address; stderr: %s", lines.Text(), stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	c := &http.Client{Timeout: 10 * time.Second}
	if s := getURL(t, c, url); s.status != 200 {
		t.Errorf("first request: %d", s.status)
	}
	if s := getURL(t, c, url); s.status != 429 || s.header.Get("Retry-After") == "" || s.header.Get("RateLimit") == "" {
		t.Errorf("second request: %d %v, want 429 with Retry-After and RateLimit", s.status, s.header)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve after SIGINT: %v; stderr: %s", err, stderr.String())
	}
}

// TestServeReadOnlyRedis: a Redis that answers PING but refuses the
// limiter's writes (a replica) stops serve at start-up, through the
// limiter's Ping, with an error naming the address: not a server that
// would limit each process from memory.
func TestServeReadOnlyRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, "--replicaof", "127.0.0.1", "1") // a master that never answers
	var stdout, stderr strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a serve that starts runs until then
	defer cancel()
	st := runContext(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--rate", "3/min", "--window", "1m",
		"--redis", "redis://" + srv.Addr}, &stdout, &stderr)
	if st != exitFailure {
		t.Fatalf("serve on a read-only replica = %d, want %d; stderr: %s", st, exitFailure, stderr.String())
	}
	if e := stderr.String(); !strings.Contains(e, "ping "+srv.Addr) || !strings.Contains(e, "READONLY") {
		t.Errorf("stderr %q, want the ping error naming %s and READONLY", e, srv.Addr)
	}
}

// TestServePrintsInspect is the regression test for serve's start-up
// lines, which did not say the per-run prefix: they print an inspect
// command (server, prefix, strategy) that, given a key as the request
// lines show it, reads that key's hash while serve runs, here with the
// limit reached.
func TestServePrintsInspect(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, out, stderr, done := startServe(t, ctx, "--rate", "3/min")
	c := &http.Client{Timeout: 10 * time.Second}
	var codes []int
	for range 4 {
		codes = append(codes, getURL(t, c, url+"/").status)
	}
	if fmt.Sprint(codes) != "[200 200 200 429]" {
		t.Fatalf("statuses %v, want [200 200 200 429]", codes)
	}
	var cmd []string
	k := ""
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && f[0] == "sluice" && f[1] == "inspect" {
			cmd = f[1 : len(f)-1] // without "sluice" and the KEY placeholder
		}
		for _, w := range f {
			if v, ok := strings.CutPrefix(w, "key="); ok {
				k = v // the key as a request's line shows it
			}
		}
	}
	if len(cmd) == 0 || !strings.Contains(out.String(), "Keys: under prefix sluice-serve-") {
		t.Fatalf("serve printed no inspect command with its prefix:\n%s", out.String())
	}
	st, got, errOut := runArgs(t, append(cmd, k)...)
	if st != exitOK {
		t.Fatalf("inspect %q = %d; stderr:\n%s", cmd, st, errOut)
	}
	if want := "3 units admitted in the live window of capacity 3."; !strings.Contains(got, want) {
		t.Errorf("inspect %q: no %q in\n%s", cmd, want, got)
	}
	cancel()
	if st := <-done; st != exitOK {
		t.Errorf("serve = %d after Ctrl-C; stderr: %s", st, stderr.String())
	}
}
