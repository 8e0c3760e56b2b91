package replication

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestDesignErrorCodes: the table of forwarding error codes in DESIGN.md
// lists exactly the codes of codeErrors (service.go), each with the
// sentinel's name as the source spells it, and codeOther (issue 28: the
// table had drifted to codes 1–9 while the codes ran on).
func TestDesignErrorCodes(t *testing.T) {
	b, err := os.ReadFile("DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[int]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| (\\d+) \\| `([\\w.]+)`").FindAllStringSubmatch(string(b), -1) {
		code, _ := strconv.Atoi(m[1])
		listed[code] = m[2]
	}
	if !regexp.MustCompile(`(?m)^\| ` + strconv.Itoa(int(codeOther)) + ` \| any other error \|`).Match(b) {
		t.Errorf("code %d (any other error) is not in DESIGN.md's table", codeOther)
	}

	source := codeErrorNames(t)
	if len(source) != len(codeErrors)-1 {
		t.Fatalf("read %d codes of codeErrors from service.go, codeErrors has %d", len(source), len(codeErrors)-1)
	}
	for code, name := range source {
		if got, ok := listed[code]; !ok {
			t.Errorf("code %d (%s) is not in DESIGN.md's table", code, name)
		} else if got != name {
			t.Errorf("DESIGN.md gives code %d as %s; codeErrors has %s", code, got, name)
		}
	}
	for code, name := range listed {
		if _, ok := source[code]; !ok {
			t.Errorf("DESIGN.md lists code %d (%s), which codeErrors does not have", code, name)
		}
	}
}

// codeErrorNames reads codeErrors' literal in service.go: each code and
// the sentinel's name as written (ErrNotLeader, cluster.ErrSlotBusy).
func codeErrorNames(t *testing.T) map[int]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "service.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	names := map[int]string{}
	ast.Inspect(f, func(node ast.Node) bool {
		vs, ok := node.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "codeErrors" || len(vs.Values) != 1 {
			return true
		}
		lit, ok := vs.Values[0].(*ast.CompositeLit)
		if !ok {
			t.Fatal("codeErrors is not a composite literal")
		}
		for _, e := range lit.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				t.Fatalf("codeErrors has an element without its code")
			}
			key, ok := kv.Key.(*ast.BasicLit)
			if !ok {
				t.Fatalf("codeErrors has a code that is not a literal")
			}
			code, err := strconv.Atoi(key.Value)
			if err != nil {
				t.Fatal(err)
			}
			switch v := kv.Value.(type) {
			case *ast.Ident:
				names[code] = v.Name
			case *ast.SelectorExpr:
				names[code] = v.X.(*ast.Ident).Name + "." + v.Sel.Name
			default:
				t.Fatalf("codeErrors[%d] is not a named sentinel", code)
			}
		}
		return false
	})
	return names
}
