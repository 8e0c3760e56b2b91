// Package replication replicates the cellserver keyspace with Raft
// (hashicorp/raft, raft-boltdb for the log and stable store, raft's file
// snapshot store holding snapshots in the snapshot package's format), so
// that a cluster keeps its limiter state when a node dies.
//
// A Node is one member. It implements the wire layer's backend:
//
//   - Write packs the operations of every connection into shared log
//     entries (group commit), stamped by the leader with the instant they
//     apply at, and returns each caller's results once its entry is
//     committed and applied. A follower forwards to the leader through an
//     internal service on the raft port (pooled, authenticated connections;
//     service.go) and relays the results, so clients may
//     talk to any node.
//   - ReadNow confirms a read may be served and returns the instant to
//     evaluate it at: linearizable by default (leadership confirmed with a
//     quorum; followers obtain a read point from the leader), or local and
//     possibly stale with Config.LocalReads.
//   - With no leader, commands fail with ErrNoLeader ("CLUSTERDOWN ...")
//     within Config.NoLeaderTimeout; they never hang.
//
// The FSM is thin: it decodes an entry and runs each operation on the
// shards.Store at the entry's stamped time. No replica reads its clock
// while applying, and time never runs backwards across leader changes, so
// every replica computes the same decisions. Membership (each node's RESP
// address) also goes through the log; Node.Members (Join, Remove) and
// Node.Info manage and report it. So do the hash slots the group owns
// when several groups form one Redis Cluster (a cluster.State kept in the
// log, slotstate.go; every keyed op is decided by cluster.Check at apply
// time), changed through Node.Slots; Routing tells which group serves each
// slot, from this group's log and the other groups' answers
// (Node.Directory, directory.go).
// See DESIGN.md for the reasoning.
package replication
