package window_test

import (
	"bytes"
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/window"
	"github.com/sluice-go/sluice/limiter"
)

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

type nopObserver struct{ id int }

func (*nopObserver) ObserveDecision(context.Context, limiter.DecisionEvent) {}
func (*nopObserver) ObserveEvent(context.Context, limiter.Event)            {}

// TestOptionsSetLimitersOwnValues: the configuration holds package
// limiter's own values, not copies converted on the way: the policy, the
// observer (the one channel of state changes) and the clock given to the
// options are what a provider reads, and every error wraps limiter's
// sentinel.
func TestOptionsSetLimitersOwnValues(t *testing.T) {
	var got limiter.StateChange
	obs := &nopObserver{1}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c, err := window.NewConfig(limiter.WithFailurePolicy(limiter.FailClosed),
		limiter.WithObserver(obs), limiter.WithClock(fixedClock(at).Now))
	if err != nil {
		t.Fatal(err)
	}
	var p limiter.FailurePolicy = c.Policy // compiles only if the field has limiter's type
	if p != limiter.FailClosed {
		t.Errorf("Policy = %v, want FailClosed", p)
	}
	if o, ok := c.Observer.(*nopObserver); !ok || o != obs {
		t.Errorf("Observer = %v, want the one given", c.Observer)
	}
	if c.NowMs() != at.UnixMilli() || !c.ClockSet {
		t.Errorf("NowMs = %d, want %d (ClockSet %v)", c.NowMs(), at.UnixMilli(), c.ClockSet)
	}
	sc := limiter.StateChange{Provider: "redisabs", Degraded: true, Cause: errors.New("x"), Policy: limiter.FailClosed,
		Duration: 3, Reconciled: 4, Unreconciled: 5, UnreconciledUnits: 6}
	window.StateObserver(func(sc limiter.StateChange) { got = sc }).ObserveEvent(context.Background(),
		limiter.Event{Kind: "state_change", Provider: sc.Provider, State: sc})
	if got != sc {
		t.Errorf("state observer got %+v, want %+v", got, sc)
	}
	if c, _ := window.NewConfig(limiter.WithObserver(nil)); c.Observer != nil || !c.ObserverSet {
		t.Errorf("WithObserver(nil): Observer %v, ObserverSet %v; want nil, true (the default log silenced)", c.Observer, c.ObserverSet)
	}
	for _, o := range []limiter.Option{limiter.WithWindow(0), limiter.WithBatching(-1), limiter.WithFailurePolicy(7),
		limiter.WithFailurePolicy(-1), limiter.WithPrefix("a b")} {
		if _, err := window.NewConfig(o); !errors.Is(err, limiter.ErrInvalidConfig) {
			t.Errorf("window.New: %v, want limiter.ErrInvalidConfig", err)
		}
	}
	if err := window.ValidatePrefix("{x}"); !errors.Is(err, limiter.ErrInvalidConfig) {
		t.Errorf("ValidatePrefix({x}) = %v, want limiter.ErrInvalidConfig", err)
	}
	if err := window.CheckCost(-1); !errors.Is(err, limiter.ErrInvalidCost) {
		t.Errorf("CheckCost(-1) = %v, want limiter.ErrInvalidCost", err)
	}
}

// TestLogStateChangeIsTheLogObservers: a provider's WithLogger and a
// NewLogObserver write the same record for a state change.
func TestLogStateChangeIsTheLogObservers(t *testing.T) {
	for _, sc := range []limiter.StateChange{
		{Provider: "redissup", Degraded: true, Cause: errors.New("refused"), Policy: limiter.FailOpen},
		{Provider: "redisabs", Duration: time.Second, Reconciled: 2},
		{Provider: "redisabs", Cause: limiter.ErrClosed},
	} {
		var a, b bytes.Buffer
		strip := func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}
		window.LogStateChange(context.Background(), slog.New(slog.NewTextHandler(&a, &slog.HandlerOptions{ReplaceAttr: strip})), sc)
		limiter.NewLogObserver(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: strip}))).
			ObserveEvent(context.Background(), limiter.Event{Kind: window.EventStateChange, Provider: sc.Provider, State: sc})
		if a.Len() == 0 || a.String() != b.String() {
			t.Errorf("LogStateChange wrote %q, the log observer %q", a.String(), b.String())
		}
	}
}

