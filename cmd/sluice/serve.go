package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sluice-go/sluice/httplimit"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/redisabs"
)

func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve",
		"Serves HTTP behind the sluice middleware (package httplimit) on the Redis\n"+
			"absolute limiter: an embedded miniredis unless --redis is given, so it needs\n"+
			"no server. Every request is keyed (--by), counted, and answered 200 or 429\n"+
			"with Retry-After and the RateLimit-Policy and RateLimit headers. Each\n"+
			"request is logged on stdout. Ctrl-C stops it. Try:\n\n"+
			"  for i in 1 2 3 4 5 6; do curl -si localhost:8080/ | grep -iE '^(HTTP|ratelimit|retry)'; done")
	listen := fs.String("listen", "localhost:8080", "listen on `ADDR` (host:port; :8080 for every interface)")
	redisURL := fs.String("redis", "", "use the Redis server at `URL` instead of an embedded one")
	rateFlag := fs.String("rate", "5/10s", rateHelp)
	window := fs.Duration("window", 0, "sliding window W, for a rate averaged over a longer window: the capacity is rate × W; default the rate's UNIT")
	by := fs.String("by", "ip", "[ip|header:NAME] key each request by the client address or by a request header")
	trust := fs.String("trust", "", "with --by ip: comma-separated `CIDRs` of trusted proxies whose --proxy-header is read")
	proxyHeader := fs.String("proxy-header", httplimit.HeaderXForwardedFor, "the header trusted proxies set: X-Forwarded-For, Forwarded or X-Real-IP")
	legacy := fs.Bool("legacy-headers", false, "add X-RateLimit-Limit, -Remaining and -Reset")
	if st, done := parse(fs, args, stdout, stderr); done {
		return st
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	rate, w, capacity, note, st := limitFlags(fs, stderr, *rateFlag, *window)
	if st != exitOK {
		return st
	}
	*window = w
	if note == "" {
		note = w.String()
	}
	var keyFn httplimit.KeyFunc
	switch name, ok := strings.CutPrefix(*by, "header:"); {
	case *by == "ip":
		var opts []httplimit.IPOption
		if *trust != "" {
			opts = append(opts, httplimit.TrustProxies(*proxyHeader, strings.Split(*trust, ",")...))
		}
		k, err := httplimit.NewIPKey(opts...)
		if err != nil {
			return usageError(fs, stderr, "--trust: %v", err)
		}
		keyFn = k.Key
	case ok && name != "":
		if *trust != "" {
			return usageError(fs, stderr, "--trust goes with --by ip")
		}
		keyFn = httplimit.KeyByHeader(name)
	default:
		return usageError(fs, stderr, "--by %q: want ip or header:NAME", *by)
	}

	r, err := openRedis(ctx, *redisURL)
	if err != nil {
		var ue usageErr
		if errors.As(err, &ue) {
			return usageError(fs, stderr, "%v", err)
		}
		fmt.Fprintln(stderr, plain(fmt.Sprintf("sluice serve: %v", err)))
		return exitFailure
	}
	defer r.close()
	client := r.newClient()
	defer client.Close()
	prefix := runPrefix("serve")
	l, err := redisabs.New(client, limiter.WithWindow(*window), limiter.WithPrefix(prefix))
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	defer l.Close(context.Background())
	// The start-up check: a Redis that answers PING but cannot run the
	// limiter's scripts or take its writes (a read-only replica, a denied
	// command) is an error here, not a server limiting from memory.
	if err := l.Ping(ctx); err != nil {
		fmt.Fprintln(stderr, plain(fmt.Sprintf("sluice serve: %v", err)))
		return exitFailure
	}
	opts := []httplimit.Option{httplimit.WithKey(keyFn)}
	if *legacy {
		opts = append(opts, httplimit.WithLegacyHeaders())
	}
	mw, err := httplimit.New(l, limiter.Limit{Rate: rate}, opts...)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, plain(fmt.Sprintf("sluice serve: %v", err)))
		return exitFailure
	}
	out := &lockedWriter{w: stdout}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "ok: %s %s was admitted\n", r.Method, r.URL.Path)
	})
	srv := &http.Server{
		Handler:           logRequests(out, keyFn, mw.Handler(hello)),
		ReadHeaderTimeout: 10 * time.Second,
	}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "sluice serve: listening on %s\n", url)
	fmt.Fprintf(out, "Limit: %s over a window of %s = %d requests per key (--by %s); Redis: %s.\n", *rateFlag, note, capacity, *by, r.where)
	fmt.Fprintf(out, "Try: for i in $(seq %d); do curl -si %s/ | grep -iE '^(HTTP|ratelimit|retry)'; done\n", capacity+1, url)
	// What inspect needs: the server, the per-run prefix and a key as
	// each request's line logs it.
	inspectURL := *redisURL
	if inspectURL == "" {
		inspectURL = "redis://" + r.opts.Addr // the embedded one, while serve runs
	}
	fmt.Fprintf(out, "Keys: under prefix %s; while a key's window lasts, see it with\n", prefix)
	fmt.Fprintf(out, "  sluice inspect --redis %s --prefix %s --strategy absolute KEY\n", shellURL(inspectURL), prefix)
	fmt.Fprintf(out, "  (KEY: the key= of a request's line below).\n")
	fmt.Fprintf(out, "Ctrl-C stops.\n")

	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		fmt.Fprintln(stderr, plain(fmt.Sprintf("sluice serve: %v", err)))
		return exitFailure
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		fmt.Fprintln(stderr, plain(fmt.Sprintf("sluice serve: shutdown: %v", err)))
		return exitFailure
	}
	<-done
	fmt.Fprintf(out, "sluice serve: stopped.\n")
	return exitOK
}

// lockedWriter serialises the log lines of concurrent requests.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// logRequests logs one line per request: time, method, path, key, status
// and the rate-limit headers.
func logRequests(w io.Writer, keyFn httplimit.KeyFunc, next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: rw}
		next.ServeHTTP(sw, r)
		k, err := keyFn(r)
		if err != nil {
			k = "(" + err.Error() + ")"
		}
		h := rw.Header()
		line := fmt.Sprintf("%s %s %s key=%s -> %d", time.Now().Format("15:04:05.000"), r.Method, r.URL.Path, k, sw.code)
		if v := h.Get("RateLimit"); v != "" {
			line += "  RateLimit: " + v
		}
		if v := h.Get("Retry-After"); v != "" {
			line += "  Retry-After: " + v
		}
		fmt.Fprintln(w, line)
	})
}
