package replication

import (
	"context"
	"errors"
	"fmt"
	"github.com/cellserver/cellserver/cluster"
	"slices"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/shards"
)

// One Write call is one log entry, however many ops it has (MaxBatch
// bounds what the submit path packs together, never splits a caller's
// ops), through the leader and forwarded by a follower: what makes a
// MULTI/EXEC atomic across a failover.
func TestOneWriteOneEntry(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.MaxBatch = 4 })
	l := c.WaitForLeader(10 * time.Second)
	leader := c.nodes[l].node
	for i, tn := range c.nodes {
		const nops = 10 // beyond MaxBatch
		ops := make([]shards.Op, nops)
		for k := range ops {
			ops[k] = throttle(fmt.Sprintf("one%d-%d", i, k), 5, 1, 60, 1)
		}
		res := make([]shards.Result, nops)
		before := leader.raft.LastIndex()
		if err := tn.node.Write(context.Background(), ops, res); err != nil {
			t.Fatalf("write via %s: %v", tn.id, err)
		}
		if got := leader.raft.LastIndex() - before; got != 1 {
			t.Fatalf("write of %d ops via %s took %d log entries, want 1", nops, tn.id, got)
		}
		for k := range res {
			if res[k].Err != nil || len(res[k].Results) != 1 || res[k].Results[0].Remaining != 5 {
				t.Fatalf("via %s: op %d = %+v", tn.id, k, res[k])
			}
		}
	}
}

// ChangeSlots checks each change against the state the ones before leave,
// answers each refusal in its place, commits the others as one entry (none
// when all are refused), also through a follower.
func TestChangeSlots(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.WaitForLeader(10 * time.Second)
	leader := c.nodes[l].node
	ctx := context.Background()
	if err := leader.Slots().AddSlots(ctx, []int{0, 1, 2, 3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	follower := c.nodes[(l+1)%3].node
	for _, tc := range []struct {
		name    string
		changes []cluster.SlotChange
		want    []error // sentinel per change (nil: applied)
		entries uint64
	}{
		{"fix", []cluster.SlotChange{
			{Kind: cluster.SlotDel, Slots: []int{5}},
			{Kind: cluster.SlotDel, Slots: []int{5}}, // refused: the first made it unowned
			{Kind: cluster.SlotAdd, Slots: []int{5}},
			{Kind: cluster.SlotSet, Slot: 5, Action: cluster.SlotStable},
		}, []error{nil, cluster.ErrSlotUnassigned, nil, nil}, 1},
		{"all refused", []cluster.SlotChange{
			{Kind: cluster.SlotDel, Slots: []int{100}},
			{Kind: cluster.SlotSet, Slot: 100, Action: cluster.SlotMigrating, NodeID: "nosuch"},
		}, []error{cluster.ErrSlotUnassigned, cluster.ErrUnknownNode}, 0},
		{"add then refused add", []cluster.SlotChange{
			{Kind: cluster.SlotAdd, Slots: []int{6}},
			{Kind: cluster.SlotAdd, Slots: []int{6, 7}},
		}, []error{nil, cluster.ErrSlotBusy}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := leader.raft.LastIndex()
			errs, err := follower.Slots().ChangeSlots(ctx, tc.changes)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				if (tc.want[i] == nil) != (errs[i] == nil) || tc.want[i] != nil && !errors.Is(errs[i], tc.want[i]) {
					t.Fatalf("change %d: %v, want %v", i, errs[i], tc.want[i])
				}
			}
			if got := leader.raft.LastIndex() - before; got != tc.entries {
				t.Fatalf("%d log entries, want %d", got, tc.entries)
			}
		})
	}
	c.waitConverged(10 * time.Second)
	for _, tn := range c.nodes {
		st := tn.node.fsm.clusterState()
		if !st.Owns(5) || !st.Owns(6) || st.Owns(7) || st.OwnedCount() != 7 {
			t.Fatalf("%s: owns 5 %v, 6 %v, 7 %v, %d slots; want 0-6", tn.id, st.Owns(5), st.Owns(6), st.Owns(7), st.OwnedCount())
		}
	}
}

// While another group's view is stale, ADDSLOTS is refused (its slots are
// unknown), but a list that frees a slot of this group and takes it back
// (DELSLOTS then ADDSLOTS, as redis-cli --cluster fix sends them) applies
// whole: refusing the ADDSLOTS would leave the slot without an owner.
func TestChangeSlotsRetakeWhileStale(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.WaitForLeader(10 * time.Second)
	leader := c.nodes[l].node
	ctx := context.Background()
	if err := leader.Slots().AddSlots(ctx, []int{5}); err != nil {
		t.Fatal(err)
	}
	// A group that never answers.
	if err := leader.clusterSlots.changeCluster(ctx, &clusterChange{Action: actMeet, Group: "silent", Seeds: peerSeeds{Raft: []string{"127.0.0.1:1"}}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if !slices.ContainsFunc(leader.Routing().Groups, func(g cluster.GroupView) bool { return g.Name == "silent" }) {
			return errors.New("the silent group is not in the routing table yet")
		}
		return nil
	})
	if err := leader.Slots().AddSlots(ctx, []int{6}); !errors.Is(err, cluster.ErrGroupUnknown) {
		t.Fatalf("ADDSLOTS 6 with a silent group known: %v, want cluster.ErrGroupUnknown", err)
	}
	errs, err := leader.Slots().ChangeSlots(ctx, []cluster.SlotChange{
		{Kind: cluster.SlotDel, Slots: []int{5}},
		{Kind: cluster.SlotAdd, Slots: []int{5}},
		{Kind: cluster.SlotAdd, Slots: []int{6}},
	})
	if err != nil || errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], cluster.ErrGroupUnknown) {
		t.Fatalf("ChangeSlots = %v, %v; want DELSLOTS 5 and ADDSLOTS 5 applied, ADDSLOTS 6 refused", errs, err)
	}
	if st := leader.fsm.clusterState(); !st.Owns(5) || st.Owns(6) {
		t.Fatalf("owns 5 %v, 6 %v; want 5 only", st.Owns(5), st.Owns(6))
	}
}
