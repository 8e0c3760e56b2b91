package cluster

import (
	"reflect"
	"testing"
)

// TestViews: the CLUSTER views' data from one routing table. Group a
// (this node a2, a follower) has a leader and migrates slot 5 to b; b has
// members but no known leader; c answered but long ago.
func TestViews(t *testing.T) {
	r := NewRouting(0, "a2", []GroupView{
		{Name: "a", Term: 3, Slots: [][2]int{{0, 99}}, Migrating: map[int]string{5: "b"}, Reachable: true, Members: []GroupMember{
			{ID: "a1", ClusterID: "ida1", RespAddr: "10.0.0.1:7001", RaftAddr: "10.0.0.1:8001", Leader: true},
			{ID: "a2", ClusterID: "ida2", RespAddr: "10.0.0.2:7002", RaftAddr: "10.0.0.2:8002"}}},
		{Name: "b", Term: 7, Slots: [][2]int{{100, 199}}, Reachable: true, Importing: map[int]string{5: "a"},
			Members: []GroupMember{{ID: "b1", ClusterID: "idb1", RespAddr: "h:7003"}, {ID: "b2", ClusterID: "idb2", RespAddr: "bad"}}},
		{Name: "c", Term: 2, Slots: [][2]int{{200, 16383}}, Members: []GroupMember{{ID: "c1", ClusterID: "idc1", RespAddr: "h:7005", Leader: true}}},
	})
	sh := r.Shards()
	wantA := Shard{Name: "a", Epoch: 3, Slots: [][2]int{{0, 99}}, Migrating: []SlotMark{{5, "idb1"}}, Leader: true, Linked: true, Healthy: true,
		Nodes: []ViewNode{{ID: "ida1", Host: "10.0.0.1", Port: 7001, Bus: 8001, Master: true},
			{ID: "ida2", Host: "10.0.0.2", Port: 7002, Bus: 8002, Myself: true, MasterID: "ida1"}}}
	if !reflect.DeepEqual(sh[0], wantA) {
		t.Errorf("shard a = %+v\nwant %+v", sh[0], wantA)
	}
	// No leader: no slots, every member a master; a bad address has port 0.
	if b := sh[1]; b.Slots != nil || b.Leader || b.Healthy || !b.Linked || !b.Nodes[0].Master || !b.Nodes[1].Master ||
		b.Nodes[1].Port != 0 || !reflect.DeepEqual(b.Importing, []SlotMark{{5, "ida1"}}) {
		t.Errorf("shard b = %+v", b)
	}
	if c := sh[2]; c.Linked || c.Healthy || !c.Leader || len(c.Slots) != 1 {
		t.Errorf("shard c (stale) = %+v", c)
	}
	if got, want := r.SlotRanges(), []SlotRange{{0, 99, 0}, {200, 16383, 2}}; !reflect.DeepEqual(got, want) {
		t.Errorf("SlotRanges = %v, want %v (b has no leader)", got, want)
	}
	want := Summary{Assigned: 16384, OK: 100, KnownNodes: 5, Size: 3, CurrentEpoch: 7, MyEpoch: 3}
	if got := r.Summary(); got != want {
		t.Errorf("Summary = %+v, want %+v", got, want)
	}
	if r.MyID() != NodeID("a", "a2") {
		t.Errorf("MyID = %s", r.MyID())
	}
}