// TestOneDefinitionPerSentinel: every "sluice: …" error message is created
// by one errors.New in the module (outside tests), and no package assigns
// to another package's variables in an init function: the sentinels are
// not mirrored.
func TestOneDefinitionPerSentinel(t *testing.T) {
	root := filepath.Join("..", "..")
	seen := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "bench" || n == "sluiceotel") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "New" && len(n.Args) == 1 {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "errors" {
						if lit, ok := n.Args[0].(*ast.BasicLit); ok {
							msg, _ := strconv.Unquote(lit.Value)
							if prev, dup := seen[msg]; dup && strings.HasPrefix(msg, "sluice") {
								t.Errorf("%q defined at %s and %s", msg, prev, fset.Position(n.Pos()))
							}
							seen[msg] = fset.Position(n.Pos()).String()
						}
					}
				}
			case *ast.FuncDecl:
				if n.Name.Name != "init" || n.Recv != nil || n.Body == nil {
					return true
				}
				ast.Inspect(n.Body, func(m ast.Node) bool {
					if as, ok := m.(*ast.AssignStmt); ok {
						for _, l := range as.Lhs {
							if sel, ok := l.(*ast.SelectorExpr); ok {
								if _, ok := sel.X.(*ast.Ident); ok {
									t.Errorf("%s: init assigns %s", fset.Position(as.Pos()), selName(sel))
								}
							}
						}
					}
					return true
				})
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 10 {
		t.Fatalf("found %d error messages; the walk missed the module", len(seen))
	}
}

func selName(sel *ast.SelectorExpr) string { return sel.X.(*ast.Ident).Name + "." + sel.Sel.Name }

