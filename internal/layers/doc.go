// Package layers states, as data, which of the module's packages may
// import which (Rules), and its test checks the module against them with
// `go list -json`, so that the direction of the dependencies is checked,
// not only written down. Each package's DESIGN.md (or doc.go) names what
// the package owns and what it must never import; the rules here are those
// sentences as a table.
//
// The direction, from the bottom: engine (the limiter maths) imports
// nothing of the project; internal/* imports nothing above engine; shards
// and snapshot sit on engine; cluster (the Redis Cluster model) on
// internal/hashslot; replication on cluster, shards and snapshot; decide
// (the decision path: the backend interface, rules, routing across groups)
// on replication; region on decide, never on raft directly; rls and
// httplimit are front doors that never import the RESP server (rls never
// imports replication, region or decide itself: it is handed what it
// decides through); resp sits above all of them, and only the binary
// (cmd/cellserver) and metrics, which reads every layer's figures for the
// binary, import it; the binary never imports httplimit or the test
// helpers. Tests are not held to the rules (a package's test may start a
// RESP server). TestDesignNamesOwnerAndImports checks that every
// DESIGN.md says what its package owns and never imports, and that a rule
// here holds it to that.
//
// The package has no code for the server; it imports nothing of the
// project.
package layers
