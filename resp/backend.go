package resp

import (
	"context"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/replication"
)

// Persistence saves the keyspace to disk. nil in Config means persistence is
// off. Implementations must be safe for concurrent use.
type Persistence interface {
	// Save writes a snapshot and returns once it is durable (SAVE).
	Save() error
	// BGSave starts a snapshot in the background (BGSAVE); it returns an
	// error when one is already running ("Background save already in
	// progress") or cannot start.
	BGSave() error
	// Shutdown waits for a background save in progress to finish and then,
	// when save is true, writes a final snapshot (SHUTDOWN [SAVE]).
	Shutdown(save bool) error
	// LastSave returns the Unix time (seconds) of the last successful save.
	LastSave() int64
	// InfoFields returns the INFO persistence fields, in order.
	InfoFields() [][2]string
}

// Cluster describes this node's place in a replicated cluster. nil in Config
// means standalone. Implementations must be safe for concurrent use.
type Cluster interface {
	// Role returns what ROLE answers.
	Role() replication.Role
	// InfoFields returns the INFO replication fields, in order.
	InfoFields() [][2]string
	// Routing returns the current routing table: every known group, its
	// members and slots, and which group serves each slot. It is immutable;
	// nil only before the node has one (then no slot is served).
	Routing() *cluster.Routing
	// AddSlots assigns free slots to this node's group (CLUSTER ADDSLOTS).
	AddSlots(ctx context.Context, slots []int) error
	// DelSlots makes slots of this node's group unowned (CLUSTER DELSLOTS).
	DelSlots(ctx context.Context, slots []int) error
	// Failover makes this follower its group's leader (CLUSTER FAILOVER)
	// and returns once it leads and serves.
	Failover(ctx context.Context) error
	// Meet introduces the group of the node whose RESP listener is
	// respAddr (host:port) (CLUSTER MEET).
	Meet(ctx context.Context, respAddr string) error
	// SetSlot runs CLUSTER SETSLOT slot action [clusterID]; clusterID is
	// a member's 40-hex cluster node id ("" for SlotStable).
	SetSlot(ctx context.Context, slot int, action cluster.SlotAction, clusterID string) error
	// MoveDest returns the RESP address a key in flight out of this group
	// was sent to, empty when unknown.
	MoveDest(key []byte) string
	// Tombstone reports whether key was moved away from this group while
	// its slot migrated and has not come back (cluster.State.Moved), as
	// this node's replica knows it.
	Tombstone(key []byte) bool
	// ChangeSlots makes the slot changes of one transaction (its queued
	// ADDSLOTS, DELSLOTS and SETSLOT) as one change of the group's log:
	// each is checked against the state as the ones before it leave it;
	// errs[i] is changes[i]'s refusal (then not applied). A non-nil err is
	// about the whole call, and errs is then nil.
	ChangeSlots(ctx context.Context, changes []cluster.SlotChange) (errs []error, err error)
}
