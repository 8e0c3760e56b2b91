package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/shards"
)

// slotKeys is a SlotKeysAsker over fixed answers, counting the questions:
// the directory's answers as replication gives them.
type slotKeys struct {
	has   map[string]bool  // group → holds a key of the slot
	fail  map[string]error // group → its members cannot be asked
	asked map[string]int
}

func (s *slotKeys) GroupHasSlotKeys(_ context.Context, group string, _ int) (bool, error) {
	s.asked[group]++
	if err := s.fail[group]; err != nil {
		return false, err
	}
	return s.has[group], nil
}

// TestPlanAbort: which keys in flight CLUSTER ABORTMOVE puts back. Group a
// (Self) owns 0-99 and slot 5's keys are in flight; b owns 100-199; c and
// d own nothing; e imports slot 5; f's view is stale.
func TestPlanAbort(t *testing.T) {
	m := func(id string) []GroupMember { return []GroupMember{{ID: id, RespAddr: "127.0.0.1:" + id}} }
	r := NewRouting(0, "a1", []GroupView{
		{Name: "a", Slots: [][2]int{{0, 99}}, Reachable: true, Members: m("7001")},
		{Name: "b", Slots: [][2]int{{100, 199}}, Reachable: true, Members: m("7002")},
		{Name: "c", Reachable: true, Members: m("7003")},
		{Name: "d", Reachable: true, Members: m("7004")},
		{Name: "e", Reachable: true, Members: m("7005"), Importing: map[int]string{6: "a"}},
		{Name: "f", Members: m("7006")},
	})
	const slot = 5
	tests := []struct {
		name    string
		dests   []string // one key each
		force   bool
		blocked *AbortBlockedError
		asked   map[string]int
	}{
		{name: "none", blocked: nil},
		{name: "outside the cluster", dests: []string{"127.0.0.1:9999", "127.0.0.1:9998"}},
		{name: "a group without the slot's keys", dests: []string{"127.0.0.1:7002", "127.0.0.1:7002"}, asked: map[string]int{"b": 1}},
		{name: "a group holding them", dests: []string{"127.0.0.1:7003", "127.0.0.1:9999"}, asked: map[string]int{"c": 1},
			blocked: &AbortBlockedError{Slot: slot, Keys: 1, Dest: "127.0.0.1:7003", Group: "c"}},
		{name: "a group that does not answer", dests: []string{"127.0.0.1:7004"}, asked: map[string]int{"d": 1},
			blocked: &AbortBlockedError{Slot: slot, Keys: 1, Dest: "127.0.0.1:7004", Group: "d"}},
		{name: "an unknown destination first", dests: []string{"", "127.0.0.1:7003"}, asked: map[string]int{"c": 1},
			blocked: &AbortBlockedError{Slot: slot, Keys: 2}},
		{name: "a stale group is not asked", dests: []string{"127.0.0.1:7006"},
			blocked: &AbortBlockedError{Slot: slot, Keys: 1, Dest: "127.0.0.1:7006", Group: "f"}},
		{name: "this group", dests: []string{"127.0.0.1:7001"},
			blocked: &AbortBlockedError{Slot: slot, Keys: 1, Dest: "127.0.0.1:7001", Group: "a"}},
		{name: "force", dests: []string{"", "127.0.0.1:7003"}, force: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ask := &slotKeys{has: map[string]bool{"c": true}, fail: map[string]error{"d": errors.New("no answer")}, asked: map[string]int{}}
			keys := make([][]byte, len(tc.dests))
			dest := map[string]string{}
			for i, d := range tc.dests {
				keys[i] = []byte{byte('k'), byte(i)}
				dest[string(keys[i])] = d
			}
			err := PlanAbort(context.Background(), r, ask, slot, tc.force, keys, func(k []byte) string { return dest[string(k)] })
			var got *AbortBlockedError
			errors.As(err, &got)
			if (got == nil) != (tc.blocked == nil) || got != nil && *got != *tc.blocked || got == nil && err != nil {
				t.Errorf("PlanAbort = %v, want %v", err, tc.blocked)
			}
			for g, n := range ask.asked {
				if tc.asked[g] != n {
					t.Errorf("group %s asked %d times, want %d", g, n, tc.asked[g])
				}
			}
			for g, n := range tc.asked {
				if ask.asked[g] != n {
					t.Errorf("group %s asked %d times, want %d", g, ask.asked[g], n)
				}
			}
		})
	}
	// No asker (a node without a directory): every group is a doubt.
	if err := PlanAbort(context.Background(), r, nil, slot, false, [][]byte{[]byte("k")}, func([]byte) string { return "127.0.0.1:7002" }); err == nil {
		t.Errorf("PlanAbort without an asker put back a key sent to group b")
	}
}

