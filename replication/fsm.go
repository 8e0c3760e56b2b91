package replication

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
)

// FSM is the raft state machine: a thin adapter that decodes each committed
// entry and runs its operations on the keyspace at the entry's stamped time.
// It holds no limiter logic (the engine does the maths, shards the storage)
// and never reads a clock: the same log gives the same state on every
// replica.
//
// Apply, ApplyBatch, Snapshot and Restore are called by raft from one
// goroutine; the accessors (LastTime, LastIndex, Members) are safe for
// concurrent use.
type FSM struct {
	store *shards.Store
	log   *slog.Logger

	lastTime  atomic.Int64  // last applied stamped time, Unix ns
	lastIndex watermark     // raft index of the last applied entry
	entries   atomic.Uint64 // command entries applied
	ops       atomic.Uint64 // operations applied

	mu      sync.Mutex
	members map[string]string // node id → RESP address; guarded by mu
	cluster clusterState      // slots and known groups; written under mu
	sharded atomic.Bool       // cluster.Sharded(), read without mu on the apply path
	// tombstones is len(cluster.Moved), stored under mu, read without it
	// by the wire's slot check (Node.Tombstone) to skip the lock.
	tombstones atomic.Int64
	group      string // this node's group (a meet of it is ignored)
	// onCluster, when set, is called (on the apply goroutine, without mu)
	// after the cluster state changed.
	onCluster func()
	// settings are the replicated settings applied (name → value);
	// guarded by mu. onSetting, when set, is called (on the apply
	// goroutine, without mu) with each as it is applied or restored.
	settings  map[string]string
	onSetting func(name, value string)
	// groupID is the group's id as the log recorded it (groupid.go); nil
	// until an entryGroupID entry is applied or a snapshot carrying one
	// is restored. Written on the apply goroutine, read anywhere.
	groupID atomic.Pointer[groupIdentity]
	// onGroupID, when set, is called (on the apply goroutine) with the
	// group id once it is applied, and with each restored.
	onGroupID func(id string)

	deliver DeliverFunc // never nil

	// Buffers reused from one apply to the next; only the apply goroutine
	// touches them.
	scratch  opsScratch
	spare    []shards.Result
	spareRes []engine.Result
	// spareResp is ApplyBatch's answer to raft, reused (always nils).
	spareResp []interface{}
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
	_ raft.FSMSnapshot = (*fsmSnapshot)(nil)
)

// DeliverFunc receives the outcome of every applied entry, on the apply
// goroutine: id is the entry's id as its submitter set it (the raft log's
// Extensions; see entryID), res one Result per
// operation in entry order (nil for an entry that is not a batch of
// operations), err the reason the entry was refused as a whole. res lives
// in buffers the FSM reuses for the next entry, so a hook that keeps it
// copies it. The result reports whether anyone on this node was waiting for
// the entry (on the leader, the callers that submitted it).
type DeliverFunc func(id []byte, res []shards.Result, err error) bool

// NewFSM returns a state machine applying to store and handing each
// entry's outcome to deliver (nil: outcomes are dropped, as on a replica
// nobody waits on). A nil logger discards.
func NewFSM(store *shards.Store, deliver DeliverFunc, log *slog.Logger) *FSM {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if deliver == nil {
		deliver = func([]byte, []shards.Result, error) bool { return false }
	}
	f := &FSM{store: store, log: log, deliver: deliver, members: map[string]string{}, cluster: cluster.NewState()}
	f.lastTime.Store(math.MinInt64)
	return f
}

// Apply applies one committed entry and hands its outcome to the deliver
// hook; the response to raft (ApplyFuture.Response) is always nil.
func (f *FSM) Apply(l *raft.Log) interface{} {
	r := f.apply(l)
	f.lastIndex.wake()
	return r
}

// ApplyBatch applies consecutive committed entries. The responses (all
// nil) are in a slice reused by the next call: raft reads them before it
// calls again, on the same goroutine.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := slices.Grow(f.spareResp[:0], len(logs))[:len(logs)]
	f.spareResp = out
	for i, l := range logs {
		out[i] = f.apply(l)
	}
	f.lastIndex.wake()
	return out
}

