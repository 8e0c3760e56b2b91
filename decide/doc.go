// Package decide is the one decision path under every front door: what
// RESP's commands, MULTI/EXEC, Envoy's rate-limit service (rls) and the
// receiving side of region links all hand their limiter requests to.
//
// The name is the noun-verb the package serves — the decision a request
// gets — rather than any one stage of it: the path is the operator's
// rules (limit-override, limit-shadow: Rules) → the region gate (package
// region, a Backend in front of a Backend) → group routing (Groups, for a
// door that routes by key across a cluster's groups) → the group's
// replication (replication.Node) or the local keyspace (Local).
//
// It defines Backend, the interface every stage and every door shares,
// once; the region gate and the doors use it rather than copies of it.
// cmd/cellserver assembles the path once and hands the same one to every
// door. DESIGN.md says what the package owns and what it must never
// import.
package decide
