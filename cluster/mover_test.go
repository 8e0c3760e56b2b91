package cluster

import "testing"

// TestMayTakeSlot: which groups the routing model rules out as holders of
// a slot's key (CLUSTER ABORTMOVE's question). Group a (Self) owns 0-99;
// b owns 100-199 and imports 7 from a; c owns 200-16383; d owns nothing;
// e owns nothing and its view is stale; f has no member.
func TestMayTakeSlot(t *testing.T) {
	m := func(id string) []GroupMember {
		return []GroupMember{{ID: id, ClusterID: "id" + id, RespAddr: "h:" + id}}
	}
	r := NewRouting(0, "a1", []GroupView{
		{Name: "a", Slots: [][2]int{{0, 99}}, Reachable: true, Members: m("1"), Migrating: map[int]string{7: "b"}},
		{Name: "b", Slots: [][2]int{{100, 199}}, Reachable: true, Members: m("2"), Importing: map[int]string{7: "a"}},
		{Name: "c", Slots: [][2]int{{200, 16383}}, Reachable: true, Members: m("3")},
		{Name: "d", Reachable: true, Members: m("4")},
		{Name: "e", Members: m("5")},
		{Name: "f", Reachable: true},
	})
	tests := []struct {
		g, slot int
		want    bool
	}{
		{1, 150, true},   // b owns it
		{1, 7, true},     // b imports it
		{3, 7, true},     // d owns nothing, but slot 7 is importing somewhere
		{3, 8, false},    // d neither owns nor imports, and nobody imports 8
		{2, 8, false},    // c owns other slots
		{2, 300, true},   // c owns 300
		{4, 8, true},     // e's view is stale
		{5, 8, true},     // f has no member to ask
		{9, 8, true},     // unknown group
		{3, -1, true},    // slot out of range
		{3, 16384, true}, // slot out of range
	}
	for _, tc := range tests {
		if got := r.MayTakeSlot(tc.g, tc.slot); got != tc.want {
			t.Errorf("MayTakeSlot(%s, %d) = %v, want %v", name(r, tc.g), tc.slot, got, tc.want)
		}
	}
	// Self importing a slot from another group: any group may hold it.
	r2 := NewRouting(0, "a1", []GroupView{
		{Name: "a", Reachable: true, Members: m("1"), Importing: map[int]string{9: "b"}},
		{Name: "b", Reachable: true, Members: m("2")},
	})
	if !r2.MayTakeSlot(1, 9) {
		t.Errorf("MayTakeSlot(b, 9) = false while a imports 9, want true")
	}
}

func name(r *Routing, g int) string {
	if g >= 0 && g < len(r.Groups) {
		return r.Groups[g].Name
	}
	return "?"
}