// storeAbortKeyspace is an AbortKeyspace over a keyspace in this process.
type storeAbortKeyspace struct{ storeKeyspace }

func (k *storeAbortKeyspace) MovingKeys(fn func(key []byte, st engine.State) bool) {
	k.s.MovingKeys(fn)
}

func (k *storeAbortKeyspace) PutBack(keys [][]byte) (int64, error) {
	var res shards.Result
	k.s.Exec(&shards.Op{Code: shards.OpMoveAbort, Keys: keys}, k.now, &res)
	return res.N, res.Err
}

// TestAbortRun: an Abort puts back the slot's keys in flight (only that
// slot's) when PlanAbort allows it, and nothing when a key may be held
// elsewhere.
func TestAbortRun(t *testing.T) {
	const now = int64(1_700_000_000) * 1e9
	req := engine.Request{Kind: engine.KindGCRA, Burst: 0, Rate: 1, Period: 60e9, Quantity: 1}
	r := NewRouting(0, "a1", []GroupView{
		{Name: "a", Slots: [][2]int{{0, 16383}}, Reachable: true, Members: []GroupMember{{ID: "1", RespAddr: "127.0.0.1:7001"}}},
		{Name: "c", Reachable: true, Members: []GroupMember{{ID: "3", RespAddr: "127.0.0.1:7003"}}},
	})
	// Two keys of one slot, one of another.
	k1, k2, other := []byte("{t}1"), []byte("{t}2"), []byte("{u}1")
	slot := hashslot.Of(k1)
	for _, tc := range []struct {
		name   string
		dest   string
		want   int64
		refuse bool
	}{
		{name: "sent outside the cluster", dest: "127.0.0.1:9999", want: 2},
		{name: "sent to a group that holds the slot's keys", dest: "127.0.0.1:7003", refuse: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, _ := shards.New(shards.Config{Shards: 2})
			ks := &storeAbortKeyspace{storeKeyspace{s: src, now: now}}
			for _, k := range [][]byte{k1, k2, other} {
				var res shards.Result
				src.Exec(&shards.Op{Code: shards.OpLimit, Keys: [][]byte{k}, Reqs: []engine.Request{req}}, now, &res)
				src.Exec(&shards.Op{Code: shards.OpMoveOut, Keys: [][]byte{k}, Dest: tc.dest}, now, &res)
			}
			ask := &slotKeys{has: map[string]bool{"c": true}, asked: map[string]int{}}
			ab := &Abort{Slot: slot, Keyspace: ks, Routing: func() *Routing { return r }, MoveDest: func([]byte) string { return tc.dest }, Ask: ask}
			n, err := ab.Run(context.Background())
			var blocked *AbortBlockedError
			if n != tc.want || errors.As(err, &blocked) != tc.refuse || err != nil && !tc.refuse {
				t.Fatalf("Run = %d, %v; want %d (refused %v)", n, err, tc.want, tc.refuse)
			}
			for _, k := range [][]byte{k1, k2} {
				if _, moving := src.Moving(k); moving != tc.refuse {
					t.Errorf("%s in flight %v after Run, want %v", k, moving, tc.refuse)
				}
			}
			if _, moving := src.Moving(other); !moving {
				t.Errorf("%s (another slot) put back", other)
			}
		})
	}
}
