package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// modulePackages lists the module's packages with go list: for each, the
// module's packages it imports, directly and at all (tests aside).
func modulePackages(t *testing.T) []Package {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", Module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []Package
	rel := func(list []string) []string {
		var r []string
		for _, p := range list {
			if q, ok := strings.CutPrefix(p, Module+"/"); ok {
				r = append(r, q)
			}
		}
		return r
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath    string
			Imports, Deps []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		path, ok := strings.CutPrefix(p.ImportPath, Module+"/")
		if !ok {
			continue // the module's root holds no package
		}
		pkgs = append(pkgs, Package{Path: path, Imports: rel(p.Imports), Deps: rel(p.Deps)})
	}
	return pkgs
}

// TestModuleKeepsRules: no package of the module imports what its rule
// forbids, and every rule names packages that exist (a rule about a
// renamed package would hold vacuously).
func TestModuleKeepsRules(t *testing.T) {
	pkgs := modulePackages(t)
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; the module has more", len(pkgs))
	}
	for _, v := range Check(Rules, pkgs) {
		t.Error(v)
	}
	for _, r := range Rules {
		for _, pattern := range append(append(append([]string{r.Package}, r.Never...), r.NeverDirect...), r.OnlyImportedBy...) {
			found := false
			for _, p := range pkgs {
				found = found || Matches(pattern, p.Path)
			}
			if !found {
				t.Errorf("rule for %s names %q, which matches no package of the module", r.Package, pattern)
			}
		}
	}
}

// TestCheckFindsViolations: Check reports the imports a rule forbids —
// Never direct or not, NeverDirect only when direct, OnlyImportedBy from
// any package but those named — and nothing else.
func TestCheckFindsViolations(t *testing.T) {
	rules := []Rule{
		{Package: "engine", Never: []string{"..."}},
		{Package: "low/...", Never: []string{"top"}, NeverDirect: []string{"mid"}},
		{Package: "top", OnlyImportedBy: []string{"cmd/..."}},
	}
	pkgs := []Package{
		{Path: "engine", Imports: []string{"util"}, Deps: []string{"util"}},
		{Path: "low", Imports: []string{"via"}, Deps: []string{"via", "mid", "top"}},
		{Path: "low/sub", Imports: []string{"mid", "engine"}, Deps: []string{"mid", "engine"}},
		{Path: "lower", Imports: []string{"mid"}, Deps: []string{"mid"}},
		{Path: "cmd/x", Imports: []string{"top"}, Deps: []string{"top", "engine"}},
		{Path: "other", Imports: []string{"mid"}, Deps: []string{"mid", "top"}},
	}
	var got []string
	for _, v := range Check(rules, pkgs) {
		got = append(got, v.Importer+"→"+v.Imported)
	}
	want := []string{
		"engine→util", // nothing of the project
		"low→top",     // Never, through via
		"low→top",     // OnlyImportedBy
		"low/sub→mid", // NeverDirect, below a tree; low reaches mid indirectly, which is allowed
		"other→top",   // OnlyImportedBy, indirectly
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Check = %q\nwant    %q", got, want)
	}
}

// designSays are the two things every DESIGN.md states (as a heading or a
// sentence): what the package owns and what it must never import.
var designSays = []*regexp.Regexp{
	regexp.MustCompile(`(?im)^## .*\bowns\b`),
	regexp.MustCompile(`(?i)never\s+imports?\b`),
}

// TestDesignNamesOwnerAndImports: every package of the module with a
// DESIGN.md says there what it owns and what it must never import, and a
// rule of Rules holds it to that (so the sentence is checked, not only
// written). cmd/cellserver and engine/codec, the main packages that had
// none, must have one.
func TestDesignNamesOwnerAndImports(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Dir}}", Module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	with := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		imp, dir, ok := strings.Cut(line, " ")
		path, inModule := strings.CutPrefix(imp, Module+"/")
		if !ok || !inModule {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "DESIGN.md"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		with[path] = true
		for _, re := range designSays {
			if !re.Match(b) {
				t.Errorf("%s/DESIGN.md does not say what it owns and what it never imports (no match for %s)", path, re)
			}
		}
		ruled := false
		for _, r := range Rules {
			ruled = ruled || Matches(r.Package, path)
		}
		if !ruled {
			t.Errorf("%s has a DESIGN.md but no rule in Rules checks what it says it never imports", path)
		}
	}
	for _, p := range []string{"cmd/cellserver", "engine/codec", "replication", "resp", "decide", "region", "rls", "cluster"} {
		if !with[p] {
			t.Errorf("%s has no DESIGN.md", p)
		}
	}
}
