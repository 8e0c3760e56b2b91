package resp

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strings"
	"testing"
)

// maxMethods is the most methods a type of this package may declare
// (issue 28): a type past it holds several concerns, to be split by
// concern into types of their own (Conn's Reply, txState, output, ...).
const maxMethods = 40

// TestMethodsPerType fails when a type declared in the package's non-test
// files has more than maxMethods methods (value and pointer receivers
// together, exported or not), naming each such type and its count.
func TestMethodsPerType(t *testing.T) {
	counts := methodCounts(t, ".")
	if counts["Conn"] == 0 || counts["Server"] == 0 {
		t.Fatalf("counted %v: Conn and Server not found (the count is broken)", counts)
	}
	var over []string
	for name, n := range counts {
		if n > maxMethods {
			over = append(over, name)
		}
	}
	sort.Strings(over)
	for _, name := range over {
		t.Errorf("type %s has %d methods, more than %d: split it by concern", name, counts[name], maxMethods)
	}
}

// methodCounts counts the methods declared per receiver type in the Go
// files of dir, test files left out.
func methodCounts(t *testing.T, dir string) map[string]int {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
					continue
				}
				if name := receiverName(fd.Recv.List[0].Type); name != "" {
					counts[name]++
				}
			}
		}
	}
	return counts
}

// receiverName is the type name of a receiver: T, *T, T[P] or *T[P].
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
