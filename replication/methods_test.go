package replication

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// maxMethods bounds the methods of any one type of the package (issue 28:
// Node had 119 over 11 files). A type that needs more holds concerns that
// belong to types of their own.
const maxMethods = 40

// TestNoTypeOverMaxMethods counts the methods declared on each type of the
// package's files (tests included) and fails for any type over maxMethods.
func TestNoTypeOverMaxMethods(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	counts := methodCounts(t, files)
	if counts["Node"] == 0 {
		t.Fatalf("found no methods of Node in %d files: the count reads the wrong files", len(files))
	}
	var names []string
	for name := range counts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if c := counts[name]; c > maxMethods {
			t.Errorf("type %s has %d methods, more than %d: move a concern to a type of its own", name, c, maxMethods)
		}
	}
}

// methodCounts parses files and counts the methods declared on each
// receiver type (pointer or not), by the type's name.
func methodCounts(t *testing.T, files []string) map[string]int {
	t.Helper()
	fset := token.NewFileSet()
	counts := map[string]int{}
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 {
				continue
			}
			typ := fn.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			switch x := typ.(type) {
			case *ast.IndexExpr: // a generic type's method
				typ = x.X
			case *ast.IndexListExpr:
				typ = x.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				counts[id.Name]++
			}
		}
	}
	return counts
}

// TestMethodCounts: methodCounts counts pointer, value and generic
// receivers by the type's name, and functions not at all.
func TestMethodCounts(t *testing.T) {
	dir := t.TempDir()
	src := `package p
type A struct{}
type G[T any] struct{}
func (a *A) One() {}
func (a A) two() {}
func (g *G[T]) Three() {}
func four() {}
`
	path := filepath.Join(dir, "p.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := methodCounts(t, []string{path})
	if len(got) != 2 || got["A"] != 2 || got["G"] != 1 {
		t.Errorf("methodCounts = %v, want map[A:2 G:1]", got)
	}
}
