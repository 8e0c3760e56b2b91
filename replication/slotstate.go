package replication

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
)

// The group's replicated cluster state: which hash slots it owns, which it
// is migrating out or importing, and which other groups it knows. It
// changes only through entryCluster log entries, so every replica holds
// the same state and the FSM's per-op slot check decides alike everywhere.
// The entries' format is codec.go's.

// peerSeeds is where another group can be reached: raft addresses for the
// directory's requests, RESP addresses for display and MEET.
type peerSeeds struct {
	Raft []string `json:"raft"`
	Resp []string `json:"resp,omitempty"`
}

// clusterState is the replicated part. Written only by the FSM's apply
// goroutine, under FSM.mu; read under FSM.mu (or without it on the apply
// goroutine).
type clusterState struct {
	owned     [hashslot.Count / 64]uint64
	nOwned    int
	migrating map[int]string // slot → target group
	importing map[int]string // slot → source group
	groups    map[string]peerSeeds
	// moved are the keys this group moved away (OpMoveDone) while their
	// slot was migrating: tombstones. Such a key answers TRYAGAIN here
	// once the slot is stable again (ASK while it still migrates), never
	// as a fresh key, until it comes back (a RESTORE here drops its
	// tombstone) or the slot is given to another group (SETSLOT NODE).
	moved map[string]struct{}
	// movingTo maps a key in flight (shards' moving set) to the RESP
	// address its OpMoveOut named (empty: unknown), for CLUSTER ABORTMOVE.
	movingTo map[string]string
}

func newClusterState() clusterState {
	return clusterState{migrating: map[int]string{}, importing: map[int]string{}, groups: map[string]peerSeeds{},
		moved: map[string]struct{}{}, movingTo: map[string]string{}}
}

func (s *clusterState) owns(slot int) bool { return s.owned[slot/64]&(1<<(slot%64)) != 0 }

func (s *clusterState) setOwned(slot int, own bool) {
	if s.owns(slot) == own {
		return
	}
	if own {
		s.owned[slot/64] |= 1 << (slot % 64)
		s.nOwned++
	} else {
		s.owned[slot/64] &^= 1 << (slot % 64)
		s.nOwned--
	}
}

// sharded reports whether slot checks apply: the group owns a slot or
// knows another group. Otherwise it serves every key.
func (s *clusterState) sharded() bool { return s.nOwned > 0 || len(s.groups) > 0 }

// ranges returns the owned slots as inclusive, ascending ranges.
func (s *clusterState) ranges() [][2]int {
	var out [][2]int
	for slot := 0; slot < hashslot.Count; slot++ {
		if !s.owns(slot) {
			continue
		}
		if n := len(out); n > 0 && out[n-1][1] == slot-1 {
			out[n-1][1] = slot
		} else {
			out = append(out, [2]int{slot, slot})
		}
	}
	return out
}

func (s *clusterState) clone() clusterState {
	c := *s
	c.migrating, c.importing, c.groups = maps.Clone(s.migrating), maps.Clone(s.importing), maps.Clone(s.groups)
	// The moves are left out (nil): a copy's readers decide about slots
	// (the directory, slot-change checks), and the sets can be large.
	c.moved, c.movingTo = nil, nil
	return c
}

// clusterChange is one decoded entryCluster entry.
type clusterChange struct {
	action byte
	ranges [][2]int
	slot   int
	group  string
	seeds  peerSeeds
	list   []clusterChange // actList
}

// apply changes s as c says. self is this group's name (a meet of it is
// ignored).
func (s *clusterState) apply(c *clusterChange, self string) {
	switch c.action {
	case actAddSlots, actDelSlots:
		for _, r := range c.ranges {
			for slot := r[0]; slot <= r[1]; slot++ {
				s.setOwned(slot, c.action == actAddSlots)
				if c.action == actDelSlots {
					delete(s.migrating, slot)
					delete(s.importing, slot)
				}
			}
		}
	case actMigrating:
		s.migrating[c.slot] = c.group
		delete(s.importing, c.slot)
	case actImporting:
		s.importing[c.slot] = c.group
		delete(s.migrating, c.slot)
	case actStable:
		delete(s.migrating, c.slot)
		delete(s.importing, c.slot)
	case actOwn:
		s.setOwned(c.slot, true)
		delete(s.migrating, c.slot)
		delete(s.importing, c.slot)
	case actDisown:
		s.setOwned(c.slot, false)
		delete(s.migrating, c.slot)
		delete(s.importing, c.slot)
		// The slot's keys are the new owner's now, wherever they are.
		for k := range s.moved {
			if hashslot.Of([]byte(k)) == c.slot {
				delete(s.moved, k)
			}
		}
	case actMeet:
		if c.group != self {
			s.groups[c.group] = peerSeeds{Raft: slices.Clone(c.seeds.Raft), Resp: slices.Clone(c.seeds.Resp)}
		}
	case actList:
		for i := range c.list {
			s.apply(&c.list[i], self)
		}
	}
}

