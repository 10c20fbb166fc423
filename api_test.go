package sluice_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// publicPackages returns the directories, relative to the module root, of
// every package a user can import: the core module's packages outside
// internal/, cmd/ and testdata, without the nested modules.
func publicPackages(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != "." {
			if name == "internal" || name == "cmd" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module
			}
		}
		gofiles, _ := filepath.Glob(filepath.Join(path, "*.go"))
		for _, f := range gofiles {
			if !strings.HasSuffix(f, "_test.go") {
				dirs = append(dirs, path)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// TestPublicAPIShowsNoInternalNames checks that what `go doc` prints for
// every exported name of every public package (its declaration: a type's
// definition, a function's or method's signature, a variable's or
// constant's type and value) names nothing from an internal package. An
// alias of an internal type, or a variable initialised from an internal
// one, shows the internal name and hides the methods and documentation a
// user needs; such names must be defined in the public package.
func TestPublicAPIShowsNoInternalNames(t *testing.T) {
	dirs := publicPackages(t)
	if len(dirs) < 5 {
		t.Fatalf("found %d public packages (%v), want the module's packages", len(dirs), dirs)
	}
	for _, dir := range dirs {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var found []string
		for _, pkg := range pkgs {
			for _, f := range pkg.Files {
				found = append(found, internalRefs(fset, f)...)
			}
		}
		sort.Strings(found)
		for _, s := range found {
			t.Errorf("%s: %s", dir, s)
		}
	}
}

// internalRefs lists, for the exported declarations of f, every reference
// to a package whose import path has an internal element.
func internalRefs(fset *token.FileSet, f *ast.File) []string {
	internal := map[string]string{} // local name → import path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if !strings.Contains("/"+path+"/", "/internal/") {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		internal[name] = path
	}
	if len(internal) == 0 {
		return nil
	}
	var out []string
	report := func(what string, n ast.Node) {
		if n == nil {
			return
		}
		ast.Inspect(n, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false // a body go doc does not show
			case *ast.StructType:
				// go doc hides unexported fields.
				for _, fld := range n.Fields.List {
					if exportedField(fld) {
						ast.Inspect(fld.Type, func(m ast.Node) bool { return check(m, internal, what, fset, &out) })
					}
				}
				return false
			case *ast.InterfaceType:
				for _, m := range n.Methods.List {
					if exportedField(m) {
						ast.Inspect(m.Type, func(x ast.Node) bool { return check(x, internal, what, fset, &out) })
					}
				}
				return false
			}
			return check(n, internal, what, fset, &out)
		})
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			what := d.Name.Name
			if d.Recv != nil {
				recv := receiverName(d.Recv.List[0].Type)
				if !ast.IsExported(recv) {
					continue
				}
				what = recv + "." + what
				report(what, d.Recv)
			}
			report(what, d.Type)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						report(s.Name.Name, s.Type)
					}
				case *ast.ValueSpec:
					exported := false
					for _, n := range s.Names {
						exported = exported || n.IsExported()
					}
					if !exported {
						continue
					}
					report(s.Names[0].Name, s.Type)
					for _, v := range s.Values {
						report(s.Names[0].Name, v)
					}
				}
			}
		}
	}
	return out
}

func check(n ast.Node, internal map[string]string, what string, fset *token.FileSet, out *[]string) bool {
	sel, ok := n.(*ast.SelectorExpr)
	if !ok {
		return true
	}
	if id, ok := sel.X.(*ast.Ident); ok {
		if path, ok := internal[id.Name]; ok {
			*out = append(*out, what+" shows "+id.Name+"."+sel.Sel.Name+" ("+path+") at "+fset.Position(sel.Pos()).String())
		}
	}
	return true
}

func exportedField(f *ast.Field) bool {
	if len(f.Names) == 0 { // embedded: shown when its type is exported
		t := f.Type
		if s, ok := t.(*ast.StarExpr); ok {
			t = s.X
		}
		switch t := t.(type) {
		case *ast.Ident:
			return t.IsExported()
		case *ast.SelectorExpr:
			return t.Sel.IsExported()
		}
		return true
	}
	for _, n := range f.Names {
		if n.IsExported() {
			return true
		}
	}
	return false
}

func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
