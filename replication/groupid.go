package replication

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"time"
)

// A group's identity (DESIGN.md, "The group id"). A member is its NodeID
// and its vote stands for the group's log; a NodeID alone does not say
// which log a process holds. The group id does: random, recorded once in
// the group's own log (an entryGroupID entry the first ready leader writes
// when its log has none, which is how a new group and a group whose log
// predates the id both get one), applied by every member and carried in
// snapshots. Every node reports it (status answers, RAFT.INFO), raft
// connections exchange it in the handshake (auth.go), and the leader
// judges a node's log by it (checkLog) before giving it a member's place.

// groupIDLen is the length of a group id the leader writes: 16 random
// bytes in hex.
const groupIDLen = 32

// maxGroupIDLen bounds a group id read from a peer in the handshake.
const maxGroupIDLen = 64

// groupIdentity is the group id as the log recorded it: ID, and Index,
// the raft index of the entry that recorded it (0 when restored from a
// snapshot that did not say).
type groupIdentity struct {
	ID    string
	Index uint64
}

// Keys of the stable store (beside raft's term and vote) for what a node
// keeps of its group id outside the log:
//
//   - stableGroupID: the id its FSM last applied or restored. A restarted
//     node applies its log again only once it hears from a leader (and
//     none does while the configuration lists it at another address), so
//     until then this is the id it reports and presents.
//   - stableOwnLog: 1 once this node bootstrapped its log. A log born here
//     that records no id yet is a new group's before its first leader
//     wrote one — not a log from before group ids, which is what an empty
//     id otherwise means — and checkLog refuses it.
var (
	stableGroupID = []byte("cellserver_group_id")
	stableOwnLog  = []byte("cellserver_own_log")
)

// groupIDs is a Node's group id: the one kept in its stable store, and
// whether this node bootstrapped its log.
type groupIDs struct {
	n *Node
	// stored is the group id kept in the stable store, ownLog whether
	// this node bootstrapped its log.
	stored atomic.Pointer[string]
	ownLog atomic.Bool
}

// loadGroupState reads stableGroupID and stableOwnLog (open, before raft
// starts).
func (gi *groupIDs) loadGroupState() error {
	n := gi.n
	id, err := n.logStore.stable.Get(stableGroupID)
	if err != nil && !notFound(err) {
		return fmt.Errorf("replication: read the stored group id: %w", err)
	}
	s := string(id)
	gi.stored.Store(&s)
	own, err := n.logStore.stable.GetUint64(stableOwnLog)
	if err != nil && !notFound(err) {
		return fmt.Errorf("replication: read the stored bootstrap mark: %w", err)
	}
	gi.ownLog.Store(own == 1)
	return nil
}

// notFound reports whether a stable store's error says the key is absent
// (raft-boltdb's ErrKeyNotFound, which raft itself matches by text).
func notFound(err error) bool { return err.Error() == "not found" }

// storeGroupID is the FSM's hook when it applies or restores a group id:
// the id is kept in the stable store for the next start. On the apply
// goroutine; a failure is logged (the log still has the id).
func (gi *groupIDs) storeGroupID(id string) {
	n := gi.n
	if p := gi.stored.Load(); p != nil && *p == id {
		return
	}
	if err := n.logStore.stable.Set(stableGroupID, []byte(id)); err != nil {
		n.log.Warn("replication: cannot store the group id; it stays in the log", "err", err)
		return
	}
	gi.stored.Store(&id)
}

// markOwnLog records that this node bootstrapped its log (stableOwnLog).
func (gi *groupIDs) markOwnLog() {
	n := gi.n
	if err := n.logStore.stable.SetUint64(stableOwnLog, 1); err != nil {
		n.log.Warn("replication: cannot store the bootstrap mark", "err", err)
	}
	gi.ownLog.Store(true)
}

// groupID is this node's group id: its FSM's, else the one it stored when
// it last applied one ("" when neither: a new node, or a log from before
// group ids).
func (gi *groupIDs) groupID() string {
	n := gi.n
	if id := n.fsm.GroupID(); id != "" {
		return id
	}
	if p := gi.stored.Load(); p != nil {
		return *p
	}
	return ""
}

