package sluiceotel_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/window"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/local"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
	"github.com/sluice-go/sluice/sluiceotel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

var ctx = context.Background()

// export collects reader's metrics: for each instrument name, each data
// point's attributes (encoded "k=v,k=v", sorted) → its value (counters,
// gauges) or its sample count (histograms).
func export(t *testing.T, reader *sdkmetric.ManualReader) map[string]map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	enc := attribute.DefaultEncoder()
	out := map[string]map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != sluiceotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, sluiceotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			pts := map[string]int64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					pts[p.Attributes.Encoded(enc)] = p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					pts[p.Attributes.Encoded(enc)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					pts[p.Attributes.Encoded(enc)] = int64(p.Count)
				}
			default:
				t.Errorf("metric %s has data %T", m.Name, m.Data)
			}
			out[m.Name] = pts
		}
	}
	return out
}

// dec is the encoded attribute set of a decision.
// dec is the attributes of a decision answered by Redis (the local
// provider for provider "local", the policy when degraded).
func dec(provider, strategy, outcome string, allowed, degraded bool, limit string) string {
	source := "redis"
	switch {
	case provider == "local":
		source = "local"
	case degraded:
		source = "policy"
	}
	return decFrom(provider, strategy, outcome, allowed, degraded, limit, source)
}

// decFrom is dec with the source given.
func decFrom(provider, strategy, outcome string, allowed, degraded bool, limit, source string) string {
	b := func(v bool) string {
		if v {
			return "true"
		}
		return "false"
	}
	s := "sluice.allowed=" + b(allowed) + ",sluice.degraded=" + b(degraded)
	if limit != "" {
		s += ",sluice.limit=" + limit
	}
	return s + ",sluice.outcome=" + outcome + ",sluice.provider=" + provider + ",sluice.source=" + source + ",sluice.strategy=" + strategy
}

// silentClient is a client of a server that accepts connections, never
// answers, and hangs up 200 ms after each connection opened: a call with
// a shorter timeout times out (and is shed), and the confirming probe
// then sees the connection closed, evidence of an outage from the wire.
func silentClient(t *testing.T) *redis.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				time.AfterFunc(200*time.Millisecond, func() { c.Close() })
				io.Copy(io.Discard, c)
			}()
		}
	}()
	c := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

func call(provider, op, errType string) string {
	s := ""
	if errType != "" {
		s = "error.type=" + errType + ","
	}
	return s + "sluice.operation=" + op + ",sluice.provider=" + provider
}

type step struct {
	name       string
	do         func() (limiter.Decision, error)
	suppressed bool
	allowed    bool
	degraded   bool
}

// TestMetrics drives allowed, rejected, suppressed and degraded decisions
// through the local and Redis providers of both strategies, on miniredis
// and on a real Redis, and checks every exported count.
func TestMetrics(t *testing.T) {
	for _, backend := range []string{"miniredis", "redis"} {
		t.Run(backend, func(t *testing.T) {
			var client *redis.Client
			if backend == "miniredis" {
				_, client = redistest.Mini(t)
			} else {
				client = redistest.Real(t).Client(t)
			}
			testMetrics(t, client)
		})
	}
}

