package cluster

import (
	"errors"
	"reflect"
	"testing"
)

// TestCheckChange pins the slot-change refusals: each change checked
// against group a's state (owns 0-99, imports 200 from b; keys of slot 5
// are here) and a routing table where b owns 200-299 and c's view may be
// stale.
func TestCheckChange(t *testing.T) {
	st := NewState()
	st.Apply(&Change{Action: AddSlots, Ranges: [][2]int{{0, 99}}}, "a")
	st.Apply(&Change{Action: Importing, Slot: 200, Group: "b"}, "a")
	groups := func(cFresh bool) []GroupView {
		return []GroupView{
			{Name: "a", Slots: [][2]int{{0, 99}}, Reachable: true, Members: []GroupMember{{ID: "a1", ClusterID: "ida", Leader: true}}},
			{Name: "b", Slots: [][2]int{{200, 299}}, Reachable: true, Members: []GroupMember{{ID: "b1", ClusterID: "idb", Leader: true}}},
			{Name: "c", Reachable: cFresh, Members: []GroupMember{{ID: "c1", ClusterID: "idc", Leader: true}}},
		}
	}
	fresh, stale := NewRouting(0, "a1", groups(true)), NewRouting(0, "a1", groups(false))
	hasKeys := func(slot int) bool { return slot == 5 }
	slotErr := func(slot int, err error) error { return &SlotError{Slot: slot, Err: err} }
	cases := []struct {
		name string
		rt   *Routing
		sc   SlotChange
		want error // a *SlotError compared by value, or a sentinel by errors.Is
	}{
		{"ADDSLOTS free", fresh, SlotChange{Kind: SlotAdd, Slots: []int{100, 101}}, nil},
		{"ADDSLOTS own slot", fresh, SlotChange{Kind: SlotAdd, Slots: []int{100, 7}}, slotErr(7, ErrSlotBusy)},
		{"ADDSLOTS another group's", fresh, SlotChange{Kind: SlotAdd, Slots: []int{250}}, slotErr(250, ErrSlotBusy)},
		{"ADDSLOTS while a group is stale", stale, SlotChange{Kind: SlotAdd, Slots: []int{100}}, ErrGroupUnknown},
		{"ADDSLOTS out of range", fresh, SlotChange{Kind: SlotAdd, Slots: []int{16384}}, errAny},
		{"DELSLOTS own", fresh, SlotChange{Kind: SlotDel, Slots: []int{3}}, nil},
		{"DELSLOTS another group's", fresh, SlotChange{Kind: SlotDel, Slots: []int{250}}, ErrNoChange},
		{"DELSLOTS unassigned", fresh, SlotChange{Kind: SlotDel, Slots: []int{3, 500}}, slotErr(500, ErrSlotUnassigned)},
		{"MIGRATING own", fresh, SlotChange{Kind: SlotSet, Slot: 3, Action: SlotMigrating, NodeID: "idb"}, nil},
		{"MIGRATING not owned", fresh, SlotChange{Kind: SlotSet, Slot: 250, Action: SlotMigrating, NodeID: "idb"}, slotErr(250, ErrSlotNotOwned)},
		{"MIGRATING to itself", fresh, SlotChange{Kind: SlotSet, Slot: 3, Action: SlotMigrating, NodeID: "ida"}, slotErr(3, ErrSlotOwned)},
		{"MIGRATING to an unknown node", fresh, SlotChange{Kind: SlotSet, Slot: 3, Action: SlotMigrating, NodeID: "nope"}, ErrUnknownNode},
		{"IMPORTING owned", fresh, SlotChange{Kind: SlotSet, Slot: 3, Action: SlotImporting, NodeID: "idb"}, slotErr(3, ErrSlotOwned)},
		{"IMPORTING", fresh, SlotChange{Kind: SlotSet, Slot: 250, Action: SlotImporting, NodeID: "idb"}, nil},
		{"NODE itself, imported", fresh, SlotChange{Kind: SlotSet, Slot: 200, Action: SlotNode, NodeID: "ida"}, nil},
		{"NODE itself, another's, not imported", fresh, SlotChange{Kind: SlotSet, Slot: 250, Action: SlotNode, NodeID: "ida"}, slotErr(250, ErrSlotBusy)},
		{"NODE itself, free", fresh, SlotChange{Kind: SlotSet, Slot: 500, Action: SlotNode, NodeID: "ida"}, nil},
		{"NODE itself, free, a group stale", stale, SlotChange{Kind: SlotSet, Slot: 500, Action: SlotNode, NodeID: "ida"}, ErrGroupUnknown},
		{"NODE another, keys here", fresh, SlotChange{Kind: SlotSet, Slot: 5, Action: SlotNode, NodeID: "idb"}, slotErr(5, ErrSlotHasKeys)},
		{"NODE another, no keys here", fresh, SlotChange{Kind: SlotSet, Slot: 6, Action: SlotNode, NodeID: "idb"}, nil},
		{"STABLE", fresh, SlotChange{Kind: SlotSet, Slot: 6, Action: SlotStable}, nil},
	}
	for _, tc := range cases {
		s := st.Clone()
		c, err := tc.sc.Change(tc.rt, "a")
		if err == nil {
			err = CheckChange(&s, tc.rt, "a", c, hasKeys)
		}
		var se *SlotError
		switch {
		case tc.want == errAny:
			if err == nil {
				t.Errorf("%s: nil, want an error", tc.name)
			}
		case errors.As(tc.want, &se):
			if !reflect.DeepEqual(err, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			}
		case tc.want == nil && err != nil, tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// errAny stands for any error in a table.
var errAny = errors.New("any error")

// TestCheckList: a transaction's changes are checked in order against the
// state the ones before leave; redis-cli --cluster fix's DELSLOTS then
// ADDSLOTS of a slot this group owned retakes it even while another
// group's view is stale; a refused change is left out, the others kept.
func TestCheckList(t *testing.T) {
	st := NewState()
	st.Apply(&Change{Action: AddSlots, Ranges: [][2]int{{0, 99}}}, "a")
	rt := NewRouting(0, "a1", []GroupView{
		{Name: "a", Slots: [][2]int{{0, 99}}, Reachable: true},
		{Name: "b"}, // never answered: its slots are unknown
	})
	list := []Change{
		{Action: DelSlots, Ranges: [][2]int{{50, 50}}},
		{Action: AddSlots, Ranges: [][2]int{{50, 50}}},
		{Action: Stable, Slot: 50},
		{Action: AddSlots, Ranges: [][2]int{{150, 150}}}, // a new slot: refused, b may own it
		{Action: Migrating, Slot: 60, Group: "b"},
	}
	ok, errs := CheckList(&st, rt, "a", list, func(int) bool { return false })
	if len(ok) != 4 || ok[3].Action != Migrating {
		t.Errorf("changes kept: %+v, want all but the fourth", ok)
	}
	for i, err := range errs {
		if (i == 3) != (err != nil) || i == 3 && !errors.Is(err, ErrGroupUnknown) {
			t.Errorf("change %d: %v", i, err)
		}
	}
	if !st.Owns(50) || st.Owns(150) || !st.SlotMigrating(60) {
		t.Errorf("state after the list: owns 50 %v, owns 150 %v, 60 migrating %v", st.Owns(50), st.Owns(150), st.SlotMigrating(60))
	}
}