// newGroupID returns a fresh random group id.
func newGroupID() string {
	var b [groupIDLen / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// applyGroupID applies an entryGroupID entry at index: the first id
// recorded is final; a later one (two leaders that each found none, one
// deposed before its entry was seen applied) is ignored, alike on every
// replica.
func (f *FSM) applyGroupID(id string, index uint64) {
	if id == "" {
		return
	}
	if g := f.groupID.Load(); g != nil {
		if g.ID != id {
			f.log.Info("replication: ignoring a second group id entry; the first recorded stays", "group_id", g.ID, "ignored", id, "index", index)
		}
		return
	}
	f.groupID.Store(&groupIdentity{ID: id, Index: index})
	if f.onGroupID != nil {
		f.onGroupID(id)
	}
}

// GroupID returns the group's id as this replica's log recorded it, ""
// until one is applied.
func (f *FSM) GroupID() string {
	if g := f.groupID.Load(); g != nil {
		return g.ID
	}
	return ""
}

// recordGroupID runs on a leader that just became ready (generation gen):
// when the log records no group id yet, it commits one. Every entry of
// earlier terms is applied by then (the barrier), so a log that has one
// shows it. Retried while this node leads; a successor does the same.
func (gi *groupIDs) recordGroupID(gen uint64) {
	n := gi.n
	for n.leadGen.Load() == gen && n.ctx.Err() == nil && n.fsm.groupID.Load() == nil {
		id := newGroupID()
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.NoLeaderTimeout)
		err := n.submit(ctx, &pending{groupID: id})
		cancel()
		if err == nil {
			n.log.Info("replication: recorded the group id in the log", "group_id", n.fsm.GroupID())
			return
		}
		n.log.Warn("replication: recording the group id failed; retrying while this node leads", "err", err)
		if !n.boot.pause(time.Second) {
			return
		}
	}
}

// LogMismatch is why a node's raft log is not taken as this group's.
type LogMismatch int

const (
	// LogOtherGroup: the node's log records another group id.
	LogOtherGroup LogMismatch = iota + 1
	// LogNoGroupID: the node's log has no group id, though the node has
	// applied it past the index where this group's log records one.
	LogNoGroupID
	// LogEmpty: the node has no raft state (a new or wiped node); only a
	// new member may have none.
	LogEmpty
	// LogOwn: the node bootstrapped a log of its own whose first leader
	// has not recorded a group id yet (a new group's).
	LogOwn
)

// LogError is ErrNotGroupLog with its figures: the node claiming ID at
// raft address Addr holds a log this group cannot give a member's place
// to, for Reason. GroupID is this group's id ("" while none is recorded),
// NodeGroupID the node's; Index is where this group's log recorded its
// id (LogNoGroupID). Member is true when ID is a member already (the node
// asked to take its place): the error is then also ErrIDInUse.
type LogError struct {
	ID, Addr             string
	Reason               LogMismatch
	GroupID, NodeGroupID string
	Index                uint64
	Member               bool
}

func (e *LogError) Error() string {
	var why string
	switch e.Reason {
	case LogOtherGroup:
		why = fmt.Sprintf("the node there has the raft log of another group (group id %s; this group's is %q)", e.NodeGroupID, e.GroupID)
	case LogNoGroupID:
		why = fmt.Sprintf("the node there has a raft log without a group id past index %d, where this group's log records group id %s", e.Index, e.GroupID)
	case LogOwn:
		why = fmt.Sprintf("the node there bootstrapped a raft log of its own, which records no group id yet (this group's is %q)", e.GroupID)
	default:
		why = "the node there has no raft state (a new or wiped node)"
	}
	return fmt.Sprintf("replication: join %s at %s: %s", e.ID, e.Addr, why)
}

// Unwrap returns ErrNotGroupLog, and ErrIDInUse for a member.
func (e *LogError) Unwrap() []error {
	if e.Member {
		return []error{ErrNotGroupLog, ErrIDInUse}
	}
	return []error{ErrNotGroupLog}
}

// checkLog is the rule by which the leader judges the raft log of a node
// before it takes a place in the group: own is this group's id (nil while
// its log records none), st the node's status answer, member whether the
// node asks for an existing member's place (its vote) rather than to join
// as a new member. nil when the log may be this group's:
//
//   - a log that records a group id must record this group's;
//   - an empty log joins only as a new member (it receives the group's
//     log, group id included, before it is promoted);
//   - a log the node bootstrapped itself that records no id yet is a new
//     group's, whose first leader has not written its id (st.OwnLog);
//   - a log without a group id is one that predates it (written before
//     group ids, or behind the entry that recorded this group's): taken
//     only while the node has not applied the log past the index where
//     this group's log records its id — a log that went past it without
//     recording it is not this group's.
//
// The rule is the same for members and new members but for the empty log,
// because raft keeps a joining node's entries that match the leader's by
// index and term, which two groups' logs do at their start.
func checkLog(own *groupIdentity, st nodeStatus, member bool) *LogError {
	e := &LogError{ID: st.ID, NodeGroupID: st.GroupID, Member: member}
	if own != nil {
		e.GroupID, e.Index = own.ID, own.Index
	}
	switch {
	case st.GroupID != "" && (own == nil || st.GroupID != own.ID):
		e.Reason = LogOtherGroup
	case st.GroupID != "":
		return nil
	case st.LastIndex == 0:
		if !member {
			return nil
		}
		e.Reason = LogEmpty
	case st.OwnLog:
		e.Reason = LogOwn
	case own != nil && own.Index > 0 && st.AppliedIndex >= own.Index:
		e.Reason = LogNoGroupID
	default:
		return nil
	}
	return e
}

// groupIDsConflict reports whether two nodes that exchanged group ids in
// a raft connection's handshake hold different groups' logs: both
// recorded one, and they differ. A node without one (new, or with a log
// from before group ids) talks to any.
func groupIDsConflict(a, b string) bool { return a != "" && b != "" && a != b }
