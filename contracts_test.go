package sluice_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-go/sluice/internal/window"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/sluice-go/sluice/internal/redistest"
	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/local"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// providerTypes are the limiter types of every provider, named as the
// documentation names them.
var providerTypes = map[string]reflect.Type{
	"local.Absolute":    reflect.TypeOf((*local.Absolute)(nil)),
	"local.Suppressed":  reflect.TypeOf((*local.Suppressed)(nil)),
	"redisabs.Limiter":  reflect.TypeOf((*redisabs.Limiter)(nil)),
	"redissup.Limiter":  reflect.TypeOf((*redissup.Limiter)(nil)),
	"hybrid.Absolute":   reflect.TypeOf((*hybrid.Absolute)(nil)),
	"hybrid.Suppressed": reflect.TypeOf((*hybrid.Suppressed)(nil)),
}

// typeDoc returns the doc comment of the type name declared in the
// package in dir.
func typeDoc(t *testing.T, dir, name string) string {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.TYPE {
					continue
				}
				for _, s := range g.Specs {
					if s.(*ast.TypeSpec).Name.Name == name {
						return g.Doc.Text()
					}
				}
			}
		}
	}
	t.Fatalf("no type %s in %s", name, dir)
	return ""
}

// TestSetLimiterDocNamesItsImplementers: the SetLimiter documentation
// names, before it says which do not (if any), exactly the providers
// whose type implements it, and names the package of every provider that
// does not.
func TestSetLimiterDocNamesItsImplementers(t *testing.T) {
	doc := strings.Join(strings.Fields(typeDoc(t, "limiter", "SetLimiter")), " ")
	// yes is the text up to the clause that says which do not implement
	// it, no that clause (empty when the doc names none).
	i := strings.Index(doc, "do not implement")
	if i < 0 {
		i = len(doc)
	}
	j := strings.LastIndexAny(doc[:i], ";.")
	yes, no := doc[:max(j, 0)], doc[max(j, 0):i]
	set := reflect.TypeOf((*limiter.SetLimiter)(nil)).Elem()
	n := 0
	for name, typ := range providerTypes {
		pkg, _, _ := strings.Cut(name, ".")
		named := strings.Contains(yes, name)
		switch impl := typ.Implements(set); {
		case impl:
			n++
			if !named {
				t.Errorf("%s implements SetLimiter; the doc does not name it: %q", name, yes)
			}
		case named:
			t.Errorf("the doc names %s as implementing SetLimiter; it does not", name)
		case !strings.Contains(no, pkg):
			t.Errorf("%s does not implement SetLimiter; the doc does not say so: %q", name, no)
		}
	}
	if n < 4 {
		t.Errorf("%d providers implement SetLimiter, want at least the local and Redis ones", n)
	}
}

// countingObserver counts the decisions it is given, by provider and
// strategy.
type countingObserver struct {
	mu   sync.Mutex
	seen map[string]int
}

func (o *countingObserver) ObserveDecision(_ context.Context, e limiter.DecisionEvent) {
	o.mu.Lock()
	o.seen[e.Provider+"/"+e.Strategy]++
	o.mu.Unlock()
}

func (o *countingObserver) ObserveEvent(context.Context, limiter.Event) {}

// TestEveryDecisionReachesTheObserver: every decision a provider returns
// (an Inc, IsAllowed or IncSet with a nil error) reaches its observer once, under
// the provider's constant and strategy, whether Redis was asked or the
// answer came from memory: a hybrid lease, a remembered refusal.
func TestEveryDecisionReachesTheObserver(t *testing.T) {
	t.Run("Mini", func(t *testing.T) {
		_, c := redistest.Mini(t)
		everyDecisionObserved(t, c)
	})
	t.Run("Real", func(t *testing.T) { everyDecisionObserved(t, redistest.Real(t).Client(t)) })
}

