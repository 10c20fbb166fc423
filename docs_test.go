package sluice_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// repoFiles lists every file and directory of the repository (the module
// and its nested modules), slash-separated and relative to the root,
// without .git.
func repoFiles(t *testing.T) (paths map[string]bool, bases map[string]bool) {
	t.Helper()
	paths, bases = map[string]bool{}, map[string]bool{}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		p = filepath.ToSlash(p)
		paths[p] = true
		bases[d.Name()] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths, bases
}

// A doc's text names a file of the repository in a relative Markdown link,
// "[text](path)", or in a word that starts with one of the repository's
// top-level directories ("limiter/redisabs/doc.go", "./scripts/") or ends
// with the extension of a file kind the repository keeps ("abs_inc.lua",
// "NOTES.md").
var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	pathWord = regexp.MustCompile(`[A-Za-z0-9_./-]+`)
	fileExt  = regexp.MustCompile(`\.(md|go|lua|sh|txt|mod|sum)$`)
)

// TestDocsNameExistingFiles checks that every file or directory that
// README.md, a page of docs/ or a package's documentation names is in the
// repository: docs must stand alone, so a path to a file elsewhere (a
// design note outside the repository, a sibling checkout) fails, and so
// does one to a file that was renamed or removed.
func TestDocsNameExistingFiles(t *testing.T) {
	paths, bases := repoFiles(t)
	topDirs := map[string]bool{}
	for p := range paths {
		if !strings.Contains(p, "/") {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				topDirs[p] = true
			}
		}
	}
	type doc struct{ name, dir, text string }
	var docs []doc
	mds, _ := filepath.Glob("docs/*.md")
	for _, f := range append([]string{"README.md"}, mds...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc{f, path.Dir(filepath.ToSlash(f)), string(b)})
	}
	if len(docs) < 5 {
		t.Fatalf("found %d docs, want README.md and docs/*.md", len(docs))
	}
	npkg := 0
	for p := range paths {
		fi, err := os.Stat(p)
		if err != nil || !fi.IsDir() {
			continue
		}
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, p, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			continue // testdata and the like
		}
		for _, pkg := range pkgs {
			for name, f := range pkg.Files {
				if f.Doc != nil {
					npkg++
					docs = append(docs, doc{filepath.ToSlash(name) + " (package doc)", p, f.Doc.Text()})
				}
			}
		}
	}
	if npkg < 10 {
		t.Fatalf("found %d package docs, want every package's", npkg)
	}

	exists := func(dir, p string) bool {
		p = strings.TrimPrefix(p, "./")
		p = strings.TrimSuffix(p, "/")
		if p == "" || p == "." {
			return true
		}
		return paths[path.Clean(p)] || paths[path.Clean(path.Join(dir, p))]
	}
	for _, d := range docs {
		var bad []string
		seen := map[string]bool{}
		miss := func(what string) {
			if !seen[what] {
				seen[what] = true
				bad = append(bad, what)
			}
		}
		for _, m := range mdLink.FindAllStringSubmatch(d.text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if !exists(d.dir, target) {
				miss("link " + target)
			}
		}
		for _, loc := range pathWord.FindAllStringIndex(d.text, -1) {
			w := d.text[loc[0]:loc[1]]
			if loc[0] > 0 && strings.ContainsRune(":/@", rune(d.text[loc[0]-1])) {
				continue // part of a URL, a module path or an address
			}
			w = strings.TrimRight(w, ".-")
			if strings.Contains(w, "://") || strings.HasPrefix(w, "github.com/") || strings.HasPrefix(w, "golang.org/") {
				continue
			}
			if strings.HasPrefix(w, "/") {
				continue // an absolute path: a file of the reader's machine
			}
			if name := strings.TrimSuffix(path.Base(w), path.Ext(w)); name == "" || name == "_test" {
				continue // a kind of file (".lua", "_test.go"), not a file
			}
			if strings.Contains(w, "../") {
				// Relative to the doc: it must stay inside the repository.
				if p := path.Clean(path.Join(d.dir, w)); strings.HasPrefix(p, "../") || !paths[p] {
					miss(w)
				}
				continue
			}
			top, _, hasSlash := strings.Cut(strings.TrimPrefix(w, "./"), "/")
			switch {
			case hasSlash && topDirs[top]:
				if !exists(d.dir, w) && !exists(d.dir, trimSelector(w)) {
					miss(w)
				}
			case fileExt.MatchString(w) && !strings.Contains(w, "*"):
				if hasSlash {
					// Relative to the root, the doc, or a directory a
					// command was run from ("cd bench && bash floor/run.sh").
					if !exists(d.dir, w) && !hasSuffixPath(paths, w) {
						miss(w)
					}
				} else if !bases[w] {
					miss(w)
				}
			}
		}
		for _, b := range bad {
			t.Errorf("%s names %q, which is not in the repository", d.name, b)
		}
	}
}

// trimSelector drops a Go selector from a package path: internal/redisprov.TTLMs
// is the package internal/redisprov.
func trimSelector(w string) string {
	i := strings.LastIndex(w, ".")
	if i < 0 || i < strings.LastIndex(w, "/") || i+1 >= len(w) {
		return w
	}
	if unicode.IsUpper(rune(w[i+1])) || unicode.IsLower(rune(w[i+1])) && !fileExt.MatchString(w) {
		return w[:i]
	}
	return w
}

// hasSuffixPath reports whether some path of the repository ends with /p.
func hasSuffixPath(paths map[string]bool, p string) bool {
	p = "/" + strings.TrimPrefix(p, "./")
	for q := range paths {
		if strings.HasSuffix(q, p) {
			return true
		}
	}
	return false
}
