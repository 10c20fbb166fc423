package sluice_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
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
			l, err := tc.build(limiter.WithObserver(obs), limiter.WithPrefix(redistest.Prefix(t)),
				limiter.WithHardLimitFactor(1.5))
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

// TestOptionsAcrossProviders: package hybrid's options given to another
// provider are ErrInvalidConfig at New, naming the option and the
// provider; the hybrid accepts them, and its local fallback, built from
// the same options, drops them. The options of package limiter are
// accepted by every provider, those that do not concern it ignored (see
// limiter.Option).
func TestOptionsAcrossProviders(t *testing.T) {
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	ctx := context.Background()
	builders := map[string]func(opts ...limiter.Option) (limiter.Limiter, error){
		"local.NewAbsolute":    func(o ...limiter.Option) (limiter.Limiter, error) { return local.NewAbsolute(o...) },
		"local.NewSuppressed":  func(o ...limiter.Option) (limiter.Limiter, error) { return local.NewSuppressed(o...) },
		"redisabs.New":         func(o ...limiter.Option) (limiter.Limiter, error) { return redisabs.New(client, o...) },
		"redissup.New":         func(o ...limiter.Option) (limiter.Limiter, error) { return redissup.New(client, o...) },
		"hybrid.NewAbsolute":   func(o ...limiter.Option) (limiter.Limiter, error) { return hybrid.NewAbsolute(client, o...) },
		"hybrid.NewSuppressed": func(o ...limiter.Option) (limiter.Limiter, error) { return hybrid.NewSuppressed(client, o...) },
	}
	hybridOnly := map[string]limiter.Option{
		"hybrid.WithSyncInterval": hybrid.WithSyncInterval(time.Second),
		"hybrid.WithMaxLease":     hybrid.WithMaxLease(3),
		"hybrid.WithLeaseAhead":   hybrid.WithLeaseAhead(0),
	}
	// Every option of package limiter, at a value other than its default.
	generic := []limiter.Option{limiter.WithWindow(time.Second), limiter.WithBucket(100 * time.Millisecond),
		limiter.WithHardLimitFactor(2), limiter.WithSuppressionCache(0), limiter.WithRandom(func() float64 { return 0.5 }),
		limiter.WithPrefix("across"), limiter.WithTimeout(time.Second), limiter.WithFailurePolicy(limiter.FallbackLocal),
		limiter.WithFallbackInstances(2), limiter.WithProbeInterval(time.Millisecond),
		limiter.WithObserver(limiter.NewLogObserver(nil)), limiter.WithBatching(4), limiter.WithHotKeyRelief(false)}
	for name, build := range builders {
		isHybrid := strings.HasPrefix(name, "hybrid.")
		l, err := build(generic...)
		if err != nil {
			t.Errorf("%s(every option of package limiter) = %v, want accepted", name, err)
		} else {
			l.Close(ctx)
		}
		for opt, o := range hybridOnly {
			l, err := build(o)
			if isHybrid {
				if err != nil {
					t.Errorf("%s(%s) = %v, want accepted", name, opt, err)
				} else {
					l.Close(ctx)
				}
				continue
			}
			pkg, _, _ := strings.Cut(name, ".")
			if !errors.Is(err, limiter.ErrInvalidConfig) || !strings.Contains(err.Error(), opt) || !strings.Contains(err.Error(), pkg) {
				t.Errorf("%s(%s) = %v, want ErrInvalidConfig naming %s and %s", name, opt, err, opt, pkg)
			}
			if err == nil {
				l.Close(ctx)
			}
		}
	}
	// A hybrid's fallback is built from the hybrid's options when Redis
	// is found down: it drops the hybrid's own and answers.
	for _, name := range []string{"hybrid.NewAbsolute", "hybrid.NewSuppressed"} {
		down := miniredis.RunT(t)
		dc := redis.NewClient(&redis.Options{Addr: down.Addr(), MaxRetries: -1})
		l, err := func() (limiter.Limiter, error) {
			opts := []limiter.Option{hybrid.WithMaxLease(2), hybrid.WithSyncInterval(time.Hour), limiter.WithProbeInterval(time.Minute)}
			if name == "hybrid.NewAbsolute" {
				return hybrid.NewAbsolute(dc, opts...)
			}
			return hybrid.NewSuppressed(dc, opts...)
		}()
		if err != nil {
			t.Fatal(err)
		}
		down.Close()
		var d limiter.Decision
		for i := 0; i < 20 && !d.Degraded; i++ { // a first call may be shed until a probe confirms the outage
			if d, err = l.Inc(ctx, "k", limiter.PerMinute(10), 1); err != nil {
				t.Fatalf("%s: Inc with Redis down = %v", name, err)
			}
			if !d.Degraded {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if !d.Degraded || !d.Allowed {
			t.Errorf("%s: Inc with Redis down = %+v, want admitted by the local fallback", name, d)
		}
		l.Close(ctx)
		dc.Close()
	}
}
