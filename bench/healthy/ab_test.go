package healthy

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"github.com/sluice-go/sluice/internal/window"
)

var (
	blocks   = flag.Int("blocks", 0, "TestHealthyAB: blocks per side and benchmark; 0 skips it")
	perBlock = flag.Int("perblock", 1000, "TestHealthyAB: calls per block")
	group    = flag.Int("group", 10, "TestHealthyAB: blocks per printed benchmark line")
	only     = flag.String("only", "", "TestHealthyAB: regexp; run only the benchmarks (provider/workload/form) it matches")
	base     = flag.String("base", "c3df9f6", "TestHealthyAB: the release to compare with (default: the commit before the failure policy)")
	head     = flag.String("head", "HEAD", "TestHealthyAB: the release measured against -base")
	control  = flag.Bool("control", false, "TestHealthyAB: add -base a second time, as side base', to show the noise floor")
	cancel   = flag.Bool("cancellable", false, "TestHealthyAB: call with a cancellable context instead of context.Background()")
	// isolate names one option to measure on its own; WithTimeout(0) in its
	// help is an example of such an option (the cost of the per-call
	// deadline), not a setting of this test.
	isolate = flag.String("isolate", "", "TestHealthyAB: add -head once more with this limiter option, e.g. 'WithTimeout(0)'")
)

// baseModule is the module path -base is renamed to, so that one binary
// links both releases.
const baseModule = "sluicebase"

// TestHealthyAB builds -base and -head from clean trees of their commits
// (git archive), renames -base's module, links both into one generated
// test binary with this package's healthy.go, and runs Compare there
// against a private redis-server: every option at its default on both
// sides, calls alternating between the sides in blocks of -perblock calls.
// Run it from a checkout (it needs git and redis-server):
//
//	cd bench && go test ./healthy/ -run TestHealthyAB -v -timeout 0 -blocks 100 -control | tee ab.txt
//
// The output holds benchmark lines (benchstat ab.txt, -col /rev) and a
// summary: ops/s per side, and each side's ops/s over -base's. Calls use
// context.Background(), as the providers' benchmarks do; -cancellable gives
// them a cancellable context instead, the path of a request's context.
func TestHealthyAB(t *testing.T) {
	if *blocks <= 0 {
		t.Skip("run with -blocks N")
	}
	root := strings.TrimSpace(git(t, "", "rev-parse", "--show-toplevel"))
	tmp := t.TempDir()
	extract := func(rev, dir string) string {
		commit := strings.TrimSpace(git(t, root, "rev-parse", "--short=7", rev+"^{commit}"))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		runIn(t, root, "sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", commit, dir)
		if err := os.RemoveAll(filepath.Join(dir, "bench")); err != nil { // a module of its own
			t.Fatal(err)
		}
		return commit
	}
	baseCommit := extract(*base, filepath.Join(tmp, "base"))
	headCommit := extract(*head, filepath.Join(tmp, "head"))
	renameModule(t, filepath.Join(tmp, "base"), "github.com/sluice-go/sluice", baseModule)

	driver := filepath.Join(tmp, "driver")
	if err := os.Mkdir(driver, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod := "module healthyab\n\ngo 1.22\n\nrequire (\n" +
		"\tgithub.com/redis/go-redis/v9 v9.18.0\n" +
		"\tgithub.com/sluice-go/sluice v0.0.0\n" +
		"\t" + baseModule + " v0.0.0\n)\n\n" +
		"replace github.com/sluice-go/sluice => ../head\n\n" +
		"replace " + baseModule + " => ../base\n"
	var sums []byte
	for _, f := range []string{"head/go.sum", "base/go.sum"} {
		b, err := os.ReadFile(filepath.Join(tmp, f))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, b...)
	}
	code, err := os.ReadFile("healthy.go")
	if err != nil {
		t.Fatal(err)
	}
	// A side's option goes to every provider that reads it: LocalOpt is
	// Opt if the local provider reads it (it refuses the others), else "".
	type side struct{ Label, Alias, Opt, LocalOpt string }
	sides := []side{{"base:" + baseCommit, "base", "", ""}, {"head:" + headCommit, "head", "", ""}}
	if *control {
		sides = append(sides, side{"base':" + baseCommit, "base", "", ""})
	}
	if *isolate != "" {
		s := side{"head+" + *isolate, "head", *isolate, ""}
		if name, _, _ := strings.Cut(*isolate, "("); window.Reads(window.ProviderLocal, window.StrategyAbsolute, name) {
			s.LocalOpt = *isolate
		}
		sides = append(sides, s)
	}
	var gen bytes.Buffer
	if err := driverTemplate.Execute(&gen, map[string]any{
		"Modules": []struct{ Alias, Path string }{{"base", baseModule}, {"head", "github.com/sluice-go/sluice"}},
		"Sides":   sides,
	}); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sums, "healthy.go": code, "ab_test.go": gen.Bytes()} {
		if err := os.WriteFile(filepath.Join(driver, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(tmp, "ab.test")
	runIn(t, driver, "go", "test", "-mod=mod", "-c", "-o", bin, ".")
	cmd := exec.Command(bin, "-test.run", "^TestAB$", "-test.v", "-test.timeout", "0",
		"-blocks", strconv.Itoa(*blocks), "-perblock", strconv.Itoa(*perBlock),
		"-group", strconv.Itoa(*group), "-only", *only, "-cancellable="+strconv.FormatBool(*cancel))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the A/B binary: %v (generated code in %s)", err, driver)
	}
}

// renameModule rewrites the module path from → to in dir's go.mod and Go
// files (imports, and the path anywhere else it appears).
func renameModule(t *testing.T, dir, from, to string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".go") || d.Name() == "go.mod") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(p, bytes.ReplaceAll(b, []byte(from), []byte(to)), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return runIn(t, dir, "git", args...)
}

