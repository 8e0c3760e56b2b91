package cluster

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cellserver/cellserver/engine"
)

// TestMemberHealthViews: CLUSTER NODES' flags and link state and CLUSTER
// SHARDS' health for each verdict, in Redis's words.
func TestMemberHealthViews(t *testing.T) {
	tests := []struct {
		name       string
		healthy    bool // the shard has a leader and answers
		health     Health
		flag, link string // CLUSTER NODES
		shard      string // CLUSTER SHARDS
	}{
		{"no verdict", true, HealthUnknown, "", "connected", "online"},
		{"online", true, HealthOnline, "", "connected", "online"},
		{"catching up", true, HealthLoading, "", "connected", "loading"},
		{"suspected", true, HealthSuspect, ",fail?", "disconnected", "failed"},
		{"failed", true, HealthFailed, ",fail", "disconnected", "failed"},
		{"online in a group without a leader", false, HealthOnline, "", "connected", "failed"},
	}
	for _, tc := range tests {
		n := ViewNode{ID: "id", Host: "127.0.0.1", Port: 7002, Bus: 17002, MasterID: "m", Health: tc.health}
		sh := Shard{Epoch: 4, Leader: true, Linked: true, Healthy: tc.healthy, Nodes: []ViewNode{{ID: "m", Master: true}, n}}
		want := "id 127.0.0.1:7002@17002 slave" + tc.flag + " m 0 0 4 " + tc.link + "\n"
		if got := string(sh.AppendNodeLine(nil, 1)); got != want {
			t.Errorf("%s: CLUSTER NODES line = %q, want %q", tc.name, got, want)
		}
		if got := sh.NodeHealth(1); got != tc.shard {
			t.Errorf("%s: CLUSTER SHARDS health = %q, want %q", tc.name, got, tc.shard)
		}
	}
}

// TestLeaderLineSlotMarks: the leader's CLUSTER NODES line carries its
// ranges, then its migrating and importing marks.
func TestLeaderLineSlotMarks(t *testing.T) {
	sh := Shard{Epoch: 2, Leader: true, Linked: true, Healthy: true,
		Slots:     [][2]int{{0, 99}, {200, 200}},
		Migrating: []SlotMark{{Slot: 5, NodeID: "b"}},
		Importing: []SlotMark{{Slot: 300, NodeID: "c"}},
		Nodes:     []ViewNode{{ID: "a", Host: "h", Port: 1, Bus: 2, Myself: true, Master: true, Health: HealthOnline}}}
	want := "a h:1@2 myself,master - 0 0 2 connected 0-99 200 [5->-b] [300-<-c]\n"
	if got := string(sh.AppendNodeLine(nil, 0)); got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
}

