package resp

import (
	"context"
	"sync"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/shards"
)

// Backend executes keyspace operations. Implementations: Local (standalone)
// and the cluster's replicated node. A Server calls a Backend from many
// connections at once; implementations must be safe for concurrent use.
type Backend interface {
	// Write applies ops in order and fills res[i] for ops[i] (len(res) ==
	// len(ops)); it returns only once they are applied (in a cluster:
	// committed). ctx bounds the wait. A non-nil error means the ops may not
	// have been applied and every reply answers that error. The ops' keys
	// are valid only during the call: an implementation that keeps them
	// must copy them.
	Write(ctx context.Context, ops []shards.Op, res []shards.Result) error
	// WriteAtomic is Write for the writes of one transaction (EXEC): no
	// op of any other Write or WriteAtomic call is applied between its
	// ops, and in a cluster they are one log entry, so that a failover
	// applies all of them or none.
	WriteAtomic(ctx context.Context, ops []shards.Op, res []shards.Result) error
	// ReadNow confirms this node may serve a read (in a cluster: leadership
	// confirmed, or local reads allowed) and returns the instant (Unix ns)
	// at which reads evaluate expiry.
	ReadNow(ctx context.Context) (int64, error)
	// Store is the keyspace reads are served from.
	Store() *shards.Store
}

// Local is the standalone Backend: operations apply directly to a Store at
// the instant its clock returns, read once per Write call so that a pipelined
// batch shares one instant.
type Local struct {
	store *shards.Store
	now   func() int64
	// tx are held shared by Write (one, chosen by the first key) and all
	// exclusively by WriteAtomic, so that no write lands between a
	// transaction's ops while ordinary writes of different connections
	// still run in parallel. Striped, one cache line each, because a
	// single lock's reader count would be one line every event loop
	// writes on every batch.
	tx [txStripes]txStripe
}

// txStripes is the number of Local's transaction locks, a power of two.
const txStripes = 32

type txStripe struct {
	sync.RWMutex
	_ [64 - 24]byte // one cache line each (sync.RWMutex is 24 bytes)
}

// stripe returns the transaction lock a Write of ops takes: by its first
// key (FNV-1a of up to 16 bytes), so that connections on different keys
// mostly take different locks.
func (l *Local) stripe(ops []shards.Op) *txStripe {
	var h uint32 = 2166136261
	if len(ops) > 0 && len(ops[0].Keys) > 0 {
		k := ops[0].Keys[0]
		for i := 0; i < len(k) && i < 16; i++ {
			h = (h ^ uint32(k[i])) * 16777619
		}
	}
	return &l.tx[h&(txStripes-1)]
}

var _ Backend = (*Local)(nil)

// NewLocal returns a Backend over store whose time comes from now (Unix ns;
// it must be safe for concurrent use).
func NewLocal(store *shards.Store, now func() int64) *Local {
	return &Local{store: store, now: now}
}

// Write applies ops in order at one instant; it never fails.
func (l *Local) Write(_ context.Context, ops []shards.Op, res []shards.Result) error {
	s := l.stripe(ops)
	s.RLock()
	l.apply(ops, res)
	s.RUnlock()
	return nil
}

// WriteAtomic applies ops in order at one instant, excluding every other
// write meanwhile; it never fails.
func (l *Local) WriteAtomic(_ context.Context, ops []shards.Op, res []shards.Result) error {
	for i := range l.tx {
		l.tx[i].Lock()
	}
	l.apply(ops, res)
	for i := range l.tx {
		l.tx[i].Unlock()
	}
	return nil
}

func (l *Local) apply(ops []shards.Op, res []shards.Result) {
	now := l.now()
	for i := range ops {
		l.store.Exec(&ops[i], now, &res[i])
	}
}

// ReadNow returns the clock's instant; a standalone server may always read.
func (l *Local) ReadNow(context.Context) (int64, error) { return l.now(), nil }

// Store returns the keyspace.
func (l *Local) Store() *shards.Store { return l.store }

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
	Role() RoleInfo
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

// RoleInfo is the ROLE reply. A leader answers like a Redis master
// ("master", offset, replicas); a follower like a replica ("slave", leader
// host and port, state, offset).
type RoleInfo struct {
	// Leader is true on the node that accepts writes.
	Leader bool
	// Offset is the replication offset (for Raft: the applied index).
	Offset int64
	// Replicas lists the followers the leader reaches (leader only).
	Replicas []ReplicaInfo
	// LeaderHost and LeaderPort locate the leader's RESP listener
	// (follower only).
	LeaderHost string
	LeaderPort int
	// State is the follower's link state: "connect", "connecting", "sync"
	// or "connected".
	State string
}

// ReplicaInfo is one follower in a leader's ROLE reply.
type ReplicaInfo struct {
	// Host and Port are the follower's RESP listener.
	Host string
	Port int
	// Offset is the follower's replication offset as far as the leader
	// knows it (for Raft: its applied index at its last answer to the
	// leader's status request).
	Offset int64
}
