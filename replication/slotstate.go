package replication

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
)

// The group's replicated cluster state is a cluster.State, held by the
// FSM. It changes only through entryCluster log entries (Apply) and the
// moves of ops entries (noteOp), so every replica holds the same state and
// decides every op alike with cluster.Check. The entries' format is
// codec.go's.

// clusterState is the replicated part. Written only by the FSM's apply
// goroutine, under FSM.mu; read under FSM.mu (or without it on the apply
// goroutine).
type clusterState = cluster.State

// slotCheck decides at apply time whether op may run in this group, with
// cluster.Check in Apply mode over s and the store at now: nil when it
// may, else the verdict's sentinel (cluster.ErrMoved, cluster.ErrAsk,
// cluster.ErrTryAgain). A key in flight passes: the store refuses the op
// itself with shards.ErrMoving, under the key's shard lock. Ops without
// keys and the moves themselves (the source's own bookkeeping) are not
// checked.
func slotCheck(s *clusterState, store *shards.Store, op *shards.Op, now int64) error {
	switch op.Code {
	case shards.OpLimit, shards.OpLimitAll, shards.OpDel, shards.OpRestore:
	default:
		return nil
	}
	q := cluster.Query{Keys: op.Keys, Mode: cluster.Apply, Asking: op.Asking, Restore: op.Code == shards.OpRestore}
	return cluster.Check(s, storeKeys{store, s, now}, &q).Err()
}

// storeKeys is cluster.Keys over a store at one instant, with the
// tombstones of a cluster state (nil: none).
type storeKeys struct {
	store *shards.Store
	state *clusterState
	now   int64
}

func (k storeKeys) Here(key []byte) bool { return k.store.Exists([][]byte{key}, k.now) > 0 }

func (k storeKeys) InFlight(key []byte) bool {
	_, ok := k.store.Moving(key)
	return ok
}

func (k storeKeys) Moved(key []byte) bool { return k.state != nil && k.state.Tombstone(key) }

// noteOp records what an applied op changed in the moves: a key restored
// here loses its tombstone and its destination; a key moved out records
// its destination; a key whose move completed while its slot migrates
// becomes a tombstone; a key put back or flushed loses its destination.
func noteOp(s *clusterState, store *shards.Store, op *shards.Op, res *shards.Result) {
	switch op.Code {
	case shards.OpRestore:
		if res.Err == nil {
			s.Restored(op.Keys[0])
		}
	case shards.OpMoveOut:
		if res.Err != nil {
			return // refused (Exclusive): the keys belong to another move
		}
		for _, k := range op.Keys {
			if _, ok := store.Moving(k); ok {
				s.MovedOut(k, op.Dest)
			}
		}
	case shards.OpMoveDone:
		for _, k := range op.Keys {
			s.MoveDone(k)
		}
	case shards.OpMoveAbort:
		for _, k := range op.Keys {
			if _, ok := store.Moving(k); !ok {
				s.MoveAborted(k)
			}
		}
	case shards.OpFlush:
		s.Flushed()
	}
}

// notesOp reports whether noteOp may change anything for op.
func notesOp(op *shards.Op) bool {
	switch op.Code {
	case shards.OpRestore, shards.OpMoveOut, shards.OpMoveDone, shards.OpMoveAbort, shards.OpFlush:
		return true
	}
	return false
}

// applyCluster applies an entryCluster entry. A corrupt one is refused
// alike on every replica.
func (f *FSM) applyCluster(l *raft.Log) {
	c, err := decodeClusterChange(l.Data[entryHeader:])
	if err != nil {
		f.log.Error("replication: refusing cluster entry", "index", l.Index, "err", err)
		f.applied(l, nil, err)
		return
	}
	now := max(int64(binary.LittleEndian.Uint64(l.Data[2:])), f.lastTime.Load())
	f.lastTime.Store(now)
	f.mu.Lock()
	var moveErr error
	if c.Action == actTakeMove || c.Action == actDropMove {
		moveErr = f.cluster.ApplyMove(&c, now)
	} else {
		f.cluster.Apply(&c, f.group)
	}
	f.sharded.Store(f.cluster.Sharded())
	f.tombstones.Store(int64(len(f.cluster.Moved)))
	f.mu.Unlock()
	// The routing table first, then the caller: once SETSLOT or ADDSLOTS
	// answers, this node redirects by the new state.
	if f.onCluster != nil {
		f.onCluster()
	}
	f.applied(l, nil, moveErr)
}