func everyDecisionObserved(t *testing.T, client *redis.Client) {
	ctx := context.Background()
	for _, tc := range []struct {
		provider, strategy string
		build              func(opts ...limiter.Option) (limiter.Limiter, error)
	}{
		{window.ProviderLocal, window.StrategyAbsolute, func(o ...limiter.Option) (limiter.Limiter, error) { return local.NewAbsolute(o...) }},
		{window.ProviderLocal, window.StrategySuppressed, func(o ...limiter.Option) (limiter.Limiter, error) { return local.NewSuppressed(o...) }},
		{window.ProviderRedisAbs, window.StrategyAbsolute, func(o ...limiter.Option) (limiter.Limiter, error) { return redisabs.New(client, o...) }},
		{window.ProviderRedisSup, window.StrategySuppressed, func(o ...limiter.Option) (limiter.Limiter, error) { return redissup.New(client, o...) }},
		{window.ProviderHybrid, window.StrategyAbsolute, func(o ...limiter.Option) (limiter.Limiter, error) { return hybrid.NewAbsolute(client, o...) }},
		{window.ProviderHybrid, window.StrategySuppressed, func(o ...limiter.Option) (limiter.Limiter, error) { return hybrid.NewSuppressed(client, o...) }},
	} {
		t.Run(tc.provider+"/"+tc.strategy, func(t *testing.T) {
			obs := &countingObserver{seen: map[string]int{}}
			opts := []limiter.Option{limiter.WithObserver(obs)}
			if tc.provider != window.ProviderLocal {
				opts = append(opts, limiter.WithPrefix(redistest.Prefix(t)))
			}
			if tc.strategy == window.StrategySuppressed {
				opts = append(opts, limiter.WithHardLimitFactor(1.5))
			}
			l, err := tc.build(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close(ctx)
			rate := limiter.PerMinute(20)
			decisions := 0
			for i := 0; i < 60; i++ {
				k := "k" + strconv.Itoa(i%3)
				var err error
				if i%5 == 4 {
					_, err = l.IsAllowed(ctx, k)
				} else {
					_, err = l.Inc(ctx, k, rate, int64(1+i%2))
				}
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				decisions++
			}
			if sl, ok := l.(limiter.SetLimiter); ok {
				set, err := limiter.NewSet(limiter.Limit{Name: "m", Rate: rate, Window: time.Minute},
					limiter.Limit{Name: "s", Rate: limiter.PerSecond(1), Window: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < 20; i++ {
					if i%4 == 3 {
						_, err = sl.IncSet(ctx, "s", set, 0)
					} else {
						_, err = sl.IncSet(ctx, "s", set, 1)
					}
					if err != nil {
						t.Fatalf("set call %d: %v", i, err)
					}
					decisions++
				}
			}
			obs.mu.Lock()
			defer obs.mu.Unlock()
			want := map[string]int{tc.provider + "/" + tc.strategy: decisions}
			if !reflect.DeepEqual(obs.seen, want) {
				t.Errorf("the observer saw %v, want %v", obs.seen, want)
			}
		})
	}
}

// acrossProviders are the providers TestOptionsAcrossProviders builds,
// named by package and strategy as the errors name them.
func acrossProviders(client *redis.Client) []struct {
	pkg, strategy string
	build         func(opts ...limiter.Option) (limiter.Limiter, error)
} {
	return []struct {
		pkg, strategy string
		build         func(opts ...limiter.Option) (limiter.Limiter, error)
	}{
		{"local", "absolute", func(o ...limiter.Option) (limiter.Limiter, error) { return local.NewAbsolute(o...) }},
		{"local", "suppressed", func(o ...limiter.Option) (limiter.Limiter, error) { return local.NewSuppressed(o...) }},
		{"redisabs", "absolute", func(o ...limiter.Option) (limiter.Limiter, error) { return redisabs.New(client, o...) }},
		{"redissup", "suppressed", func(o ...limiter.Option) (limiter.Limiter, error) { return redissup.New(client, o...) }},
		{"hybrid", "absolute", func(o ...limiter.Option) (limiter.Limiter, error) { return hybrid.NewAbsolute(client, o...) }},
		{"hybrid", "suppressed", func(o ...limiter.Option) (limiter.Limiter, error) { return hybrid.NewSuppressed(client, o...) }},
	}
}

// acrossOptions is every option of packages limiter and hybrid, at a valid
// value other than its default, by name.
func acrossOptions() map[string]limiter.Option {
	return map[string]limiter.Option{
		"WithWindow":              limiter.WithWindow(time.Second),
		"WithBucket":              limiter.WithBucket(time.Second),
		"WithClock":               limiter.WithClock(time.Now),
		"WithObserver":            limiter.WithObserver(nil),
		"WithHardLimitFactor":     limiter.WithHardLimitFactor(2),
		"WithSuppressionCache":    limiter.WithSuppressionCache(0),
		"WithRandom":              limiter.WithRandom(func() float64 { return 0.5 }),
		"WithPrefix":              limiter.WithPrefix("across"),
		"WithTimeout":             limiter.WithTimeout(time.Second),
		"WithFailurePolicy":       limiter.WithFailurePolicy(limiter.FallbackLocal),
		"WithFallbackInstances":   limiter.WithFallbackInstances(2),
		"WithProbeInterval":       limiter.WithProbeInterval(time.Minute),
		"WithBatching":            limiter.WithBatching(4),
		"WithHotKeyRelief":        limiter.WithHotKeyRelief(false),
		"hybrid.WithSyncInterval": hybrid.WithSyncInterval(time.Second),
		"hybrid.WithMaxLease":     hybrid.WithMaxLease(3),
		"hybrid.WithLeaseAhead":   hybrid.WithLeaseAhead(0),
	}
}

// acrossReads is the table of docs/operations.md, Options across
// providers: the providers (package/strategy) that read each option.
// Every other provider refuses it.
var acrossReads = func() map[string][]string {
	all := []string{"local/absolute", "local/suppressed", "redisabs/absolute", "redissup/suppressed", "hybrid/absolute", "hybrid/suppressed"}
	sup := []string{"local/suppressed", "redissup/suppressed", "hybrid/suppressed"}
	inRedis := []string{"redisabs/absolute", "redissup/suppressed", "hybrid/absolute", "hybrid/suppressed"}
	hybrids := []string{"hybrid/absolute", "hybrid/suppressed"}
	return map[string][]string{
		"WithWindow": all, "WithBucket": all, "WithClock": all, "WithObserver": all,
		"WithHardLimitFactor": sup, "WithSuppressionCache": sup, "WithRandom": sup,
		"WithPrefix": inRedis, "WithTimeout": inRedis, "WithFailurePolicy": inRedis, "WithFallbackInstances": inRedis,
		"WithProbeInterval": inRedis, "WithBatching": inRedis, "WithHotKeyRelief": inRedis,
		"hybrid.WithSyncInterval": hybrids, "hybrid.WithMaxLease": hybrids, "hybrid.WithLeaseAhead": hybrids,
	}
}()

// TestOptionsAcrossProviders: every provider, given one option, accepts
// it if it reads it (acrossReads) and otherwise fails at New with
// ErrInvalidConfig naming the option, the provider and its strategy; given
// every option it reads at once, it accepts them. The table covers every
// option packages limiter and hybrid declare.
func TestOptionsAcrossProviders(t *testing.T) {
	_, client := redistest.Mini(t)
	ctx := context.Background()
	opts := acrossOptions()
	for _, name := range declaredOptions(t) {
		if _, ok := acrossReads[name]; !ok {
			t.Errorf("option %s is not in the table of TestOptionsAcrossProviders (nor, likely, docs/operations.md)", name)
		}
		if _, ok := opts[name]; !ok {
			t.Errorf("option %s has no value in acrossOptions", name)
		}
	}
	for _, p := range acrossProviders(client) {
		id := p.pkg + "/" + p.strategy
		var read []limiter.Option
		for name, o := range opts {
			l, err := p.build(o)
			if slices.Contains(acrossReads[name], id) {
				read = append(read, o)
				if err != nil {
					t.Errorf("%s(%s) = %v, want accepted: it reads the option", id, name, err)
				} else {
					l.Close(ctx)
				}
				continue
			}
			if err == nil {
				l.Close(ctx)
				t.Errorf("%s(%s) accepted, want ErrInvalidConfig: it does not read the option", id, name)
				continue
			}
			msg := err.Error()
			if !errors.Is(err, limiter.ErrInvalidConfig) || !strings.Contains(msg, name+" is not read") ||
				!strings.HasPrefix(msg, p.pkg+": ") || !strings.Contains(msg, p.strategy+" strategy") {
				t.Errorf("%s(%s) = %v, want ErrInvalidConfig naming %s, %s and the %s strategy", id, name, err, name, p.pkg, p.strategy)
			}
		}
		l, err := p.build(read...)
		if err != nil {
			t.Errorf("%s(every option it reads) = %v, want accepted", id, err)
		} else {
			l.Close(ctx)
		}
	}
}

// declaredOptions lists the exported functions of packages limiter and
// hybrid that return an option, named as the errors name them.
func declaredOptions(t *testing.T) []string {
	t.Helper()
	var names []string
	for dir, qual := range map[string]string{"limiter": "", "limiter/hybrid": "hybrid."} {
		pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, pkg := range pkgs {
			for _, f := range pkg.Files {
				for _, d := range f.Decls {
					fn, ok := d.(*ast.FuncDecl)
					if !ok || fn.Recv != nil || !fn.Name.IsExported() || fn.Type.Results == nil || len(fn.Type.Results.List) != 1 {
						continue
					}
					switch r := fn.Type.Results.List[0].Type.(type) {
					case *ast.Ident:
						ok = r.Name == "Option"
					case *ast.SelectorExpr:
						ok = r.Sel.Name == "Option"
					default:
						ok = false
					}
					if ok {
						names = append(names, qual+fn.Name.Name)
					}
				}
			}
		}
	}
	if len(names) < len(acrossReads) {
		t.Fatalf("found %d options (%v), want at least %d", len(names), names, len(acrossReads))
	}
	return names
}

// TestFallbackTakesItsParentsOptions: a Redis provider given every option
// it reads, the Redis ones included (and a hybrid's own), builds its local
// fallback from them when Redis is found down, and the fallback answers:
// the local provider does not read most of them, and must not refuse them.
func TestFallbackTakesItsParentsOptions(t *testing.T) {
	ctx := context.Background()
	opts := acrossOptions()
	for _, p := range acrossProviders(nil)[2:] {
		id := p.pkg + "/" + p.strategy
		t.Run(id, func(t *testing.T) {
			down := miniredis.RunT(t)
			dc := redis.NewClient(&redis.Options{Addr: down.Addr(), MaxRetries: -1})
			defer dc.Close()
			var read []limiter.Option
			for name, o := range opts {
				if slices.Contains(acrossReads[name], id) {
					read = append(read, o)
				}
			}
			build := p.build
			for _, q := range acrossProviders(dc) {
				if q.pkg == p.pkg && q.strategy == p.strategy {
					build = q.build
				}
			}
			l, err := build(read...)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close(ctx)
			down.Close()
			var d limiter.Decision
			for i := 0; i < 20 && !d.Degraded; i++ { // a first call may be shed until a probe confirms the outage
				if d, err = l.Inc(ctx, "k", limiter.PerSecond(10), 1); err != nil {
					t.Fatalf("Inc with Redis down = %v, want the fallback's answer", err)
				}
				if !d.Degraded {
					time.Sleep(10 * time.Millisecond)
				}
			}
			if !d.Degraded || !d.Allowed {
				t.Errorf("Inc with Redis down = %+v, want admitted by the local fallback", d)
			}
		})
	}
}