// slotCheck decides whether op may run in this group, from the replicated
// state, at apply time (so that every replica decides alike): nil when it
// may; ErrMoved when a key's slot is not served here (not owned, or
// imported and the op was not sent after ASKING); for a slot migrating
// out, ErrAsk when none of the op's keys is here, ErrTryAgain when some
// are and some are not; ErrTryAgain for a tombstone (a key moved away from
// a slot that no longer migrates) except for a RESTORE, which brings it
// back. A key in flight (shards' moving set) counts as here: the store
// refuses the op with shards.ErrMoving. Ops without keys and the moves
// themselves (the source's own bookkeeping) are not checked.
func (s *clusterState) slotCheck(store *shards.Store, op *shards.Op, now int64) error {
	switch op.Code {
	case shards.OpLimit, shards.OpLimitAll, shards.OpDel, shards.OpRestore:
	default:
		return nil
	}
	here, away, gone := 0, 0, false
	for _, key := range op.Keys {
		slot := hashslot.Of(key)
		if !s.owns(slot) {
			if _, ok := s.importing[slot]; ok && op.Asking {
				continue
			}
			return ErrMoved
		}
		_, migrating := s.migrating[slot]
		if _, moved := s.moved[string(key)]; moved && op.Code != shards.OpRestore {
			if migrating {
				away++
			} else {
				gone = true
			}
			continue
		}
		if !migrating {
			continue
		}
		if store.Exists([][]byte{key}, now) > 0 {
			here++
		} else if _, moving := store.Moving(key); moving {
			here++
		} else {
			away++
		}
	}
	switch {
	case gone:
		return ErrTryAgain
	case away == 0:
		return nil
	case here == 0:
		return ErrAsk
	}
	return ErrTryAgain
}

// noteOp records what an applied op changed in the moves: a key restored
// here loses its tombstone and its destination; a key moved out records
// its destination; a key whose move completed while its slot migrates
// becomes a tombstone; a key put back or flushed loses its destination.
func (s *clusterState) noteOp(store *shards.Store, op *shards.Op, res *shards.Result) {
	switch op.Code {
	case shards.OpRestore:
		if res.Err == nil {
			delete(s.moved, string(op.Keys[0]))
			delete(s.movingTo, string(op.Keys[0]))
		}
	case shards.OpMoveOut:
		for _, k := range op.Keys {
			if _, ok := store.Moving(k); ok {
				s.movingTo[string(k)] = op.Dest
			}
		}
	case shards.OpMoveDone:
		for _, k := range op.Keys {
			delete(s.movingTo, string(k))
			slot := hashslot.Of(k)
			if _, migrating := s.migrating[slot]; migrating && s.owns(slot) {
				s.moved[string(k)] = struct{}{}
			}
		}
	case shards.OpMoveAbort:
		for _, k := range op.Keys {
			if _, ok := store.Moving(k); !ok {
				delete(s.movingTo, string(k))
			}
		}
	case shards.OpFlush:
		clear(s.movingTo)
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
	f.cluster.apply(&c, f.group)
	f.sharded.Store(f.cluster.sharded())
	f.mu.Unlock()
	// The routing table first, then the caller: once SETSLOT or ADDSLOTS
	// answers, this node redirects by the new state.
	if f.onCluster != nil {
		f.onCluster()
	}
	f.applied(l, nil, nil)
}

// clusterState returns a copy of the replicated cluster state.
func (f *FSM) clusterState() clusterState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cluster.clone()
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
	// Moved are the tombstones (clusterState.moved).
	Moved [][]byte `json:"moved,omitempty"`
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
	m := &clusterMeta{Slots: f.cluster.ranges(), Migrating: maps.Clone(f.cluster.migrating),
		Importing: maps.Clone(f.cluster.importing), Groups: maps.Clone(f.cluster.groups)}
	for k := range f.cluster.moved {
		m.Moved = append(m.Moved, []byte(k))
	}
	dests := maps.Clone(f.cluster.movingTo)
	f.mu.Unlock()
	slices.SortFunc(m.Moved, bytes.Compare)
	f.store.MovingKeys(func(key []byte, st engine.State) bool {
		m.Moving = append(m.Moving, movingMeta{Key: slices.Clone(key), State: snapshot.EncodeDump(&st), Dest: dests[string(key)]})
		return true
	})
	if len(m.Slots) == 0 && len(m.Migrating) == 0 && len(m.Importing) == 0 && len(m.Groups) == 0 && len(m.Moving) == 0 && len(m.Moved) == 0 {
		return nil
	}
	return m
}

// restoreCluster installs the cluster state of a snapshot (m nil: none),
// after the keyspace was loaded.
func (f *FSM) restoreCluster(m *clusterMeta) error {
	cs := newClusterState()
	if m != nil {
		for _, r := range m.Slots {
			if r[0] < 0 || r[1] >= hashslot.Count || r[0] > r[1] {
				return fmt.Errorf("replication: restore snapshot: slot range %d-%d", r[0], r[1])
			}
			for s := r[0]; s <= r[1]; s++ {
				cs.setOwned(s, true)
			}
		}
		maps.Copy(cs.migrating, m.Migrating)
		maps.Copy(cs.importing, m.Importing)
		maps.Copy(cs.groups, m.Groups)
		for _, mv := range m.Moving {
			st, err := snapshot.DecodeDump(mv.State)
			if err != nil {
				return fmt.Errorf("replication: restore snapshot: key in flight: %w", err)
			}
			f.store.SetMoving(mv.Key, st)
			cs.movingTo[string(mv.Key)] = mv.Dest
		}
		for _, k := range m.Moved {
			cs.moved[string(k)] = struct{}{}
		}
	}
	f.mu.Lock()
	f.cluster = cs
	f.sharded.Store(cs.sharded())
	f.mu.Unlock()
	if f.onCluster != nil {
		f.onCluster()
	}
	return nil
}
