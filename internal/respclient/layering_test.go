package respclient

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// replyWordingFiles may hold the codes of error replies as text: this
// package, which decodes them, and the one function of resp that words
// them (resp/errors.go). Paths are relative to the module's root.
var replyWordingFiles = []string{"internal/respclient/", "resp/errors.go"}

// TestNoReplyParsingElsewhere: a peer's error reply is decoded once, here
// (DecodeError); nobody else reads its code off the text. It fails on any
// non-test Go file of the module, outside replyWordingFiles, holding a
// string literal that is a decoded code or starts with one and a space
// ("MOVED ", "TRYAGAIN", ...): such a literal is a prefix parse (or a
// wording outside resp's table). Use the typed errors of Value.Err
// instead.
func TestNoReplyParsingElsewhere(t *testing.T) {
	codes := []string{CodeMoved, CodeAsk, CodeTryAgain, CodeClusterDown, CodeLoading, CodeOOM, CodeNoAuth,
		CodeWrongPass, CodeReadOnly, CodeBusyKey, CodeOutOfSequence}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		for _, allowed := range replyWordingFiles {
			if strings.HasPrefix(rel, allowed) {
				return nil
			}
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, c := range codes {
				if s == c || strings.HasPrefix(s, c+" ") {
					t.Errorf("%s:%d: %s names the error reply code %s: decode replies with respclient (Value.Err) instead",
						rel, fset.Position(lit.Pos()).Line, lit.Value, c)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("scanned %d Go files under %s; the module's root was not found", files, root)
	}
}
