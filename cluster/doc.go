// Package cluster is the Redis Cluster model of cellserver, without raft
// and without sockets: what a group's replicated slot state is (State and
// the Changes that make it), which group serves each slot as a node sees
// the cluster (Routing), the one slot rule that decides whether a command's
// keys are served here or elsewhere (Check), which slot changes are
// allowed (CheckChange), the CLUSTER views as data, the Mover, which
// runs a group's moves one at a time by a lease in the group's log, and
// MIGRATE (its arguments, its phases, and its RESTOREs to the target over
// an injected RESP client: RESPTarget).
//
// The replication package keeps State in each group's log and decides every
// keyed op at apply time with Check; the wire layer (resp) decides, with
// the same Check over its Routing and keyspace, what it can before a
// command runs, and words the verdicts (MOVED, ASK, TRYAGAIN, CROSSSLOT).
// Nothing here is worded for the wire. See DESIGN.md.
package cluster