// clusterState returns a copy of the replicated cluster state.
func (f *FSM) clusterState() clusterState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cluster.Clone()
}

// clusterMeta is the cluster state in a snapshot's metadata.
type clusterMeta struct {
	Slots     [][2]int             `json:"slots,omitempty"`
	Migrating map[int]string       `json:"migrating,omitempty"`
	Importing map[int]string       `json:"importing,omitempty"`
	Groups    map[string]peerSeeds `json:"groups,omitempty"`
	// Moving are the keys in flight to another group: key, DUMP payload
	// of the state kept for them, and where they were sent.
	Moving []movingMeta `json:"moving,omitempty"`
	// Moved are the tombstones (cluster.State.Moved).
	Moved [][]byte `json:"moved,omitempty"`
	// Lease is the group's move lease (cluster.State.Lease), when held.
	Lease *cluster.MoveLease `json:"lease,omitempty"`
}

type movingMeta struct {
	Key   []byte `json:"k"`
	State []byte `json:"s"`
	Dest  string `json:"d,omitempty"`
}

// snapshotCluster captures the cluster state and the store's keys in
// flight; nil when there is none (older snapshots look the same).
func (f *FSM) snapshotCluster() *clusterMeta {
	f.mu.Lock()
	m := &clusterMeta{Slots: f.cluster.Ranges(), Migrating: maps.Clone(f.cluster.Migrating),
		Importing: maps.Clone(f.cluster.Importing), Groups: maps.Clone(f.cluster.Groups)}
	if l := f.cluster.Lease; l.Holder != "" {
		m.Lease = &l
	}
	for k := range f.cluster.Moved {
		m.Moved = append(m.Moved, []byte(k))
	}
	dests := maps.Clone(f.cluster.MovingTo)
	f.mu.Unlock()
	slices.SortFunc(m.Moved, bytes.Compare)
	f.store.MovingKeys(func(key []byte, st engine.State) bool {
		m.Moving = append(m.Moving, movingMeta{Key: slices.Clone(key), State: snapshot.EncodeDump(&st), Dest: dests[string(key)]})
		return true
	})
	if len(m.Slots) == 0 && len(m.Migrating) == 0 && len(m.Importing) == 0 && len(m.Groups) == 0 && len(m.Moving) == 0 && len(m.Moved) == 0 && m.Lease == nil {
		return nil
	}
	return m
}

// restoreCluster installs the cluster state of a snapshot (m nil: none),
// after the keyspace was loaded.
func (f *FSM) restoreCluster(m *clusterMeta) error {
	cs := cluster.NewState()
	if m != nil {
		for _, r := range m.Slots {
			if r[0] < 0 || r[1] >= hashslot.Count || r[0] > r[1] {
				return fmt.Errorf("replication: restore snapshot: slot range %d-%d", r[0], r[1])
			}
			for s := r[0]; s <= r[1]; s++ {
				cs.SetOwned(s, true)
			}
		}
		maps.Copy(cs.Migrating, m.Migrating)
		maps.Copy(cs.Importing, m.Importing)
		maps.Copy(cs.Groups, m.Groups)
		for _, mv := range m.Moving {
			st, err := snapshot.DecodeDump(mv.State)
			if err != nil {
				return fmt.Errorf("replication: restore snapshot: key in flight: %w", err)
			}
			f.store.SetMoving(mv.Key, st)
			cs.MovingTo[string(mv.Key)] = mv.Dest
		}
		for _, k := range m.Moved {
			cs.Moved[string(k)] = struct{}{}
		}
		if m.Lease != nil {
			cs.Lease = *m.Lease
		}
	}
	f.mu.Lock()
	f.cluster = cs
	f.sharded.Store(cs.Sharded())
	f.tombstones.Store(int64(len(cs.Moved)))
	f.mu.Unlock()
	if f.onCluster != nil {
		f.onCluster()
	}
	return nil
}