func TestDecisionPolicy(t *testing.T) {
	ls := []limiter.LimitDecision{{Name: "second", Remaining: 3}, {Name: "minute", Remaining: 1}, {Name: "day", Remaining: 1}}
	for _, c := range []struct {
		name    string
		limits  bool
		want    string
		refused []int
	}{
		{"single limit", false, "", nil},
		{"admitted: fewest remaining, first of equals", true, "minute", nil},
		{"refused: first refusing limit", true, "day", []int{2}},
		{"refused by two", true, "second", []int{2, 0}},
	} {
		var limits []limiter.LimitDecision
		if c.limits {
			limits = append(limits, ls...)
			for _, i := range c.refused {
				limits[i].Refused = true
			}
		}
		if got := window.DecisionPolicy(limits); got != c.want {
			t.Errorf("%s: DecisionPolicy = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestDecisionSource(t *testing.T) {
	for _, c := range []struct {
		provider string
		d        limiter.Decision
		backend  bool
		want     string
	}{
		{window.ProviderLocal, limiter.Decision{Allowed: true}, false, window.SourceLocal},
		{window.ProviderRedisAbs, limiter.Decision{Allowed: true}, true, window.SourceRedis},
		{window.ProviderHybrid, limiter.Decision{Allowed: true}, false, window.SourceMemory},
		{window.ProviderRedisSup, limiter.Decision{Allowed: true, Degraded: true}, true, window.SourcePolicy},
		{window.ProviderRedisAbs, limiter.Decision{Shed: true}, true, window.SourceShed},
	} {
		if got := window.DecisionSource(c.provider, &c.d, c.backend); got != c.want {
			t.Errorf("DecisionSource(%s, %+v, %v) = %q, want %q", c.provider, c.d, c.backend, got, c.want)
		}
	}
}

// TestConfigForRefusesUnread: ConfigFor refuses the options the provider
// does not read with ErrInvalidConfig, naming each once, the provider and
// the strategy, before it checks any value; ForFallback lets the local
// fallback of a Redis provider take the provider's options.
func TestConfigForRefusesUnread(t *testing.T) {
	_, err := window.ConfigFor(window.ProviderLocal, window.StrategyAbsolute,
		limiter.WithTimeout(time.Second), limiter.WithWindow(time.Second), limiter.WithPrefix("p"), limiter.WithTimeout(-1))
	if !errors.Is(err, limiter.ErrInvalidConfig) {
		t.Fatalf("ConfigFor(local, WithTimeout, WithPrefix) = %v, want ErrInvalidConfig", err)
	}
	msg := err.Error()
	for _, want := range []string{"WithTimeout, WithPrefix are not read", "local provider", "absolute strategy"} {
		if !strings.Contains(msg, want) {
			t.Errorf("ConfigFor(local, WithTimeout, WithPrefix) = %q, want it to say %q", msg, want)
		}
	}
	if strings.Count(msg, "WithTimeout") != 1 || strings.Contains(msg, "WithWindow") {
		t.Errorf("ConfigFor(local, …) = %q, want WithTimeout named once and WithWindow not at all", msg)
	}
	_, err = window.ConfigFor(window.ProviderRedisAbs, window.StrategyAbsolute, limiter.WithRandom(nil))
	if !errors.Is(err, limiter.ErrInvalidConfig) || !strings.Contains(err.Error(), "WithRandom is not read by the redisabs provider (absolute strategy)") {
		t.Errorf("ConfigFor(redisabs, WithRandom(nil)) = %v, want WithRandom refused as unread", err)
	}
	if _, err := window.ConfigFor(window.ProviderRedisSup, window.StrategySuppressed, limiter.WithRandom(nil)); err == nil ||
		!strings.Contains(err.Error(), "nil random source") {
		t.Errorf("ConfigFor(redissup, WithRandom(nil)) = %v, want the nil source refused", err)
	}
	redisOpts := []limiter.Option{limiter.WithPrefix("p"), limiter.WithTimeout(time.Second), limiter.WithHardLimitFactor(2),
		limiter.WithFailurePolicy(limiter.FallbackLocal), limiter.WithFallbackInstances(2), limiter.WithProbeInterval(time.Second),
		limiter.WithBatching(4), limiter.WithHotKeyRelief(false)}
	if _, err := window.ConfigFor(window.ProviderRedisSup, window.StrategySuppressed, redisOpts...); err != nil {
		t.Fatalf("ConfigFor(redissup, its options) = %v", err)
	}
	if _, err := window.ConfigFor(window.ProviderLocal, window.StrategySuppressed,
		append(redisOpts, limiter.WithObserver(nil), window.ForFallback)...); err != nil {
		t.Errorf("ConfigFor(local, redissup's options, ForFallback) = %v, want accepted", err)
	}
	if _, err := window.ConfigFor("nosuch", window.StrategyAbsolute, limiter.WithWindow(time.Second)); !errors.Is(err, limiter.ErrInvalidConfig) {
		t.Errorf("ConfigFor(unknown provider) = %v, want ErrInvalidConfig", err)
	}
}

// TestOptionsRecordTheirNames: every option of package limiter records
// the name it is documented by, which the errors of ConfigFor name.
func TestOptionsRecordTheirNames(t *testing.T) {
	for name, o := range map[string]limiter.Option{
		"WithWindow":            limiter.WithWindow(time.Second),
		"WithBucket":            limiter.WithBucket(time.Second),
		"WithClock":             limiter.WithClock(time.Now),
		"WithObserver":          limiter.WithObserver(nil),
		"WithHardLimitFactor":   limiter.WithHardLimitFactor(2),
		"WithSuppressionCache":  limiter.WithSuppressionCache(0),
		"WithRandom":            limiter.WithRandom(func() float64 { return 0 }),
		"WithPrefix":            limiter.WithPrefix("p"),
		"WithTimeout":           limiter.WithTimeout(time.Second),
		"WithFailurePolicy":     limiter.WithFailurePolicy(limiter.FailOpen),
		"WithFallbackInstances": limiter.WithFallbackInstances(2),
		"WithProbeInterval":     limiter.WithProbeInterval(time.Second),
		"WithBatching":          limiter.WithBatching(2),
		"WithHotKeyRelief":      limiter.WithHotKeyRelief(false),
	} {
		c, err := window.NewConfig(o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(c.Given) != 1 || c.Given[0] != name {
			t.Errorf("%s records %q, want [%s]", name, c.Given, name)
		}
		if !window.Reads(window.ProviderRedisSup, window.StrategySuppressed, name) {
			t.Errorf("Reads(redissup, %s) = false: redissup reads every option of package limiter", name)
		}
	}
}
