package redistest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records Skipf and Fatalf instead of
// ending the real test. Only the methods requireBinaries uses are safe.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func runRecorder(f func(testing.TB)) *recorder {
	r := new(recorder)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, tc := range []struct {
		env        string
		skip, fail bool
	}{
		{env: "", skip: true},
		{env: "1", fail: true},
	} {
		t.Setenv(RequireEnv, tc.env)
		r := runRecorder(func(tb testing.TB) { requireBinaries(tb, "redis-server") })
		if (r.skipped != "") != tc.skip || (r.failed != "") != tc.fail {
			t.Errorf("%s=%q: skipped %q, failed %q; want skip %v, fail %v", RequireEnv, tc.env, r.skipped, r.failed, tc.skip, tc.fail)
		}
		for _, msg := range []string{r.skipped, r.failed} {
			if msg != "" && (!strings.Contains(msg, "redis-server") || !strings.Contains(msg, RequireEnv)) {
				t.Errorf("message %q should name redis-server and %s", msg, RequireEnv)
			}
		}
	}
}

func TestDestroyRemovesDir(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	if _, err := serverPID(s.Addr); err != nil {
		t.Fatalf("serverPID(%s): %v", s.Addr, err)
	}
	s.destroy()
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("Stat(%s) after destroy = %v, want not exist", s.dir, err)
	}
	if _, err := serverPID(s.Addr); err == nil {
		t.Errorf("server %s answers after destroy", s.Addr)
	}
	if err := s.Restart(); err == nil {
		t.Errorf("Restart after destroy succeeded")
	}
	registry.Lock()
	_, ok := registry.servers[s]
	registry.Unlock()
	if ok {
		t.Errorf("destroyed server still registered")
	}
}

func TestStartFailureShowsLog(t *testing.T) {
	t.Parallel()
	requireBinaries(t, "redis-server")
	start := time.Now()
	_, err := newServer(false, false, []string{"--no-such-option", "x"})
	if err == nil {
		t.Fatalf("newServer with a bad option succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-option") {
		t.Errorf("error does not quote the server's output: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("failing start took %v", d)
	}
}

func TestPrefixLength(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 300)
	t.Run(long, func(t *testing.T) {
		if p := Prefix(t); len(p) != maxPrefix {
			t.Errorf("len(Prefix) = %d for a long name, want %d", len(p), maxPrefix)
		}
	})
}
