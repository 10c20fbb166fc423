package sluice_test

import (
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-go/sluice/httplimit"
	"github.com/sluice-go/sluice/limiter"
)

// userDocs returns README.md and docs/*.md by name.
func userDocs(t *testing.T) map[string]string {
	t.Helper()
	mds, _ := filepath.Glob("docs/*.md")
	out := map[string]string{}
	for _, f := range append([]string{"README.md"}, mds...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = string(b)
	}
	return out
}

// packageDoc returns the package documentation of the package in dir.
func packageDoc(t *testing.T, dir string) string {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for _, f := range p.Files {
			if f.Doc != nil {
				return f.Doc.Text()
			}
		}
	}
	t.Fatalf("%s has no package doc", dir)
	return ""
}

var statusCode = regexp.MustCompile(`\b4\d\d\b`)

// TestDocsStatusCodes: every paragraph of README.md and docs/*.md that
// names a status code for a request that can never fit names the one
// httplimit.DefaultDeny sends (413), and every paragraph that names the
// default deny handler's status names both of its codes.
func TestDocsStatusCodes(t *testing.T) {
	status := func(never bool) string {
		w := httptest.NewRecorder()
		httplimit.DefaultDeny(w, httptest.NewRequest("GET", "/", nil), &httplimit.Result{SetDecision: limiter.SetDecision{Decision: limiter.Decision{Never: never}}})
		return strconv.Itoa(w.Code)
	}
	never, refused := status(true), status(false)
	if never != strconv.Itoa(http.StatusRequestEntityTooLarge) || refused != strconv.Itoa(http.StatusTooManyRequests) {
		t.Fatalf("DefaultDeny sends %s and %s; this test expects 413 and 429", never, refused)
	}
	checked := 0
	for name, text := range userDocs(t) {
		for _, para := range strings.Split(text, "\n\n") {
			one := strings.Join(strings.Fields(para), " ")
			codes := statusCode.FindAllString(one, -1)
			if len(codes) == 0 {
				continue
			}
			if strings.Contains(one, "never fit") && !strings.Contains(one, never) {
				t.Errorf("%s: a paragraph says which status a request that can never fit gets, without %s:\n%s", name, never, one)
			}
			if strings.Contains(one, "deny handler") && strings.Contains(one, "default") && (!strings.Contains(one, never) || !strings.Contains(one, refused)) {
				t.Errorf("%s: a paragraph on the default deny handler does not name both %s and %s:\n%s", name, refused, never, one)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Error("no paragraph with a status code found")
	}
}

// TestDocsProviderList: the limiter package doc and the README name every
// provider package under limiter/.
func TestDocsProviderList(t *testing.T) {
	dirs, _ := filepath.Glob("limiter/*/doc.go")
	if len(dirs) < 4 {
		t.Fatalf("found %d provider packages, want local, redisabs, redissup and hybrid at least", len(dirs))
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"limiter package doc": packageDoc(t, "limiter"), "README.md": string(readme)} {
		for _, d := range dirs {
			p := filepath.Base(filepath.Dir(d))
			if !regexp.MustCompile(`\b` + p + `\b`).MatchString(text) {
				t.Errorf("%s does not name the provider package %s", name, p)
			}
		}
	}
}

// TestDocsGoRedisVersion: every go-redis version the docs name ("v9.18")
// is the one go.mod requires.
func TestDocsGoRedisVersion(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`github\.com/redis/go-redis/v9 v(9\.\d+)\.\d+`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod requires no github.com/redis/go-redis/v9")
	}
	want := "v" + string(m[1])
	// The docs may also name the go-redis a new module gets with go get
	// today, beside go.mod's, where their defaults differ (ReadTimeout).
	const newest = "v9.23"
	texts := userDocs(t)
	docs, _ := filepath.Glob("*/*/doc.go")
	more, _ := filepath.Glob("*/doc.go")
	for _, d := range append(docs, more...) {
		texts[d] = packageDoc(t, filepath.Dir(d))
	}
	version := regexp.MustCompile(`\b(?:go-redis |in )(v9\.\d+)\b`)
	n := 0
	for name, text := range texts {
		for _, v := range version.FindAllStringSubmatch(text, -1) {
			n++
			if v[1] != want && v[1] != newest {
				t.Errorf("%s names go-redis %s; go.mod requires %s", name, v[1], want)
			}
		}
	}
	if n == 0 {
		t.Error("no doc names a go-redis version; the test looks for \"go-redis v9.N\" or \"in v9.N\"")
	}
}

// TestPublicDocsNameNoInternals: the package doc of every package a user
// imports speaks of what the user can reach: it names no internal package.
func TestPublicDocsNameNoInternals(t *testing.T) {
	internal := regexp.MustCompile(`\binternal/\w+|\bwindow\.[A-Z]\w*`)
	for _, dir := range publicPackages(t) {
		if dir == "." {
			continue
		}
		if m := internal.FindAllString(packageDoc(t, dir), -1); len(m) > 0 {
			t.Errorf("the package doc of %s names %q, which its users cannot import", dir, m)
		}
	}
}
