package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluice-go/sluice/httplimit"
	"github.com/sluice-go/sluice/internal/conformance"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/local"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

// windowedProvider builds one sluice provider with the given options.
type windowedProvider struct {
	name string
	new  func(t *testing.T, opts ...limiter.Option) (limiter.Limiter, error)
}

func windowedProviders() []windowedProvider {
	mini := func(t *testing.T, opts []limiter.Option) []limiter.Option {
		return append([]limiter.Option{limiter.WithPrefix(redistest.Prefix(t))}, opts...)
	}
	return []windowedProvider{
		{"local/absolute", func(t *testing.T, o ...limiter.Option) (limiter.Limiter, error) { return local.NewAbsolute(o...) }},
		{"local/suppressed", func(t *testing.T, o ...limiter.Option) (limiter.Limiter, error) { return local.NewSuppressed(o...) }},
		{"redisabs", func(t *testing.T, o ...limiter.Option) (limiter.Limiter, error) {
			_, c := redistest.Mini(t)
			return redisabs.New(c, mini(t, o)...)
		}},
		{"redissup", func(t *testing.T, o ...limiter.Option) (limiter.Limiter, error) {
			_, c := redistest.Mini(t)
			return redissup.New(c, mini(t, o)...)
		}},
		{"hybrid/absolute", func(t *testing.T, o ...limiter.Option) (limiter.Limiter, error) {
			_, c := redistest.Mini(t)
			return hybrid.NewAbsolute(c, mini(t, o)...)
		}},
		{"hybrid/suppressed", func(t *testing.T, o ...limiter.Option) (limiter.Limiter, error) {
			_, c := redistest.Mini(t)
			return hybrid.NewSuppressed(c, mini(t, o)...)
		}},
	}
}

// TestWindowFromProvider: on every sluice provider built with a one-minute
// window, a Limit that leaves Window 0 advertises w=60 and enforces it (the
// sixth request of a 5-per-minute limit is refused, still refused 30 s
// later, admitted once the minute and its bucket have passed), and a Limit
// whose window differs from the provider's is an error at New.
func TestWindowFromProvider(t *testing.T) {
	for _, p := range windowedProviders() {
		t.Run(p.name, func(t *testing.T) {
			clk := conformance.NewClock()
			l, err := p.new(t, limiter.WithWindow(time.Minute), limiter.WithClock(clk.Now))
			if err != nil {
				t.Fatalf("new: %v", err)
			}
			t.Cleanup(func() { l.Close(context.Background()) })
			if w, ok := l.(interface{ Window() time.Duration }); !ok || w.Window() != time.Minute {
				t.Fatalf("%T is not a interface{ Window() time.Duration } reporting 1m", l)
			}
			for _, w := range []time.Duration{10 * time.Second, 61 * time.Second, time.Hour} {
				_, err := httplimit.New(l, limiter.Limit{Rate: limiter.PerMinute(5), Window: w})
				if !errors.Is(err, limiter.ErrInvalidConfig) {
					t.Errorf("New with Window %v on a 1m limiter: error %v, want ErrInvalidConfig", w, err)
				}
			}
			if _, err := httplimit.New(l, limiter.Limit{Rate: limiter.PerMinute(5), Window: time.Minute}); err != nil {
				t.Errorf("New with the limiter's own window: %v", err)
			}
			s := serve(t, mustNew(t, l, limiter.Limit{Rate: limiter.PerMinute(5)}))
			get := func(step string, want int) {
				t.Helper()
				resp := s.get(t, "/")
				if resp.status != want {
					t.Errorf("%s: status %d, want %d", step, resp.status, want)
				}
				if got, wantP := resp.header.Get("RateLimit-Policy"), `"default";q=5;w=60`; got != wantP {
					t.Errorf("%s: RateLimit-Policy %q, want %q", step, got, wantP)
				}
			}
			for i := range 5 {
				get(fmt.Sprintf("request %d", i+1), http.StatusOK)
			}
			get("request 6", http.StatusTooManyRequests)
			clk.Advance(30 * time.Second)
			get("30 s later", http.StatusTooManyRequests)
			clk.Advance(31 * time.Second) // W + B = 60.6 s after the first
			get("61 s later", http.StatusOK)
		})
	}
}

// TestWindowUnreported: a Limiter that does not report its window must be
// given one, and the middleware advertises the one given.
func TestWindowUnreported(t *testing.T) {
	rec := &recorder{Limiter: newLocal(t, conformance.NewClock(), 10*time.Second)}
	if _, ok := any(rec).(interface{ Window() time.Duration }); ok {
		t.Fatal("the recorder reports a window; the test needs one that does not")
	}
	if _, err := httplimit.New(rec, limiter.Limit{Rate: limiter.PerSecond(1)}); !errors.Is(err, limiter.ErrInvalidConfig) {
		t.Errorf("New without a window on a limiter that reports none: error %v, want ErrInvalidConfig", err)
	}
	s := serve(t, mustNew(t, rec, limiter.Limit{Rate: limiter.PerSecond(1), Window: 10 * time.Second}))
	if got, want := s.get(t, "/").header.Get("RateLimit-Policy"), `"default";q=10;w=10`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
}

// TestSkipMethods: OPTIONS is exempt by default and HEAD is counted;
// WithSkipMethods replaces the set (lower case accepted), and with no
// method counts OPTIONS too; an empty method is a configuration error.
func TestSkipMethods(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []httplimit.Option
		counted map[string]bool
	}{
		{"default", nil, map[string]bool{"OPTIONS": false, "HEAD": true, "GET": true}},
		{"options and head", []httplimit.Option{httplimit.WithSkipMethods("options", "HEAD")}, map[string]bool{"OPTIONS": false, "HEAD": false, "GET": true}},
		{"none", []httplimit.Option{httplimit.WithSkipMethods()}, map[string]bool{"OPTIONS": true, "HEAD": true, "GET": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{Limiter: newLocal(t, conformance.NewClock(), time.Minute)}
			s := serve(t, mustNew(t, rec, limiter.Limit{Rate: limiter.PerMinute(100), Window: time.Minute}, tc.opts...))
			for _, method := range []string{"OPTIONS", "HEAD", "GET"} {
				before := rec.calls()
				req, err := http.NewRequest(method, s.URL+"/", nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := s.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				counted := rec.calls() > before
				if counted != tc.counted[method] || (resp.Header.Get("RateLimit") != "") != counted || resp.StatusCode != http.StatusOK {
					t.Errorf("%s: counted %v, RateLimit %q, status %d; want counted %v", method, counted, resp.Header.Get("RateLimit"), resp.StatusCode, tc.counted[method])
				}
			}
		})
	}
	if _, err := httplimit.New(newLocal(t, nil, time.Minute), limiter.Limit{Rate: limiter.PerSecond(1)}, httplimit.WithSkipMethods("")); !errors.Is(err, limiter.ErrInvalidConfig) {
		t.Errorf("WithSkipMethods(\"\"): error %v, want ErrInvalidConfig", err)
	}
}
