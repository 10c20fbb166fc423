package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeRatePerSecond: serve --rate 5/s admits five requests of one
// client and refuses the sixth within the same second (the window is the
// rate's second, so the policy says q=5;w=1), and admits again once the
// second has passed.
func TestServeRatePerSecond(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, out, _, done := startServe(t, ctx, "--rate", "5/s", "--by", "header:X-User")
	// The limit line follows the listening line, which startServe waits
	// for: give it a moment.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(out.String(), "Limit: 5/s over a window of 1s = 5 requests per key"); {
		if time.Now().After(deadline) {
			t.Errorf("banner:\n%s\nwant the limit line for 5/s over 1s", out.String())
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	// A loaded machine may stretch six loopback requests past a second,
	// when the first has left the window; each try uses a new key.
	for try := range 3 {
		user := fmt.Sprintf("u%d", try)
		start := time.Now()
		var codes []int
		var last served
		for range 6 {
			last = getURL(t, c, url+"/", "X-User", user)
			codes = append(codes, last.status)
		}
		if time.Since(start) >= 900*time.Millisecond {
			continue
		}
		if got, want := fmt.Sprint(codes), "[200 200 200 200 200 429]"; got != want {
			t.Errorf("statuses %s, want %s", got, want)
		}
		if got, want := last.header.Get("RateLimit-Policy"), `"default";q=5;w=1`; got != want {
			t.Errorf("RateLimit-Policy %q, want %q", got, want)
		}
		time.Sleep(1100 * time.Millisecond) // W + B = 1.01 s
		if s := getURL(t, c, url+"/", "X-User", user); s.status != http.StatusOK {
			t.Errorf("a second later: status %d, want 200", s.status)
		}
		cancel()
		<-done
		return
	}
	t.Fatal("six requests took 900 ms or more three times: the machine is too loaded to test a one-second window")
}

// TestRateSyntaxSameEverywhere: serve and load read --rate with
// limiter.ParseRate and refuse the same strings with the same message.
// An accepted rate gets past --rate to the next check (a bad --by or
// --keys), which is the error then.
func TestRateSyntaxSameEverywhere(t *testing.T) {
	t.Parallel()
	accepted := []string{"5/s", "100/min", "600/minute", "1000/d", "1000/day", "3/10s", "0.5/s", "5/h", "2e3/h", "250/ms", "7/sec"}
	refused := map[string]string{
		"600/m":   `ambiguous unit "m" (want "min" or "ms")`,
		"100":     "want COUNT/PERIOD",
		"fast":    "want COUNT/PERIOD",
		"0/s":     `count "0" is zero`,
		"-1/s":    "not an unsigned decimal number",
		"5/S":     `unknown unit "S"`,
		"5/week":  `unknown unit "week" (want ms, s, min, h or d)`,
		"5/ s":    "unknown unit",
		"1e400/s": "out of range",
	}
	cmds := map[string][]string{
		"serve": {"--by", "cookie"},
		"load":  {"--keys", "0"},
	}
	for cmd, next := range cmds {
		for _, r := range accepted {
			st, _, stderr := runArgs(t, append([]string{cmd, "--rate", r}, next...)...)
			if st != exitUsage || !strings.Contains(firstLine(stderr), next[0]) {
				t.Errorf("sluice %s --rate %s: status %d, stderr %q; want the rate accepted and %s refused", cmd, r, st, firstLine(stderr), next[0])
			}
		}
		for r, want := range refused {
			st, _, stderr := runArgs(t, cmd, "--rate", r)
			line := firstLine(stderr)
			if st != exitUsage || !strings.HasPrefix(line, "sluice "+cmd+": --rate: invalid rate: parse ") || !strings.Contains(line, want) {
				t.Errorf("sluice %s --rate %q: status %d, stderr %q; want 2 and %q", cmd, r, st, line, want)
			}
		}
	}
}

// TestRateWindow: without --window, the window is the rate's period, or
// for a count below one, the shortest multiple of it that holds one unit;
// with --window, that window.
func TestRateWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rate, window string // window "" for none
		wantW        time.Duration
		wantC        int64
		note         string
	}{
		{"5/s", "", time.Second, 5, ""},
		{"100/min", "", time.Minute, 100, ""},
		{"3/10s", "", 10 * time.Second, 3, ""},
		{"5/h", "", time.Hour, 5, ""},
		{"1000/d", "", 24 * time.Hour, 1000, ""},
		{"250/ms", "", time.Millisecond, 250, ""},
		{"2.5/s", "", time.Second, 2, ""},
		{"0.5/s", "", 2 * time.Second, 1, "2s, the shortest multiple of 1s that holds one unit"},
		{"0.3/s", "", 4 * time.Second, 1, "4s, the shortest multiple of 1s that holds one unit"},
		{"0.25/min", "", 4 * time.Minute, 1, "4m0s, the shortest multiple of 1m0s that holds one unit"},
		{"5/s", "10s", 10 * time.Second, 50, ""},
		{"100/min", "10s", 10 * time.Second, 16, ""},
	} {
		fs := newFlagSet("load", "")
		window := fs.Duration("window", 0, "")
		args := []string{}
		if tc.window != "" {
			args = append(args, "--window", tc.window)
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		_, w, c, note, st := limitFlags(fs, &stderr, tc.rate, *window)
		if st != exitOK || w != tc.wantW || c != tc.wantC || note != tc.note {
			t.Errorf("--rate %s --window %q: window %v, capacity %d, note %q, status %d (%s); want %v, %d, %q",
				tc.rate, tc.window, w, c, note, st, stderr.String(), tc.wantW, tc.wantC, tc.note)
		}
	}
}

// TestLoadBannerRate: the banner writes the rate as it was given (5/h, not
// a rounded per-second figure) with the window it takes.
func TestLoadBannerRate(t *testing.T) {
	t.Parallel()
	st, stdout, stderr := runArgs(t, "load", "--provider", "local", "--rate", "5/h", "--duration", "100ms", "--keys", "1", "--clients", "1", "--bursts=false")
	if st != exitOK {
		t.Fatalf("load = %d; stderr:\n%s", st, stderr)
	}
	for _, want := range []string{"Policies (window 1h0m0s, bucket 36s):", "5/h", "capacity 5 per window"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("load --rate 5/h: no %q in\n%s", want, stdout)
		}
	}
	st, stdout, stderr = runArgs(t, "load", "--provider", "local", "--rate", "0.5/s", "--duration", "100ms", "--keys", "1", "--clients", "1", "--bursts=false")
	if want := "Policies (window 2s, the shortest multiple of 1s that holds one unit, bucket 20ms):"; st != exitOK || !strings.Contains(stdout, want) {
		t.Errorf("load --rate 0.5/s = %d: no %q in\n%s%s", st, want, stdout, stderr)
	}
}

// TestNoArguments: sluice alone is a usage error: the usage goes to
// stderr, stdout stays empty, and the status is 2, as with go alone;
// sluice help prints the same usage on stdout with status 0.
func TestNoArguments(t *testing.T) {
	t.Parallel()
	st, stdout, stderr := runArgs(t)
	if st != exitUsage || stdout != "" || !strings.Contains(stderr, "Usage:") {
		t.Errorf("sluice = %d, stdout %q, stderr %q; want 2, nothing, the usage", st, stdout, stderr)
	}
	st, help, _ := runArgs(t, "help")
	if st != exitOK || help != stderr {
		t.Errorf("sluice help = %d, stdout %q; want 0 and the usage sluice alone prints", st, help)
	}
}