func testMetrics(t *testing.T, client *redis.Client) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(ctx)
	obs, err := sluiceotel.New(sluiceotel.WithMeterProvider(mp), sluiceotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()

	changed := make(chan limiter.StateChange, 4)
	// Each provider is given the options it reads: the observer, the
	// suppressed strategy's to the suppressed ones, the Redis ones to those
	// in Redis.
	observe := []limiter.Option{limiter.WithObserver(limiter.MultiObserver(obs,
		window.StateObserver(func(sc limiter.StateChange) { changed <- sc })))}
	supOpts := []limiter.Option{limiter.WithHardLimitFactor(2), limiter.WithSuppressionCache(0),
		limiter.WithRandom(func() float64 { return 0.999 })}
	inRedis := []limiter.Option{limiter.WithPrefix(redistest.Prefix(t)), limiter.WithProbeInterval(time.Minute)}
	with := func(lists ...[]limiter.Option) []limiter.Option {
		return slices.Concat(append([][]limiter.Option{observe}, lists...)...)
	}
	must := func(l limiter.Limiter, err error) limiter.Limiter {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close(ctx) })
		return l
	}
	localAbs := must(local.NewAbsolute(with()...))
	localSup := must(local.NewSuppressed(with(supOpts)...))
	redisAbs := must(redisabs.New(client, with(inRedis)...))
	redisSup := must(redissup.New(client, with(inRedis, supOpts)...))
	// The healthy limiters keep the default timeout: a shorter one sheds
	// calls on a loaded machine (CI runs packages in parallel on two
	// cores), which is right for a limiter and wrong for this test. The
	// dead ones take a short timeout only so the test does not wait.
	downAbs := must(redisabs.New(silentClient(t), with(inRedis,
		[]limiter.Option{limiter.WithFailurePolicy(limiter.FailOpen), limiter.WithTimeout(50 * time.Millisecond)})...))
	downSup := must(redissup.New(silentClient(t), with(inRedis, supOpts,
		[]limiter.Option{limiter.WithFailurePolicy(limiter.FailClosed), limiter.WithTimeout(50 * time.Millisecond)})...))
	set, err := limiter.NewSet(limiter.Limit{Name: "per-minute", Rate: limiter.PerMinute(1), Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	two := limiter.PerMinute(2)
	inc := func(l limiter.Limiter, n int64) func() (limiter.Decision, error) {
		return func() (limiter.Decision, error) { return l.Inc(ctx, "k", two, n) }
	}
	isAllowed := func(l limiter.Limiter) func() (limiter.Decision, error) {
		return func() (limiter.Decision, error) { return l.IsAllowed(ctx, "k") }
	}
	incSet := func(l limiter.Limiter) func() (limiter.Decision, error) {
		return func() (limiter.Decision, error) {
			d, err := l.(limiter.SetLimiter).IncSet(ctx, "k", set, 1)
			return d.Decision, err
		}
	}
	A, R, S := false, false, true // suppressed: the strategy was above its soft target
	var steps []step
	for _, l := range []struct {
		name     string
		abs, sup limiter.Limiter
	}{{"local", localAbs, localSup}, {"redis", redisAbs, redisSup}} {
		steps = append(steps,
			step{l.name + " abs 1", inc(l.abs, 1), A, true, false},
			step{l.name + " abs 2", inc(l.abs, 1), A, true, false},
			step{l.name + " abs full", inc(l.abs, 1), R, false, false},
			step{l.name + " abs full again", inc(l.abs, 1), R, false, false}, // redis: from relief's memory
			step{l.name + " abs peek", isAllowed(l.abs), R, false, false},
			step{l.name + " set 1", incSet(l.abs), A, true, false},
			step{l.name + " set full", incSet(l.abs), R, false, false},
			step{l.name + " sup 2", inc(l.sup, 2), A, true, false},
			step{l.name + " sup above soft", inc(l.sup, 1), S, true, false},
			step{l.name + " sup above hard", inc(l.sup, 2), S, false, false},
		)
	}
	// A call that times out is shed (refused, not degraded): a timeout is
	// no evidence of an outage until a probe confirms it. Once the probe
	// has opened the breaker (the state change), the policy answers.
	opened := func(do func() (limiter.Decision, error)) func() (limiter.Decision, error) {
		return func() (limiter.Decision, error) {
			select {
			case sc := <-changed:
				if !sc.Degraded {
					t.Fatalf("state change %+v, want entering degraded mode", sc)
				}
			case <-time.After(time.Minute): // a guard against a hang only
				t.Fatal("the probe did not open the breaker within a minute")
			}
			return do()
		}
	}
	steps = append(steps,
		step{"down abs, call times out", inc(downAbs, 1), R, false, false},
		step{"down abs, breaker open", opened(inc(downAbs, 1)), A, true, true},
		step{"down sup, call times out", inc(downSup, 1), S, false, false},
		step{"down sup, breaker open", opened(inc(downSup, 1)), S, false, true},
	)
	for _, s := range steps {
		d, err := s.do()
		if err != nil || d.Suppressed != s.suppressed || d.Allowed != s.allowed || d.Degraded != s.degraded {
			t.Fatalf("%s = %+v, %v; want suppressed %v, allowed %v, degraded %v", s.name, d, err, s.suppressed, s.allowed, s.degraded)
		}
	}

	got := export(t, reader)
	const abs, sup = "absolute", "suppressed"
	want := map[string]map[string]int64{
		"sluice.decisions": {},
		"sluice.backend.duration": {
			call("redisabs", "inc", ""):        3,
			call("redisabs", "is_allowed", ""): 1,
			call("redisabs", "inc_set", ""):    2,
			call("redissup", "inc", ""):        3,
			call("redisabs", "inc", "timeout"): 1,
			call("redissup", "inc", "timeout"): 1,
		},
		"sluice.backend.errors": {
			call("redisabs", "inc", "timeout"): 1,
			call("redissup", "inc", "timeout"): 1,
		},
		"sluice.degraded": {
			"sluice.provider=redisabs": 1,
			"sluice.provider=redissup": 1,
			"sluice.provider=hybrid":   0,
		},
		"sluice.state_changes": {
			"sluice.degraded=true,sluice.provider=redisabs": 1,
			"sluice.degraded=true,sluice.provider=redissup": 1,
		},
	}
	for _, p := range []string{"local", "redisabs"} {
		for k, v := range map[string]int64{
			dec(p, abs, "allowed", true, false, ""):             2,
			dec(p, abs, "rejected", false, false, ""):           3,
			dec(p, abs, "allowed", true, false, "per-minute"):   1,
			dec(p, abs, "rejected", false, false, "per-minute"): 1,
		} {
			want["sluice.decisions"][k] = v
		}
	}
	for _, p := range []string{"local", "redissup"} {
		for k, v := range map[string]int64{
			dec(p, sup, "allowed", true, false, ""):     1,
			dec(p, sup, "suppressed", true, false, ""):  1,
			dec(p, sup, "suppressed", false, false, ""): 1,
		} {
			want["sluice.decisions"][k] = v
		}
	}
	// The shed calls are refusals, not degraded, of their own source.
	want["sluice.decisions"][dec("redisabs", abs, "rejected", false, false, "")] = 2
	want["sluice.decisions"][decFrom("redisabs", abs, "rejected", false, false, "", "memory")] = 1
	want["sluice.decisions"][dec("redissup", sup, "suppressed", false, false, "")] = 1
	want["sluice.decisions"][decFrom("redisabs", abs, "rejected", false, false, "", "shed")] = 1
	want["sluice.decisions"][decFrom("redissup", sup, "suppressed", false, false, "", "shed")] = 1
	want["sluice.decisions"][dec("redisabs", abs, "allowed", true, true, "")] = 1
	want["sluice.decisions"][dec("redissup", sup, "suppressed", false, true, "")] = 1
	compare(t, got, want)

	// One client span per Redis call made for a decision, timed as the
	// call was, with the decision's attributes.
	ended := spans.Ended()
	if len(ended) != 11 {
		t.Fatalf("%d spans, want 11 (one per Redis call of a decision)", len(ended))
	}
	failed := 0
	for _, sp := range ended {
		if !strings.HasPrefix(sp.Name(), "sluice.") || sp.EndTime().Before(sp.StartTime()) || sp.EndTime().Equal(sp.StartTime()) {
			t.Errorf("span %q from %v to %v", sp.Name(), sp.StartTime(), sp.EndTime())
		}
		if sp.Status().Code.String() == "Error" {
			failed++
			if d := sp.EndTime().Sub(sp.StartTime()); d < 40*time.Millisecond {
				t.Errorf("failed span %q lasted %v, want about the 50ms timeout", sp.Name(), d)
			}
		}
	}
	if failed != 2 {
		t.Errorf("%d failed spans, want 2", failed)
	}

	// Limiters closed while degraded leave degraded mode: the gauge
	// counts none, and each closing is a state change.
	for _, l := range []limiter.Limiter{downAbs, downSup} {
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got = export(t, reader)
	compare(t, map[string]map[string]int64{"sluice.degraded": got["sluice.degraded"], "sluice.state_changes": got["sluice.state_changes"]},
		map[string]map[string]int64{
			"sluice.degraded": {
				"sluice.provider=redisabs": 0,
				"sluice.provider=redissup": 0,
				"sluice.provider=hybrid":   0,
			},
			"sluice.state_changes": {
				"sluice.degraded=true,sluice.provider=redisabs":  1,
				"sluice.degraded=true,sluice.provider=redissup":  1,
				"sluice.degraded=false,sluice.provider=redisabs": 1,
				"sluice.degraded=false,sluice.provider=redissup": 1,
			},
		})
}

// compare reports every difference between two exports.
func compare(t *testing.T, got, want map[string]map[string]int64) {
	t.Helper()
	for name, pts := range want {
		g := got[name]
		for attrs, v := range pts {
			if g[attrs] != v {
				t.Errorf("%s{%s} = %d, want %d", name, attrs, g[attrs], v)
			}
		}
		var extra []string
		for attrs, v := range g {
			if _, ok := pts[attrs]; !ok {
				extra = append(extra, attrs+"="+itoa(v))
			}
		}
		sort.Strings(extra)
		if len(extra) > 0 {
			t.Errorf("%s has unexpected points: %v", name, extra)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected metric %s: %v", name, got[name])
		}
	}
}

func itoa(v int64) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	neg := v < 0
	if neg {
		v = -v
	}
	for ; v > 0; v /= 10 {
		b = append([]byte{byte('0' + v%10)}, b...)
	}
	if neg {
		b = append([]byte{'-'}, b...)
	}
	return string(b)
}

// TestKeyAttribute: the key is an attribute only when asked, for the
// first keys up to the bound.
func TestKeyAttribute(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	obs, err := sluiceotel.New(sluiceotel.WithMeterProvider(mp), sluiceotel.WithKeyAttribute(2))
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	l, err := local.NewAbsolute(limiter.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	for _, k := range []string{"a", "b", "c", "a", "d"} {
		if _, err := l.Inc(ctx, k, limiter.PerSecond(10), 1); err != nil {
			t.Fatal(err)
		}
	}
	got := export(t, reader)["sluice.decisions"]
	base := dec("local", "absolute", "allowed", true, false, "")
	withKey := func(k string) string {
		return strings.Replace(base, ",sluice.outcome", ",sluice.key="+k+",sluice.outcome", 1)
	}
	want := map[string]int64{withKey("a"): 2, withKey("b"): 1, withKey(sluiceotel.OtherKey): 2}
	compare(t, map[string]map[string]int64{"d": got}, map[string]map[string]int64{"d": want})
}

// TestCleanupAndOptions: a cleanup report is counted by action, and bad
// options are errors.
func TestCleanupAndOptions(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	obs, err := sluiceotel.New(sluiceotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	obs.ObserveEvent(ctx, limiter.Event{Kind: "cleanup", Provider: "cleanup",
		Cleanup: limiter.CleanupReport{Scanned: 10, Deleted: 3, Trimmed: 1, Duration: time.Second}})
	obs.ObserveEvent(ctx, limiter.Event{Kind: "cleanup", Provider: "cleanup",
		Cleanup: limiter.CleanupReport{Scanned: 5, Err: errors.New("lost"), ErrorClass: "connection"}})
	got := export(t, reader)
	compare(t, map[string]map[string]int64{"runs": got["sluice.cleanup.runs"], "keys": got["sluice.cleanup.keys"]},
		map[string]map[string]int64{
			"runs": {"": 1, "error.type=connection": 1},
			"keys": {"sluice.cleanup.action=scanned": 15, "sluice.cleanup.action=deleted": 3, "sluice.cleanup.action=trimmed": 1},
		})
	for _, o := range []sluiceotel.Option{sluiceotel.WithMeterProvider(nil), sluiceotel.WithTracerProvider(nil), sluiceotel.WithKeyAttribute(0)} {
		if _, err := sluiceotel.New(o); !errors.Is(err, sluiceotel.ErrInvalidOption) {
			t.Errorf("New with a bad option: %v, want ErrInvalidOption", err)
		}
	}
}
