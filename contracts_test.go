package sluice_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-go/sluice/limiter"
	"github.com/sluice-go/sluice/limiter/hybrid"
	"github.com/sluice-go/sluice/limiter/local"
	"github.com/sluice-go/sluice/limiter/redisabs"
	"github.com/sluice-go/sluice/limiter/redissup"
)

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
// names, before it says which do not, exactly the providers whose type
// implements it, and names the package of every provider that does not.
func TestSetLimiterDocNamesItsImplementers(t *testing.T) {
	doc := strings.Join(strings.Fields(typeDoc(t, "limiter", "SetLimiter")), " ")
	// yes is the text up to the clause that says which do not implement
	// it, no that clause.
	i := strings.Index(doc, "do not implement")
	if i < 0 {
		t.Fatalf("the SetLimiter doc does not say which providers do not implement it:\n%s", doc)
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