func (f *FSM) apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand {
		f.lastIndex.set(l.Index)
		return nil
	}
	if len(l.Data) >= entryHeader && l.Data[0] == codecVersion && l.Data[1] == entryCluster {
		f.applyCluster(l)
		return nil
	}
	e, err := decodeEntry(l.Data, &f.scratch)
	if err != nil {
		// Every replica decodes the same bytes and refuses them alike.
		f.log.Error("replication: refusing log entry", "index", l.Index, "err", err)
		f.applied(l, nil, err)
		return nil
	}
	// Time never runs backwards: an entry stamped before the last applied
	// instant applies at that instant. Deterministic, since every replica
	// sees the same sequence (and a snapshot carries the last time).
	now := max(e.now, f.lastTime.Load())
	f.lastTime.Store(now)
	switch e.typ {
	case entryOps:
		f.spare = slices.Grow(f.spare[:0], len(e.ops))[:len(e.ops)]
		f.spareRes = slices.Grow(f.spareRes[:0], len(e.ops))[:len(e.ops)]
		res, rb := f.spare, f.spareRes
		// One result per op fits without allocating (OpLimitAll grows its
		// own).
		sharded := f.sharded.Load()
		for i := range e.ops {
			res[i].Results = rb[i : i : i+1]
			if sharded {
				if err := slotCheck(&f.cluster, f.store, &e.ops[i], now); err != nil {
					res[i] = shards.Result{Err: err, Results: res[i].Results}
					continue
				}
			}
			f.store.Exec(&e.ops[i], now, &res[i])
			if notesOp(&e.ops[i]) {
				f.mu.Lock()
				noteOp(&f.cluster, f.store, &e.ops[i], &res[i])
				f.tombstones.Store(int64(len(f.cluster.Moved)))
				f.mu.Unlock()
			}
		}
		f.scratch.release()
		f.entries.Add(1)
		f.ops.Add(uint64(len(e.ops)))
		f.applied(l, res, nil)
		return nil
	case entrySetMember:
		f.mu.Lock()
		f.members[e.id] = e.addr
		f.mu.Unlock()
	case entryRemoveMember:
		f.mu.Lock()
		delete(f.members, e.id)
		f.mu.Unlock()
	case entryGroupID:
		f.applyGroupID(e.id, l.Index)
	case entrySetting:
		f.mu.Lock()
		if f.settings == nil {
			f.settings = map[string]string{}
		}
		f.settings[e.id] = e.addr
		f.mu.Unlock()
		if f.onSetting != nil {
			f.onSetting(e.id, e.addr)
		}
	}
	f.applied(l, nil, nil)
	return nil
}

// applied records l as applied, then hands its outcome to the writer: a
// writer that has its answer finds LastIndex at or past its entry.
func (f *FSM) applied(l *raft.Log, res []shards.Result, err error) {
	f.lastIndex.set(l.Index)
	f.deliver(l.Extensions, res, err)
}

// appliedCh returns a channel closed once the entry at index has been
// applied (already closed if it has).
func (f *FSM) appliedCh(index uint64) <-chan struct{} { return f.lastIndex.reach(index) }

// LastTime returns the stamped time of the last applied entry (Unix ns),
// math.MinInt64 before the first. It is the instant active expiry and local
// reads use on this replica.
func (f *FSM) LastTime() int64 { return f.lastTime.Load() }

// LastIndex returns the raft index of the last applied entry.
func (f *FSM) LastIndex() uint64 { return f.lastIndex.load() }

// Members returns a copy of the node id → RESP address map.
func (f *FSM) Members() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]string, len(f.members))
	for k, v := range f.members {
		m[k] = v
	}
	return m
}

func (f *FSM) member(id string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.members[id]
	return a, ok
}

// Settings returns a copy of the replicated settings applied (name →
// value).
func (f *FSM) Settings() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.settings)
}

