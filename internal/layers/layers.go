package layers

import "strings"

// Module is the module's path; the rules name packages below it.
const Module = "github.com/cellserver/cellserver"

// Rule is one package's (or tree's) import rule. Paths are relative to
// Module; "x/..." is x and every package below it.
type Rule struct {
	// Package is the package, or tree, the rule holds for.
	Package string
	// Never are the packages it must never import, directly or through
	// another package.
	Never []string
	// NeverDirect are the packages it must not import itself (it may
	// reach them through a package that owns the call).
	NeverDirect []string
	// OnlyImportedBy, when set, are the only packages that may import
	// Package, directly or not.
	OnlyImportedBy []string
	// Why is the reason, as the package's DESIGN.md gives it.
	Why string
}

// servers are the packages above the keyspace: none of the lower layers
// may reach them.
var servers = []string{"replication", "cluster", "decide", "region", "resp", "rls", "httplimit", "metrics", "cmd/..."}

// Rules are the module's import rules.
var Rules = []Rule{
	{Package: "engine", Never: []string{"..."},
		Why: "the limiter maths is pure: (state, params, now) → (state, result), no I/O, lock or clock"},
	{Package: "engine/codec", Never: append([]string{"internal/...", "shards", "snapshot"}, servers...),
		Why: "the binary form of a request is engine's alone"},
	{Package: "internal/...", Never: append([]string{"shards", "snapshot"}, servers...),
		Why: "internal packages are shared helpers (settings, glob, rule tables, hash slots, RESP client): below every layer but engine"},
	{Package: "shards", Never: append([]string{"snapshot"}, servers...),
		Why: "the keyspace knows keys, limiters and time given to it; nothing of files, groups, regions or the wire"},
	{Package: "snapshot", Never: servers,
		Why: "the on-disk format of a keyspace; who saves it and when is above it"},
	{Package: "cluster", Never: without(servers, "cluster"),
		Why: "the Redis Cluster model and behaviour, consumed by replication, region, rls and resp; it never calls them"},
	{Package: "replication", Never: without(servers, "replication", "cluster"),
		Why: "one raft group; the wire, regions and the Envoy service sit in front of it"},
	{Package: "decide", Never: []string{"region", "resp", "rls", "httplimit", "metrics", "cmd/..."},
		Why: "the decision path below the front doors: the backend interface once, the rules, the routing across groups; the doors and the region gate call it, it calls none of them"},
	{Package: "region", Never: without(servers, "region", "cluster", "decide", "replication"), NeverDirect: []string{"replication"},
		Why: "regions sit in front of the backend interface (decide) and reach peers with internal/respclient, not the RESP server or raft"},
	{Package: "rls", Never: []string{"resp", "httplimit", "metrics", "cmd/..."}, NeverDirect: []string{"replication", "region", "decide"},
		Why: "Envoy's service is a front door beside RESP: it is handed a backend and router, it does not own them"},
	{Package: "httplimit", Never: append([]string{"engine", "shards", "snapshot"}, servers...),
		Why: "the net/http middleware is a client of a limiter: it runs in the user's process"},
	{Package: "metrics", OnlyImportedBy: []string{"cmd/..."}, Never: []string{"cmd/...", "httplimit"},
		Why: "metrics reads every layer's counters for the binary; a layer keeps its own counters and never imports metrics"},
	{Package: "resp", OnlyImportedBy: []string{"cmd/...", "metrics"}, Never: []string{"rls", "httplimit", "metrics", "cmd/..."},
		Why: "the wire layer is the top of the server: only the binary wires it, and metrics reads its figures for the binary"},
	{Package: "cmd/...", Never: []string{"httplimit", "internal/poll", "internal/testcert", "internal/testlog", "internal/testnet"},
		Why: "the binary wires the server: the middleware is a library for users' processes, and the test helpers never ship"},
}

// without returns list less the names given.
func without(list []string, names ...string) []string {
	var out []string
outer:
	for _, p := range list {
		for _, n := range names {
			if p == n {
				continue outer
			}
		}
		out = append(out, p)
	}
	return out
}

// Matches reports whether the package path (relative to Module) is
// pattern: the same path, or below a "x/..." pattern ("..." alone is every
// package of the module).
func Matches(pattern, path string) bool {
	if pattern == "..." {
		return true
	}
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == tree || strings.HasPrefix(path, tree+"/")
	}
	return path == pattern
}

// Package is what Check needs of one package: its path relative to Module,
// the module's packages it imports itself, and those it imports directly
// or not (tests aside).
type Package struct {
	Path    string
	Imports []string
	Deps    []string
}

// Violation is one import a rule forbids.
type Violation struct {
	Rule     Rule
	Importer string // the package that imports
	Imported string // the package it must not
	Direct   bool   // imported by Importer itself
}

// String words the violation for a test failure.
func (v Violation) String() string {
	how := "imports, through another package,"
	if v.Direct {
		how = "imports"
	}
	return v.Importer + " " + how + " " + v.Imported + " (rule for " + v.Rule.Package + ": " + v.Rule.Why + ")"
}

// Check returns every import of pkgs that rules forbid, in the order of
// pkgs and rules.
func Check(rules []Rule, pkgs []Package) []Violation {
	var out []Violation
	for _, p := range pkgs {
		for _, r := range rules {
			if Matches(r.Package, p.Path) {
				for _, d := range p.Deps {
					if matchAny(r.Never, d) && !Matches(r.Package, d) {
						out = append(out, Violation{Rule: r, Importer: p.Path, Imported: d, Direct: contains(p.Imports, d)})
					}
				}
				for _, d := range p.Imports {
					if matchAny(r.NeverDirect, d) {
						out = append(out, Violation{Rule: r, Importer: p.Path, Imported: d, Direct: true})
					}
				}
			}
			if len(r.OnlyImportedBy) > 0 && !Matches(r.Package, p.Path) && !matchAny(r.OnlyImportedBy, p.Path) {
				for _, d := range p.Deps {
					if Matches(r.Package, d) {
						out = append(out, Violation{Rule: r, Importer: p.Path, Imported: d, Direct: contains(p.Imports, d)})
					}
				}
			}
		}
	}
	return out
}

func matchAny(patterns []string, path string) bool {
	for _, p := range patterns {
		if Matches(p, path) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
