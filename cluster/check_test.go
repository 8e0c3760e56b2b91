package cluster

import (
	"fmt"
	"testing"

	"github.com/cellserver/cellserver/internal/hashslot"
)

// keyOf returns a key of slot (a hash tag found by search), named after
// name so that keys of one slot differ.
func keyOf(t *testing.T, slot int, name string) []byte {
	t.Helper()
	for i := 0; i < 1<<20; i++ {
		tag := fmt.Sprintf("{%d}", i)
		if hashslot.Of([]byte(tag)) == slot {
			return []byte(tag + name)
		}
	}
	t.Fatalf("no key of slot %d", slot)
	return nil
}

// keyset is Keys over sets.
type keyset struct{ here, inFlight, moved map[string]bool }

func (k keyset) Here(key []byte) bool     { return k.here[string(key)] }
func (k keyset) InFlight(key []byte) bool { return k.inFlight[string(key)] }
func (k keyset) Moved(key []byte) bool    { return k.moved[string(key)] }

// TestCheck pins the slot rule: one table, each case decided by the
// group's replicated State in Apply mode (the state machine) and by the
// node's Routing in the wire modes, built from the same changes.
func TestCheck(t *testing.T) {
	// Group a (this one) owns 0-199, migrates 50 to b, imports 200 from
	// b; b owns 200-8191 (200 until the import ends); 8192-16383 are
	// nobody's.
	st := NewState()
	for _, c := range []Change{
		{Action: AddSlots, Ranges: [][2]int{{0, 199}}},
		{Action: Meet, Group: "b", Seeds: Seeds{Raft: []string{"h:1"}}},
		{Action: Migrating, Slot: 50, Group: "b"},
		{Action: Importing, Slot: 200, Group: "b"},
	} {
		st.Apply(&c, "a")
	}
	rt := NewRouting(0, "a1", []GroupView{
		{Name: "a", Slots: st.Ranges(), Migrating: st.Migrating, Importing: st.Importing, Reachable: true,
			Members: []GroupMember{{ID: "a1", RespAddr: "h:1", Leader: true}}},
		{Name: "b", Slots: [][2]int{{200, 8191}}, Reachable: true, Members: []GroupMember{{ID: "b1", RespAddr: "h:2", Leader: true}}},
	})
	owned, owned2 := keyOf(t, 10, "o"), keyOf(t, 11, "o")
	here, here2, away, moving := keyOf(t, 50, "h"), keyOf(t, 50, "h2"), keyOf(t, 50, "a"), keyOf(t, 50, "m")
	tombMig, tombStable := keyOf(t, 50, "t"), keyOf(t, 12, "t")
	stableMoving := keyOf(t, 13, "m")
	imported, theirs, free := keyOf(t, 200, "i"), keyOf(t, 300, "f"), keyOf(t, 9000, "n")
	ks := keyset{
		here:     map[string]bool{string(owned): true, string(here): true, string(here2): true, string(imported): true},
		inFlight: map[string]bool{string(moving): true, string(stableMoving): true},
		moved:    map[string]bool{string(tombMig): true, string(tombStable): true},
	}
	keys := func(k ...[]byte) [][]byte { return k }
	type want struct {
		kind Kind
		slot int
	}
	cases := []struct {
		name string
		q    Query
		want want
	}{
		// Apply: the state machine, from the replicated state.
		{"owner", Query{Keys: keys(owned)}, want{Serve, -1}},
		{"owner, fresh key", Query{Keys: keys(owned2)}, want{Serve, -1}},
		{"no keys", Query{}, want{Serve, -1}},
		{"importing after ASKING", Query{Keys: keys(imported), Asking: true}, want{ServeAsking, -1}},
		{"importing without ASKING", Query{Keys: keys(imported)}, want{Moved, 200}},
		{"another group's slot", Query{Keys: keys(theirs)}, want{Moved, 300}},
		{"another group's slot after ASKING", Query{Keys: keys(theirs), Asking: true}, want{Moved, 300}},
		{"unassigned slot (a group knows only its own)", Query{Keys: keys(free)}, want{Moved, 9000}},
		{"migrating, key here", Query{Keys: keys(here)}, want{Serve, -1}},
		{"migrating, key away", Query{Keys: keys(away)}, want{Ask, 50}},
		{"migrating, key in flight", Query{Keys: keys(moving)}, want{InFlight, 50}},
		{"migrating, keys here and in flight", Query{Keys: keys(here, moving)}, want{InFlight, 50}},
		{"migrating, keys here and away", Query{Keys: keys(here, away)}, want{TryAgain, 50}},
		{"migrating, keys in flight and away", Query{Keys: keys(moving, away)}, want{TryAgain, 50}},
		{"migrating, keys all here", Query{Keys: keys(here, here2)}, want{Serve, -1}},
		{"migrating, tombstone", Query{Keys: keys(tombMig)}, want{Ask, 50}},
		{"stable, tombstone", Query{Keys: keys(tombStable)}, want{TryAgain, 12}},
		{"stable, tombstone among keys here", Query{Keys: keys(owned, tombStable)}, want{TryAgain, 12}},
		{"stable, tombstone restored", Query{Keys: keys(tombStable), Restore: true}, want{Serve, -1}},
		{"stable, key in flight", Query{Keys: keys(stableMoving)}, want{InFlight, 13}},
		{"cross-slot, all owned", Query{Keys: keys(owned, owned2)}, want{Serve, -1}},
		{"cross-slot, owned and imported after ASKING", Query{Keys: keys(owned, imported), Asking: true}, want{ServeAsking, -1}},
		{"cross-slot, owned and another's", Query{Keys: keys(owned, theirs)}, want{Moved, 300}},
		{"cross-slot, away keys of a migrating slot", Query{Keys: keys(owned, away)}, want{TryAgain, 50}},

		// Read: the wire, before a read from this node's keyspace.
		{"read: owner", Query{Mode: Read, Keys: keys(owned)}, want{Serve, -1}},
		{"read: importing after ASKING", Query{Mode: Read, Keys: keys(imported), Asking: true}, want{ServeAsking, -1}},
		{"read: importing without ASKING", Query{Mode: Read, Keys: keys(imported)}, want{Moved, 200}},
		{"read: another group's slot after ASKING", Query{Mode: Read, Keys: keys(theirs), Asking: true}, want{Moved, 300}},
		{"read: unassigned", Query{Mode: Read, Keys: keys(free)}, want{Unassigned, 9000}},
		{"read: migrating, key here", Query{Mode: Read, Keys: keys(here)}, want{Serve, -1}},
		{"read: migrating, key away", Query{Mode: Read, Keys: keys(away)}, want{Ask, 50}},
		{"read: migrating, key in flight", Query{Mode: Read, Keys: keys(moving)}, want{InFlight, 50}},
		{"read: migrating, keys here and away", Query{Mode: Read, Keys: keys(here, away)}, want{TryAgain, 50}},
		{"read: stable, tombstone", Query{Mode: Read, Keys: keys(tombStable)}, want{TryAgain, 12}},
		{"read: stable, key in flight", Query{Mode: Read, Keys: keys(stableMoving)}, want{InFlight, 13}},
		{"read: cross-slot, all owned", Query{Mode: Read, Keys: keys(owned, owned2)}, want{Serve, -1}},
		{"read: cross-slot, owned and another's", Query{Mode: Read, Keys: keys(owned, theirs)}, want{CrossSlot, -1}},
		{"read: cross-slot, owned and imported after ASKING", Query{Mode: Read, Keys: keys(owned, imported), Asking: true}, want{CrossSlot, -1}},
		{"read: one slot required", Query{Mode: Read, Keys: keys(owned, owned2), OneSlot: true}, want{CrossSlot, -1}},
		{"read: open slot, key away", Query{Mode: Read, Keys: keys(away), Open: true}, want{Serve, -1}},
		{"read: open, importing", Query{Mode: Read, Keys: keys(imported), Open: true}, want{Serve, -1}},

		// Route: the wire, before a write goes to the group's log.
		{"route: owner", Query{Mode: Route, Keys: keys(owned)}, want{Serve, -1}},
		{"route: migrating, key away (the log decides)", Query{Mode: Route, Keys: keys(away)}, want{Serve, -1}},
		{"route: stable, tombstone (the log decides)", Query{Mode: Route, Keys: keys(tombStable)}, want{Serve, -1}},
		{"route: another group's slot", Query{Mode: Route, Keys: keys(theirs)}, want{Moved, 300}},
		{"route: unassigned", Query{Mode: Route, Keys: keys(free)}, want{Unassigned, 9000}},
		{"route: importing without ASKING", Query{Mode: Route, Keys: keys(imported)}, want{Moved, 200}},
		{"route: importing after ASKING", Query{Mode: Route, Keys: keys(imported), Asking: true}, want{ServeAsking, -1}},
		{"route: not known imported, after ASKING (the log decides)", Query{Mode: Route, Keys: keys(theirs), Asking: true}, want{ServeAsking, -1}},
		{"route: open, not imported, after ASKING", Query{Mode: Route, Keys: keys(theirs), Asking: true, Open: true}, want{Moved, 300}},
		{"route: cross-slot, owned and another's", Query{Mode: Route, Keys: keys(owned, theirs)}, want{CrossSlot, -1}},
		{"route: cross-slot, all owned", Query{Mode: Route, Keys: keys(owned, owned2)}, want{Serve, -1}},

		// Queue: a transaction's command, queued.
		{"queue: migrating, key away (decided at EXEC)", Query{Mode: Queue, Keys: keys(away), OneSlot: true}, want{Serve, -1}},
		{"queue: not imported, after ASKING", Query{Mode: Queue, Keys: keys(theirs), Asking: true, OneSlot: true}, want{Moved, 300}},
		{"queue: importing after ASKING", Query{Mode: Queue, Keys: keys(imported), Asking: true, OneSlot: true}, want{ServeAsking, -1}},
		{"queue: cross-slot, all owned", Query{Mode: Queue, Keys: keys(owned, owned2), OneSlot: true}, want{CrossSlot, -1}},
	}
	// Where the state machine and the wire's read check both decide, from
	// the same state, they decide alike.
	for _, q := range []Query{
		{Keys: keys(owned)}, {Keys: keys(here)}, {Keys: keys(away)}, {Keys: keys(moving)}, {Keys: keys(here, away)},
		{Keys: keys(moving, away)}, {Keys: keys(tombMig)}, {Keys: keys(tombStable)}, {Keys: keys(stableMoving)},
		{Keys: keys(owned, tombStable)}, {Keys: keys(owned, owned2)}, {Keys: keys(owned, away)}, {Keys: keys(theirs)},
		{Keys: keys(imported)}, {Keys: keys(imported), Asking: true}, {Keys: keys(tombStable), Restore: true},
	} {
		apply := Check(&st, ks, &q)
		q.Mode = Read
		if read := Check(rt, ks, &q); read != apply {
			t.Errorf("keys %q: state machine %+v, wire read %+v", q.Keys, apply, read)
		}
	}
	for _, tc := range cases {
		var tb Table = &st
		if tc.q.Mode != Apply {
			tb = rt
		}
		got := Check(tb, ks, &tc.q)
		if got.Kind != tc.want.kind || got.Slot != tc.want.slot {
			t.Errorf("%s: Check = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestVerdictErr: each verdict's sentinel, none for a key served (or in
// flight, which the keyspace refuses itself).
func TestVerdictErr(t *testing.T) {
	for k, want := range map[Kind]error{Serve: nil, ServeAsking: nil, InFlight: nil, Moved: ErrMoved, Unassigned: ErrMoved,
		Ask: ErrAsk, TryAgain: ErrTryAgain, CrossSlot: ErrCrossSlot} {
		if got := (Verdict{Kind: k}).Err(); got != want {
			t.Errorf("Verdict{%d}.Err() = %v, want %v", k, got, want)
		}
	}
}

// TestCheckAllocs: the slot rule runs on every keyed command, on the wire
// and in the state machine, and allocates nothing.
func TestCheckAllocs(t *testing.T) {
	st := NewState()
	st.Apply(&Change{Action: AddSlots, Ranges: [][2]int{{0, 100}}}, "a")
	st.Apply(&Change{Action: Migrating, Slot: 50, Group: "b"}, "a")
	var ks Keys = keyset{here: map[string]bool{}, inFlight: map[string]bool{}, moved: map[string]bool{}}
	var tb Table = &st
	q := Query{Keys: [][]byte{keyOf(t, 50, "x"), keyOf(t, 50, "y")}}
	if n := testing.AllocsPerRun(100, func() { Check(tb, ks, &q) }); n != 0 {
		t.Errorf("Check allocates %v times per call", n)
	}
}