// snapMeta is the metadata stored in each raft snapshot's header.
type snapMeta struct {
	Version int          `json:"v"`
	Time    int64        `json:"time"`  // last applied stamped time, Unix ns
	Index   uint64       `json:"index"` // raft index of the last applied entry
	Members []metaMember `json:"members"`
	Cluster *clusterMeta `json:"cluster,omitempty"`
	// Settings are the replicated settings (name → value), added after
	// version 1 without changing it: older nodes ignore the field.
	Settings map[string]string `json:"settings,omitempty"`
	// GroupID and GroupIDIndex are the group's id and the index of the
	// entry that recorded it (groupid.go), added like Settings.
	GroupID      string `json:"group_id,omitempty"`
	GroupIDIndex uint64 `json:"group_id_index,omitempty"`
}

type metaMember struct {
	ID   string `json:"id"`
	Resp string `json:"resp"`
}

const metaVersion = 1

// Snapshot captures the keyspace and metadata between two applies. It only
// copies (each shard under its own lock; readers keep going); encoding and
// I/O happen in Persist, concurrently with later applies.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	now := f.lastTime.Load()
	m := snapMeta{Version: metaVersion, Time: now, Index: f.lastIndex.load()}
	f.mu.Lock()
	for id, addr := range f.members {
		m.Members = append(m.Members, metaMember{ID: id, Resp: addr})
	}
	m.Settings = maps.Clone(f.settings)
	f.mu.Unlock()
	if g := f.groupID.Load(); g != nil {
		m.GroupID, m.GroupIDIndex = g.ID, g.Index
	}
	slices.SortFunc(m.Members, func(a, b metaMember) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	m.Cluster = f.snapshotCluster()
	meta, err := json.Marshal(&m)
	if err != nil {
		return nil, fmt.Errorf("replication: snapshot metadata: %w", err)
	}
	return &fsmSnapshot{cap: snapshot.CaptureStore(f.store, now), meta: meta}, nil
}

type fsmSnapshot struct {
	cap  *snapshot.Captured
	meta []byte
}

// Persist writes the capture in the snapshot/ format to sink.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriterSize(sink, 256<<10)
	_, err := s.cap.Write(w, s.meta)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("replication: persist snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("replication: close snapshot: %w", err)
	}
	return nil
}

// Release drops the capture.
func (s *fsmSnapshot) Release() { s.cap = nil }

// Restore replaces the state with a snapshot. The snapshot is verified in
// full before anything is installed, so a corrupt one leaves the FSM as it
// was.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	// math.MinInt64 keeps every record: expiry is decided by the stamped
	// times of later entries, never by this replica's clock.
	st, err := snapshot.Load(bufio.NewReaderSize(rc, 256<<10), f.store, math.MinInt64)
	if err != nil {
		return fmt.Errorf("replication: restore snapshot: %w", err)
	}
	var m snapMeta
	if err := json.Unmarshal(st.Header.Meta, &m); err != nil {
		return fmt.Errorf("replication: restore snapshot metadata: %w", err)
	}
	if m.Version != metaVersion {
		return fmt.Errorf("replication: restore snapshot: metadata version %d, want %d", m.Version, metaVersion)
	}
	members := make(map[string]string, len(m.Members))
	for _, mm := range m.Members {
		members[mm.ID] = mm.Resp
	}
	f.mu.Lock()
	f.members = members
	f.settings = m.Settings
	f.mu.Unlock()
	if f.onSetting != nil {
		for _, name := range slices.Sorted(maps.Keys(m.Settings)) {
			f.onSetting(name, m.Settings[name])
		}
	}
	if err := f.restoreCluster(m.Cluster); err != nil {
		return err
	}
	// A snapshot without an id was written before group ids (or by an
	// older node of a group in a rolling upgrade): the id this FSM
	// applied, if any, stays, since the first recorded id is final.
	if m.GroupID != "" {
		f.groupID.Store(&groupIdentity{ID: m.GroupID, Index: m.GroupIDIndex})
		if f.onGroupID != nil {
			f.onGroupID(m.GroupID)
		}
	}
	f.lastTime.Store(m.Time)
	f.lastIndex.advance(m.Index)
	return nil
}
