package resp

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/replication"
)

// fakeCluster is a Cluster over groups the test sets, whose slot commands
// change them as a group's log would (the replication group itself is
// exercised end to end in test/). Safe for concurrent use.
type fakeCluster struct {
	mu     sync.Mutex
	self   int
	selfID string
	groups []cluster.GroupView
	owner  map[int]int // slot → group index
	r      *cluster.Routing
	met    []string // addresses CLUSTER MEET named
	// tombstones are the keys Tombstone reports.
	tombstones map[string]bool
	// lists records each ChangeSlots call's changes.
	lists [][]cluster.SlotChange
}

// newFakeCluster returns a fake whose groups are groups (sorted by name),
// this node being selfID of groups[self]; each group's Slots are taken as
// its owned slots.
func newFakeCluster(self int, selfID string, groups []cluster.GroupView) *fakeCluster {
	f := &fakeCluster{self: self, selfID: selfID, groups: groups, owner: map[int]int{}}
	for g := range groups {
		for _, rg := range groups[g].Slots {
			for s := rg[0]; s <= rg[1]; s++ {
				f.owner[s] = g
			}
		}
	}
	f.rebuild()
	return f
}

// rebuild publishes a new Routing from the groups and slot owners (fresh
// copies: a published Routing is immutable).
func (f *fakeCluster) rebuild() {
	gs := slices.Clone(f.groups)
	for g := range gs {
		gs[g].Slots = nil
		gs[g].Members = slices.Clone(gs[g].Members)
	}
	for s := range hashslot.Count {
		g, ok := f.owner[s]
		if !ok {
			continue
		}
		if n := len(gs[g].Slots); n > 0 && gs[g].Slots[n-1][1] == s-1 {
			gs[g].Slots[n-1][1] = s
		} else {
			gs[g].Slots = append(gs[g].Slots, [2]int{s, s})
		}
	}
	f.r = cluster.NewRouting(f.self, f.selfID, gs)
}

func (f *fakeCluster) Role() replication.Role  { return replication.Role{Leader: true} }
func (f *fakeCluster) InfoFields() [][2]string { return [][2]string{{"role", "master"}} }

func (f *fakeCluster) Routing() *cluster.Routing {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.r
}

func (f *fakeCluster) AddSlots(_ context.Context, slots []int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range slots {
		if _, ok := f.owner[s]; ok {
			return &cluster.SlotError{Slot: s, Err: cluster.ErrSlotBusy}
		}
	}
	for _, s := range slots {
		f.owner[s] = f.self
	}
	f.rebuild()
	return nil
}

func (f *fakeCluster) DelSlots(_ context.Context, slots []int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range slots {
		if g, ok := f.owner[s]; !ok || g != f.self {
			return &cluster.SlotError{Slot: s, Err: cluster.ErrSlotUnassigned}
		}
	}
	for _, s := range slots {
		delete(f.owner, s)
	}
	f.rebuild()
	return nil
}

func (f *fakeCluster) Meet(_ context.Context, addr string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.met = append(f.met, addr)
	return nil
}

func (f *fakeCluster) MoveDest([]byte) string { return "" }

func (f *fakeCluster) Tombstone(key []byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tombstones[string(key)]
}

// Failover answers as a replication group's leader does: the fake is
// always its group's leader.
func (f *fakeCluster) Failover(context.Context) error { return replication.ErrAlreadyLeader }

func (f *fakeCluster) SetSlot(_ context.Context, slot int, action cluster.SlotAction, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := -1
	if action != cluster.SlotStable {
		if g = f.r.NodeGroup(id); g < 0 {
			return cluster.ErrUnknownNode
		}
	}
	self := &f.groups[f.self]
	set := func(m *map[int]string) {
		if *m == nil {
			*m = map[int]string{}
		}
		(*m)[slot] = f.groups[g].Name
	}
	switch action {
	case cluster.SlotImporting:
		set(&self.Importing)
	case cluster.SlotMigrating:
		if f.owner[slot] != f.self {
			return &cluster.SlotError{Slot: slot, Err: cluster.ErrSlotNotOwned}
		}
		set(&self.Migrating)
	case cluster.SlotNode:
		f.owner[slot] = g
		delete(self.Importing, slot)
		delete(self.Migrating, slot)
	case cluster.SlotStable:
		delete(self.Importing, slot)
		delete(self.Migrating, slot)
	}
	f.rebuild()
	return nil
}

// ChangeSlots applies the changes in order as the single-change methods
// do (the group's one-entry version is tested in replication and test/),
// recording the call.
func (f *fakeCluster) ChangeSlots(ctx context.Context, changes []cluster.SlotChange) ([]error, error) {
	f.mu.Lock()
	f.lists = append(f.lists, slices.Clone(changes))
	f.mu.Unlock()
	errs := make([]error, len(changes))
	for i, c := range changes {
		switch c.Kind {
		case cluster.SlotAdd:
			errs[i] = f.AddSlots(ctx, c.Slots)
		case cluster.SlotDel:
			errs[i] = f.DelSlots(ctx, c.Slots)
		case cluster.SlotSet:
			errs[i] = f.SetSlot(ctx, c.Slot, c.Action, c.NodeID)
		}
	}
	return errs, nil
}

// member returns a GroupMember of group on loopback port port (raft port
// port+10000).
func member(group, id string, port int, leader bool) cluster.GroupMember {
	return cluster.GroupMember{
		ID: id, ClusterID: cluster.NodeID(group, id), Leader: leader,
		RespAddr: "127.0.0.1:" + strconv.Itoa(port), RaftAddr: "127.0.0.1:" + strconv.Itoa(port+10000),
	}
}

// keyOfSlot returns a key whose slot is slot.
func keyOfSlot(t *testing.T, slot int) string {
	t.Helper()
	for i := 0; i < 1_000_000; i++ {
		k := "k" + strconv.Itoa(i)
		if hashslot.Of([]byte(k)) == slot {
			return k
		}
	}
	t.Fatalf("no key of slot %d found", slot)
	return ""
}
