package replication

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/shards"
)

func TestClusterChangeRoundTrip(t *testing.T) {
	changes := []clusterChange{
		{Action: actAddSlots, Ranges: [][2]int{{0, 10}, {16383, 16383}}},
		{Action: actDelSlots, Ranges: [][2]int{{5, 5}}},
		{Action: actMigrating, Slot: 7, Group: "b"},
		{Action: actImporting, Slot: 16000, Group: "a"},
		{Action: actStable, Slot: 7},
		{Action: actOwn, Slot: 1},
		{Action: actDisown, Slot: 2},
		{Action: actMeet, Group: "b", Seeds: peerSeeds{Raft: []string{"h:1", "h:2"}, Resp: []string{"h:3"}}},
		{Action: actList, List: []clusterChange{
			{Action: actDelSlots, Ranges: [][2]int{{300, 300}}},
			{Action: actAddSlots, Ranges: [][2]int{{300, 300}}},
			{Action: actStable, Slot: 300},
		}},
		{Action: actTakeMove, Holder: "n1/7", Lease: int64(90 * time.Second)},
		{Action: actDropMove, Holder: "n1/7"},
	}
	for _, c := range changes {
		got, err := decodeClusterChange(encodeClusterChange(&c))
		if err != nil {
			t.Fatalf("action %d: %v", c.Action, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("action %d: got %+v, want %+v", c.Action, got, c)
		}
	}
	bad := map[string][]byte{
		"empty":          nil,
		"unknown action": {99},
		"slot too large": encodeClusterChange(&clusterChange{Action: actStable, Slot: 1})[:1],
		"range reversed": {byte(actAddSlots), 1, 9, 3},
		"trailing":       append(encodeClusterChange(&clusterChange{Action: actStable, Slot: 1}), 0),
		"out of range":   {byte(actStable), 0x80, 0x80, 0x01},
		"meet, no raft":  encodeClusterChange(&clusterChange{Action: actMeet, Group: "b"}),
		"bad group name": encodeClusterChange(&clusterChange{Action: actMigrating, Slot: 1, Group: "b c"}),
		"empty group":    encodeClusterChange(&clusterChange{Action: actImporting, Slot: 1}),
		"nested list": encodeClusterChange(&clusterChange{Action: actList, List: []clusterChange{
			{Action: actList, List: []clusterChange{{Action: actStable, Slot: 1}}}}}),
		"bad change in list": encodeClusterChange(&clusterChange{Action: actList, List: []clusterChange{{Action: 99}}}),
		"list too long":      {byte(actList), 5, 2, byte(actStable), 1},
		"lease, no holder":   encodeClusterChange(&clusterChange{Action: actTakeMove, Lease: 1}),
		"lease, no duration": encodeClusterChange(&clusterChange{Action: actTakeMove, Holder: "n1/1"}),
		"drop, no holder":    encodeClusterChange(&clusterChange{Action: actDropMove}),
		"lease in a list": encodeClusterChange(&clusterChange{Action: actList, List: []clusterChange{
			{Action: actTakeMove, Holder: "n1/1", Lease: 1}}}),
	}
	for name, b := range bad {
		if _, err := decodeClusterChange(b); !errors.Is(err, ErrBadPayload) {
			t.Errorf("%s: err %v, want ErrBadPayload", name, err)
		}
	}
}

func TestClusterStateApply(t *testing.T) {
	s := cluster.NewState()
	s.Apply(&clusterChange{Action: actAddSlots, Ranges: [][2]int{{0, 99}, {200, 200}}}, "a")
	s.Apply(&clusterChange{Action: actMigrating, Slot: 5, Group: "b"}, "a")
	s.Apply(&clusterChange{Action: actImporting, Slot: 300, Group: "b"}, "a")
	s.Apply(&clusterChange{Action: actMeet, Group: "a", Seeds: peerSeeds{Raft: []string{"x:1"}}}, "a") // itself: ignored
	s.Apply(&clusterChange{Action: actMeet, Group: "b", Seeds: peerSeeds{Raft: []string{"x:2"}}}, "a")
	if got := s.Ranges(); !reflect.DeepEqual(got, [][2]int{{0, 99}, {200, 200}}) || s.OwnedCount() != 101 {
		t.Fatalf("ranges %v owned %d", got, s.OwnedCount())
	}
	if s.Migrating[5] != "b" || s.Importing[300] != "b" || len(s.Groups) != 1 {
		t.Fatalf("state %+v", s)
	}
	s.Apply(&clusterChange{Action: actDisown, Slot: 5}, "a")
	s.Apply(&clusterChange{Action: actOwn, Slot: 300}, "a")
	if s.Owns(5) || !s.Owns(300) || len(s.Migrating) != 0 || len(s.Importing) != 0 || s.OwnedCount() != 101 {
		t.Fatalf("after SETSLOT NODE: %+v owned %d", s, s.OwnedCount())
	}
	s.Apply(&clusterChange{Action: actDelSlots, Ranges: [][2]int{{0, 99}}}, "a")
	if s.OwnedCount() != 2 || !s.Sharded() || len(s.Groups) != 1 {
		t.Fatalf("after DELSLOTS: owned %d groups %v", s.OwnedCount(), s.Groups)
	}
	// A list applies its changes in order: the slot given away, taken
	// back, then importing cleared.
	s.Apply(&clusterChange{Action: actImporting, Slot: 200, Group: "b"}, "a")
	s.Apply(&clusterChange{Action: actList, List: []clusterChange{
		{Action: actDelSlots, Ranges: [][2]int{{200, 200}}},
		{Action: actImporting, Slot: 200, Group: "b"},
		{Action: actAddSlots, Ranges: [][2]int{{200, 200}}},
		{Action: actStable, Slot: 200},
	}}, "a")
	if !s.Owns(200) || len(s.Importing) != 0 || s.OwnedCount() != 2 {
		t.Fatalf("after a list: owns 200 %v, importing %v, owned %d", s.Owns(200), s.Importing, s.OwnedCount())
	}
}

// keyOfSlot returns a key whose hash slot is slot.
func keyOfSlot(t *testing.T, slot int, prefix string) []byte {
	t.Helper()
	for i := 0; i < 1<<20; i++ {
		k := []byte(prefix + string(rune('a'+i%26)) + time.Duration(i).String())
		if hashslot.Of(k) == slot {
			return k
		}
	}
	t.Fatalf("no key for slot %d", slot)
	return nil
}

func TestSlotCheck(t *testing.T) {
	store, err := shards.New(shards.Config{Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	const now = int64(1_700_000_000_000_000_000)
	req := engine.Request{Kind: engine.KindGCRA, Burst: 5, Rate: 1, Period: int64(time.Second), Quantity: 1}
	limit := func(keys ...[]byte) shards.Op {
		op := shards.Op{Code: shards.OpLimit, Keys: keys, Reqs: []engine.Request{req}}
		if len(keys) > 1 {
			op.Code = shards.OpLimitAll
			op.Reqs = make([]engine.Request, len(keys))
			for i := range op.Reqs {
				op.Reqs[i] = req
			}
		}
		return op
	}
	s := cluster.NewState()
	s.Apply(&clusterChange{Action: actAddSlots, Ranges: [][2]int{{0, 100}}}, "a")
	s.Apply(&clusterChange{Action: actMigrating, Slot: 50, Group: "b"}, "a")
	s.Apply(&clusterChange{Action: actImporting, Slot: 200, Group: "b"}, "a")
	owned, foreign, imported := keyOfSlot(t, 10, "o"), keyOfSlot(t, 300, "f"), keyOfSlot(t, 200, "i")
	here, away, moving := keyOfSlot(t, 50, "h"), keyOfSlot(t, 50, "w"), keyOfSlot(t, 50, "m")
	var res shards.Result
	for _, k := range [][]byte{here, moving} {
		op := limit(k)
		store.Exec(&op, now, &res)
	}
	out := shards.Op{Code: shards.OpMoveOut, Keys: [][]byte{moving}}
	store.Exec(&out, now, &res)
	if res.N != 1 {
		t.Fatalf("move out: %+v", res)
	}
	asking := limit(imported)
	asking.Asking = true
	cases := []struct {
		name string
		op   shards.Op
		want error
	}{
		{"owned stable slot", limit(owned), nil},
		{"slot of another group", limit(foreign), cluster.ErrMoved},
		{"imported slot without ASKING", limit(imported), cluster.ErrMoved},
		{"imported slot after ASKING", asking, nil},
		{"migrating slot, key here", limit(here), nil},
		{"migrating slot, key in flight", limit(moving), nil}, // the store answers ErrMoving
		{"migrating slot, key away", limit(away), cluster.ErrAsk},
		{"migrating slot, keys split", limit(here, away), cluster.ErrTryAgain},
		{"owned and foreign keys", limit(owned, foreign), cluster.ErrMoved},
		{"delete of a key away", shards.Op{Code: shards.OpDel, Keys: [][]byte{away}}, cluster.ErrAsk},
		{"flush is not checked", shards.Op{Code: shards.OpFlush}, nil},
		{"a move is not checked", shards.Op{Code: shards.OpMoveDone, Keys: [][]byte{foreign}}, nil},
	}
	for _, tc := range cases {
		if err := slotCheck(&s, store, &tc.op, now); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestNewRouting(t *testing.T) {
	groups := []cluster.GroupView{
		{Name: "a", Slots: [][2]int{{0, 8191}}, Migrating: map[int]string{5: "b"}, Members: []cluster.GroupMember{{ID: "a1", RespAddr: "h:1", Leader: true}}},
		{Name: "b", Slots: [][2]int{{5, 5}, {8192, 16383}}, Importing: map[int]string{5: "a"}, Members: []cluster.GroupMember{{ID: "b1", ClusterID: "x", RespAddr: "h:2"}}},
	}
	r := cluster.NewRouting(0, "a1", groups)
	switch {
	case !r.Sharded:
		t.Error("not sharded")
	case r.Owner(0) != 0 || r.Owner(5) != 0 || r.Owner(8192) != 1:
		t.Errorf("owners %d %d %d: this group's claim should win slot 5", r.Owner(0), r.Owner(5), r.Owner(8192))
	case r.MigratingTo(5) != 1 || r.MigratingTo(6) != -1 || r.ImportingFrom(5) != -1:
		t.Errorf("migrating %d importing %d", r.MigratingTo(5), r.ImportingFrom(5))
	case r.RedirectAddr(0) != "h:1" || r.RedirectAddr(1) != "h:2" || r.RedirectAddr(2) != "" || r.NodeGroup("x") != 1 || r.Group("b") != 1:
		t.Errorf("redirect addresses %q %q %q", r.RedirectAddr(0), r.RedirectAddr(1), r.RedirectAddr(2))
	}
	groups[1].Reachable = true // b's view is fresh: a migrating source hands over
	if r := cluster.NewRouting(0, "a1", groups); r.Owner(5) != 1 || r.Owner(6) != 0 {
		t.Errorf("slot 5 (a migrating, b fresh) owned by %d, want b; slot 6 by %d, want a", r.Owner(5), r.Owner(6))
	}
	if r := cluster.NewRouting(1, "b1", groups); r.Owner(5) != 1 {
		t.Errorf("b's own claim of slot 5 lost to a migrating a: owner %d", r.Owner(5))
	}
	if got := cluster.NewRouting(0, "a1", groups).Ranges(1); !reflect.DeepEqual(got, [][2]int{{5, 5}, {8192, 16383}}) {
		t.Errorf("b's ranges %v", got)
	}
	if one := cluster.NewRouting(0, "a1", []cluster.GroupView{{Name: "a"}}); one.Sharded || one.Owner(123) != 0 {
		t.Errorf("a lone group without slots serves every slot: sharded %v owner %d", one.Sharded, one.Owner(123))
	}
}

func TestClusterStateSurvivesSnapshot(t *testing.T) {
	f := newTestFSM(t, nil)
	f.group = "a"
	base := int64(1_700_000_000) * int64(time.Second)
	entry := func(i uint64, c clusterChange) *raft.Log {
		return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: append(appendEntryHeader(nil, entryCluster, base), encodeClusterChange(&c)...)}
	}
	f.Apply(entry(1, clusterChange{Action: actAddSlots, Ranges: [][2]int{{0, 8191}}}))
	key := keyOfSlot(t, 3, "k")
	limit := shards.Op{Code: shards.OpLimit, Keys: [][]byte{key}, Reqs: []engine.Request{{Kind: engine.KindGCRA, Burst: 5, Rate: 1, Period: int64(time.Second), Quantity: 1}}}
	f.Apply(&raft.Log{Index: 2, Term: 1, Type: raft.LogCommand, Data: encodeOpsEntry(nil, base, []shards.Op{limit})})
	f.Apply(entry(3, clusterChange{Action: actMigrating, Slot: 3, Group: "b"}))
	f.Apply(entry(4, clusterChange{Action: actMeet, Group: "b", Seeds: peerSeeds{Raft: []string{"h:1"}, Resp: []string{"h:2"}}}))
	out := shards.Op{Code: shards.OpMoveOut, Keys: [][]byte{key}, Dest: "h:9"}
	f.Apply(&raft.Log{Index: 5, Term: 1, Type: raft.LogCommand, Data: encodeOpsEntry(nil, base, []shards.Op{out})})
	gone := keyOfSlot(t, 3, "g")
	f.Apply(&raft.Log{Index: 6, Term: 1, Type: raft.LogCommand, Data: encodeOpsEntry(nil, base, []shards.Op{{Code: shards.OpMoveDone, Keys: [][]byte{gone}}})})
	// A MIGRATE holding the move lease when the snapshot is taken: a
	// replica restored from it refuses another holder alike.
	f.Apply(entry(7, clusterChange{Action: actTakeMove, Holder: "n1/1", Lease: int64(time.Minute)}))
	if l := f.cluster.Lease; l.Holder != "n1/1" || l.Until != base+int64(time.Minute) {
		t.Fatalf("lease after TakeMove = %+v", l)
	}
	want := f.clusterState()
	wantTo, wantMoved := maps.Clone(f.cluster.MovingTo), maps.Clone(f.cluster.Moved)
	if wantTo[string(key)] != "h:9" || len(wantMoved) != 1 {
		t.Fatalf("before the snapshot: movingTo %v, moved %v", wantTo, wantMoved)
	}
	wantState, ok := f.store.Moving(key)
	if !ok || !f.sharded.Load() {
		t.Fatalf("key not in flight (%v) or not sharded", ok)
	}
	g := newTestFSM(t, nil)
	g.group = "a"
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	got := g.clusterState()
	if !reflect.DeepEqual(got, want) || !g.sharded.Load() {
		t.Fatalf("restored %+v, want %+v", got, want)
	}
	if !reflect.DeepEqual(g.cluster.MovingTo, wantTo) || !reflect.DeepEqual(g.cluster.Moved, wantMoved) {
		t.Fatalf("restored moves: movingTo %v, moved %v; want %v, %v", g.cluster.MovingTo, g.cluster.Moved, wantTo, wantMoved)
	}
	if st, ok := g.store.Moving(key); !ok || !reflect.DeepEqual(st, wantState) {
		t.Fatalf("key in flight restored as %+v (%v), want %+v", st, ok, wantState)
	}
}

// A key moved away while its slot migrated is a tombstone: never fresh
// here again (ASK while the slot migrates, TRYAGAIN once it is stable,
// through DELSLOTS and ADDSLOTS), until a RESTORE brings it back or the
// slot is given away.
func TestTombstones(t *testing.T) {
	store, err := shards.New(shards.Config{Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	const now = int64(1_700_000_000_000_000_000)
	req := engine.Request{Kind: engine.KindGCRA, Burst: 0, Rate: 1, Period: int64(time.Hour), Quantity: 1}
	key := keyOfSlot(t, 50, "t")
	limit := shards.Op{Code: shards.OpLimit, Keys: [][]byte{key}, Reqs: []engine.Request{req}}
	s := cluster.NewState()
	exec := func(op shards.Op) shards.Result {
		var res shards.Result
		if err := slotCheck(&s, store, &op, now); err != nil {
			return shards.Result{Err: err}
		}
		store.Exec(&op, now, &res)
		noteOp(&s, store, &op, &res)
		return res
	}
	s.Apply(&clusterChange{Action: actAddSlots, Ranges: [][2]int{{0, 100}}}, "a")
	if res := exec(limit); res.Err != nil || res.Results[0].Limited {
		t.Fatalf("first take: %+v", res)
	}
	st, _ := store.Lookup(key, now)
	moveAway := func() {
		t.Helper()
		s.Apply(&clusterChange{Action: actMigrating, Slot: 50, Group: "b"}, "a")
		exec(shards.Op{Code: shards.OpMoveOut, Keys: [][]byte{key}, Dest: "h:9"})
		if s.MovingTo[string(key)] != "h:9" {
			t.Fatalf("destination of the key in flight = %q, want h:9", s.MovingTo[string(key)])
		}
		exec(shards.Op{Code: shards.OpMoveDone, Keys: [][]byte{key}})
		if _, ok := s.Moved[string(key)]; !ok || len(s.MovingTo) != 0 {
			t.Fatalf("after the move: moved %v, movingTo %v", s.Moved, s.MovingTo)
		}
	}
	moveAway()
	steps := []struct {
		name   string
		change *clusterChange
		want   error
	}{
		{"slot still migrating", nil, cluster.ErrAsk},
		{"SETSLOT STABLE", &clusterChange{Action: actStable, Slot: 50}, cluster.ErrTryAgain},
		{"DELSLOTS", &clusterChange{Action: actDelSlots, Ranges: [][2]int{{50, 50}}}, cluster.ErrMoved},
		{"ADDSLOTS", &clusterChange{Action: actAddSlots, Ranges: [][2]int{{50, 50}}}, cluster.ErrTryAgain},
		{"SETSLOT NODE itself", &clusterChange{Action: actOwn, Slot: 50}, cluster.ErrTryAgain},
	}
	for _, st := range steps {
		if st.change != nil {
			s.Apply(st.change, "a")
		}
		if res := exec(limit); !errors.Is(res.Err, st.want) {
			t.Errorf("%s: CL.THROTTLE of the moved key = %+v, want %v", st.name, res, st.want)
		}
	}
	// The key comes back: served again, with the state it left with.
	if res := exec(shards.Op{Code: shards.OpRestore, Keys: [][]byte{key}, State: st}); res.Err != nil || res.N != 1 {
		t.Fatalf("RESTORE of the moved key: %+v", res)
	}
	if res := exec(limit); res.Err != nil || !res.Results[0].Limited {
		t.Errorf("CL.THROTTLE after the key came back = %+v, want limited", res)
	}
	// Moved again, then the slot is given away: no tombstone is left.
	moveAway()
	s.Apply(&clusterChange{Action: actDisown, Slot: 50}, "a")
	if len(s.Moved) != 0 {
		t.Errorf("tombstones after SETSLOT NODE other: %v", s.Moved)
	}
}

// GroupOfAddr errs towards a match: a name on either side matches any
// member with the same port; IP literals must be equal.
func TestGroupOfAddr(t *testing.T) {
	r := cluster.NewRouting(0, "a1", []cluster.GroupView{
		{Name: "a", Members: []cluster.GroupMember{{ID: "a1", RespAddr: "127.0.0.1:7001"}}},
		{Name: "b", Members: []cluster.GroupMember{{ID: "b1", RespAddr: "10.0.0.2:7004"}, {ID: "b2", RespAddr: "node-b2:7005"}}},
	})
	for _, tc := range []struct {
		addr string
		want int
	}{
		{"127.0.0.1:7001", 0},
		{"10.0.0.2:7004", 1},
		{"10.0.0.3:7004", -1}, // another IP
		{"localhost:7004", 1}, // a name may resolve to the member
		{"10.0.0.9:7005", 1},  // the member is a name
		{"127.0.0.1:9999", -1},
		{"not an address", -1},
	} {
		if got := r.GroupOfAddr(tc.addr); got != tc.want {
			t.Errorf("GroupOfAddr(%q) = %d, want %d", tc.addr, got, tc.want)
		}
	}
}