// TestSlotArgs: the slot arguments of ADDSLOTS, ADDSLOTSRANGE, SETSLOT and
// MEET, and their typed refusals.
func TestSlotArgs(t *testing.T) {
	args := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i := range s {
			out[i] = []byte(s[i])
		}
		return out
	}
	type parse func([][]byte) (any, error)
	list := func(a [][]byte) (any, error) { return ParseSlotList(a) }
	ranges := func(a [][]byte) (any, error) { return ParseSlotRanges(a) }
	setslot := func(a [][]byte) (any, error) { return ParseSetSlot(a) }
	meet := func(a [][]byte) (any, error) { return ParseMeet(a) }
	tests := []struct {
		name string
		p    parse
		args [][]byte
		want string // the result, fmt'd, when err is nil
		err  error  // matched by errors.Is, or by type below
		as   any
	}{
		{"list", list, args("1", "3"), "[1 3]", nil, nil},
		{"list not a slot", list, args("x"), "", ErrBadSlot, nil},
		{"list out of range", list, args("16384"), "", ErrBadSlot, nil},
		{"list repeat", list, args("1", "1"), "", nil, &SlotRepeatError{Slot: 1}},
		{"ranges", ranges, args("1", "3", "7", "7"), "[1 2 3 7]", nil, nil},
		{"ranges odd", ranges, args("1"), "", engine.ErrArity, nil},
		{"ranges reversed", ranges, args("5", "3"), "", nil, &SlotOrderError{First: 5, Last: 3}},
		{"ranges overlap", ranges, args("1", "3", "3", "4"), "", nil, &SlotRepeatError{Slot: 3}},
		{"setslot node", setslot, args("7", "NODE", "abc"), "{3 [] 7 3 abc}", nil, nil},
		{"setslot stable", setslot, args("7", "stable"), "{3 [] 7 4 }", nil, nil},
		{"setslot stable extra", setslot, args("7", "stable", "x"), "", ErrSetSlotSyntax, nil},
		{"setslot node missing id", setslot, args("7", "node"), "", ErrSetSlotSyntax, nil},
		{"setslot bad action", setslot, args("7", "move", "x"), "", ErrSetSlotSyntax, nil},
		{"setslot bad slot", setslot, args("-1", "stable"), "", ErrBadSlot, nil},
		{"meet", meet, args("::1", "7000"), "[::1]:7000", nil, nil},
		{"meet bad port", meet, args("h", "70000"), "", nil, &PortError{Value: "70000"}},
		{"meet bad bus", meet, args("h", "7000", "x"), "", nil, &PortError{Bus: true, Value: "x"}},
	}
	for _, tc := range tests {
		got, err := tc.p(tc.args)
		switch {
		case tc.err != nil:
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
			}
		case tc.as != nil:
			if fmt.Sprintf("%#v", err) != fmt.Sprintf("%#v", tc.as) {
				t.Errorf("%s: err = %#v, want %#v", tc.name, err, tc.as)
			}
		case err != nil:
			t.Errorf("%s: err = %v", tc.name, err)
		case fmt.Sprint(got) != tc.want:
			t.Errorf("%s: got %v, want %s", tc.name, got, tc.want)
		}
	}
}

// TestReplicasAndInfo: CLUSTER REPLICAS of a leader, of a follower and of
// an unknown id; CLUSTER INFO's fields.
func TestReplicasAndInfo(t *testing.T) {
	r := NewRouting(0, "a1", []GroupView{{Name: "a", Term: 3, Slots: [][2]int{{0, 16383}}, Reachable: true, Members: []GroupMember{
		{ID: "a1", ClusterID: "ida1", RespAddr: "h:7001", RaftAddr: "h:8001", Leader: true, Health: HealthOnline},
		{ID: "a2", ClusterID: "ida2", RespAddr: "h:7002", RaftAddr: "h:8002", Health: HealthSuspect}}}})
	lines, err := r.Replicas("ida1")
	if want := "[ida2 h:7002@8002 slave,fail? ida1 0 0 3 disconnected]"; err != nil || fmt.Sprintf("%s", lines) != want {
		t.Errorf("Replicas(leader) = %s, %v; want %s", lines, err, want)
	}
	if _, err := r.Replicas("ida2"); !errors.Is(err, ErrNotMaster) {
		t.Errorf("Replicas(follower) err = %v, want ErrNotMaster", err)
	}
	var unknown *NodeIDError
	if _, err := r.Replicas("zz"); !errors.As(err, &unknown) || unknown.ID != "zz" {
		t.Errorf("Replicas(unknown) err = %v, want a *NodeIDError naming zz", err)
	}
	if got := string(r.Nodes()); got != "ida1 h:7001@8001 myself,master - 0 0 3 connected 0-16383\n"+
		"ida2 h:7002@8002 slave,fail? ida1 0 0 3 disconnected\n" {
		t.Errorf("Nodes = %q", got)
	}
	f := r.Summary().InfoFields()
	if fmt.Sprint(f[:3]) != "[[cluster_state ok] [cluster_slots_assigned 16384] [cluster_slots_ok 16384]]" || len(f) != 12 {
		t.Errorf("InfoFields = %v", f)
	}
}
