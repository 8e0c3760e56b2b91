package cluster

import (
	"errors"
	"fmt"
	"testing"
)

// TestRefusal: the slot rule's verdicts and the state machine's refusals
// become the client's answer: MOVED and ASK naming the slot's group's
// first member, TRYAGAIN for an ASK to a group without members or a slot
// this table still shows owned here, CLUSTERDOWN (not served, or not known
// yet while a group has not answered) for a slot nobody serves.
func TestRefusal(t *testing.T) {
	// Group c has no member until it answers (withC).
	groups := func(withC bool) []GroupView {
		g := []GroupView{
			{Name: "a", Slots: [][2]int{{0, 99}}, Migrating: map[int]string{50: "b", 60: "c"}, Reachable: true,
				Members: []GroupMember{{ID: "a1", RespAddr: "h:1", Leader: true}}},
			{Name: "b", Slots: [][2]int{{100, 199}}, Reachable: true, Members: []GroupMember{{ID: "b1", RespAddr: "h:2", Leader: true}}},
			{Name: "c", Slots: [][2]int{{200, 299}}, Reachable: true},
		}
		if withC {
			g[2].Members = []GroupMember{{ID: "c1", RespAddr: "h:3", Leader: true}}
		}
		return g
	}
	rt := NewRouting(0, "a1", groups(false))
	all := NewRouting(0, "a1", groups(true))
	cases := []struct {
		name string
		got  error
		want error
	}{
		{"served", rt.Refusal(Verdict{Kind: Serve}), nil},
		{"moved", rt.Refusal(Verdict{Kind: Moved, Slot: 150}), &RedirectError{Slot: 150, Addr: "h:2"}},
		{"owner not heard from", rt.Refusal(Verdict{Kind: Moved, Slot: 250}), ErrSlotNotKnown},
		{"unassigned, a group not heard from", rt.Refusal(Verdict{Kind: Unassigned, Slot: 9000}), ErrSlotNotKnown},
		{"unassigned", all.Refusal(Verdict{Kind: Unassigned, Slot: 9000}), ErrSlotNotServed},
		{"moved to c", all.Refusal(Verdict{Kind: Moved, Slot: 250}), &RedirectError{Slot: 250, Addr: "h:3"}},
		{"ask", rt.Refusal(Verdict{Kind: Ask, Slot: 50}), &RedirectError{Ask: true, Slot: 50, Addr: "h:2"}},
		{"ask, target without members", rt.Refusal(Verdict{Kind: Ask, Slot: 60}), ErrTryAgain},
		{"crossslot", rt.Refusal(Verdict{Kind: CrossSlot}), ErrCrossSlot},
		{"op moved", rt.OpRefusal(ErrMoved, [][]byte{keyOf(t, 10, "x"), keyOf(t, 150, "y")}), &RedirectError{Slot: 150, Addr: "h:2"}},
		{"op moved, owned here", rt.OpRefusal(ErrMoved, [][]byte{keyOf(t, 10, "x")}), ErrTryAgain},
		{"op ask", rt.OpRefusal(ErrAsk, [][]byte{keyOf(t, 10, "x"), keyOf(t, 50, "y")}), &RedirectError{Ask: true, Slot: 50, Addr: "h:2"}},
		{"op other error", rt.OpRefusal(ErrCrossSlot, [][]byte{keyOf(t, 10, "x")}), ErrCrossSlot},
		{"op without routing", (*Routing)(nil).OpRefusal(ErrMoved, [][]byte{keyOf(t, 10, "x")}), ErrSlotNotServed},
	}
	for _, tc := range cases {
		if fmt.Sprintf("%#v", tc.got) != fmt.Sprintf("%#v", tc.want) && !errors.Is(tc.got, tc.want) {
			t.Errorf("%s: got %#v, want %#v", tc.name, tc.got, tc.want)
		}
	}
}