// runIn runs a command in dir and returns its standard output; a failure
// fails t with the command's output.
func runIn(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return string(out)
}

// driverTemplate is the generated module's test: one Side per release (or
// configuration), each a closure over that release's providers.
var driverTemplate = template.Must(template.New("ab").Parse(`package healthy

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/redis/go-redis/v9"
{{range .Modules}}
	{{.Alias}} "{{.Path}}/limiter"
	{{.Alias}}abs "{{.Path}}/limiter/redisabs"
	{{.Alias}}sup "{{.Path}}/limiter/redissup"
	{{.Alias}}local "{{.Path}}/limiter/local"
{{- end}}
)

var (
	blocks   = flag.Int("blocks", 30, "")
	perBlock = flag.Int("perblock", 1000, "")
	group    = flag.Int("group", 10, "")
	only     = flag.String("only", "", "")
	cancel   = flag.Bool("cancellable", false, "")
)

var sides = []Side{
{{- range .Sides}}
	{Label: {{printf "%q" .Label}}, New: func(c redis.UniversalClient, provider, rate, prefix string) (Inc, func(), error) {
		r, err := {{.Alias}}.ParseRate(rate)
		if err != nil {
			return nil, nil, err
		}
		if provider == "local" {
			l, err := {{.Alias}}local.NewAbsolute({{if .LocalOpt}}{{.Alias}}.{{.LocalOpt}}{{end}})
			if err != nil {
				return nil, nil, err
			}
			inc, done := Bind[{{.Alias}}.Rate, {{.Alias}}.Decision](l, r)
			return inc, done, nil
		}
		opts := []{{.Alias}}.Option{ {{- .Alias}}.WithPrefix(prefix){{if .Opt}}, {{.Alias}}.{{.Opt}}{{end -}} }
		if provider == "abs" {
			l, err := {{.Alias}}abs.New(c, opts...)
			if err != nil {
				return nil, nil, err
			}
			inc, done := Bind[{{.Alias}}.Rate, {{.Alias}}.Decision](l, r)
			return inc, done, nil
		}
		l, err := {{.Alias}}sup.New(c, opts...)
		if err != nil {
			return nil, nil, err
		}
		inc, done := Bind[{{.Alias}}.Rate, {{.Alias}}.Decision](l, r)
		return inc, done, nil
	}},
{{- end}}
}

func TestAB(t *testing.T) {
	addr, stop, err := StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c := NewClient(addr)
	defer c.Close()
	opt := Options{Blocks: *blocks, PerBlock: *perBlock, Group: *group}
	if *only != "" {
		opt.Only = regexp.MustCompile(*only)
	}
	if *cancel {
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		opt.Ctx = ctx
		fmt.Println("# every call with a cancellable context")
	}
	Header(os.Stdout, c)
	if _, err := Compare(os.Stdout, c, sides, opt); err != nil {
		t.Fatal(err)
	}
	Footer(os.Stdout)
}
`))
