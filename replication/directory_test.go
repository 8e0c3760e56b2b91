package replication

import (
	"context"
	"errors"
	"fmt"
	"github.com/cellserver/cellserver/cluster"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/shards"
)

// newGroup starts a group of n nodes named name.
func newGroup(t *testing.T, name string, n int) *testCluster {
	return newTestCluster(t, n, func(c *Config) { c.Group = name })
}

// follower returns a running node of c that is not the leader.
func (c *testCluster) follower() *Node {
	for _, tn := range c.nodes {
		if tn.node != nil && !isLeader(tn.node) {
			return tn.node
		}
	}
	c.t.Fatal("no follower")
	return nil
}

// waitRouting polls until check accepts the routing of every running node
// of every cluster.
func waitRouting(t *testing.T, check func(*cluster.Routing) error, clusters ...*testCluster) {
	t.Helper()
	poll.Until(t, 15*time.Second, func() error {
		for _, c := range clusters {
			for _, tn := range c.nodes {
				if tn.node == nil {
					continue
				}
				if err := check(tn.node.Routing()); err != nil {
					return fmt.Errorf("%s/%s: %w", tn.node.Group(), tn.id, err)
				}
			}
		}
		return nil
	})
}

func TestGroupsMeetAndRoute(t *testing.T) {
	a, b := newGroup(t, "a", 2), newGroup(t, "b", 1)
	ctx := context.Background()
	if r := a.nodes[0].node.Routing(); r.Sharded || r.Owner(42) != r.Self {
		t.Fatalf("a lone group without slots must serve every slot")
	}
	if err := a.follower().Slots().AddSlots(ctx, []int{0, 1, 2}); err != nil {
		t.Fatalf("ADDSLOTS through a follower: %v", err)
	}
	if err := a.follower().Slots().AddSlots(ctx, []int{3, 2}); err == nil {
		t.Fatal("ADDSLOTS of an owned slot succeeded")
	} else if se := (*cluster.SlotError)(nil); !errors.As(err, &se) || se.Slot != 2 || !errors.Is(err, cluster.ErrSlotBusy) {
		t.Fatalf("ADDSLOTS of an owned slot: %#v", err)
	}
	if err := a.nodes[0].node.Slots().DelSlots(ctx, []int{0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := a.nodes[0].node.Slots().AddSlots(ctx, toSlots(0, 8191)); err != nil {
		t.Fatal(err)
	}
	if err := b.nodes[0].node.Slots().AddSlots(ctx, toSlots(8192, 16383)); err != nil {
		t.Fatal(err)
	}
	if err := a.follower().Directory().Meet(ctx, a.nodes[0].respAddr); !errors.Is(err, ErrOwnGroup) {
		t.Fatalf("MEET of this group: %v", err)
	}
	if err := a.follower().Directory().Meet(ctx, b.nodes[0].respAddr); err != nil {
		t.Fatalf("MEET: %v", err)
	}
	waitRouting(t, func(r *cluster.Routing) error {
		if len(r.Groups) != 2 {
			return fmt.Errorf("%d groups", len(r.Groups))
		}
		if r.Owner(0) != r.Group("a") || r.Owner(16383) != r.Group("b") {
			return fmt.Errorf("owners %d %d", r.Owner(0), r.Owner(16383))
		}
		for g := range r.Groups {
			if _, ok := r.Groups[g].Leader(); !ok || !r.Groups[g].Reachable {
				return fmt.Errorf("group %s: no leader known", r.Groups[g].Name)
			}
		}
		return nil
	}, a, b)
	// b learnt about a from a's leader: it is in b's log.
	if _, ok := b.nodes[0].node.fsm.clusterState().Groups["a"]; !ok {
		t.Fatal("b did not record a")
	}
	// A slot of b is busy for a.
	var se *cluster.SlotError
	if err := a.nodes[0].node.Slots().AddSlots(ctx, []int{9000}); !errors.As(err, &se) || se.Slot != 9000 {
		t.Fatalf("ADDSLOTS of b's slot on a: %v", err)
	}
	// Resharding one slot: b imports from a, a migrates to b, then b owns it.
	aLeader, bLeader := leaderOf(a), leaderOf(b)
	aID, bID := cluster.NodeID("a", aLeader.cfg.NodeID), cluster.NodeID("b", bLeader.cfg.NodeID)
	steps := []struct {
		n      *Node
		action cluster.SlotAction
		id     string
	}{
		{b.nodes[0].node, cluster.SlotImporting, aID},
		{a.follower(), cluster.SlotMigrating, bID},
		{b.nodes[0].node, cluster.SlotNode, bID},
		{a.follower(), cluster.SlotNode, bID},
	}
	for i, s := range steps {
		if err := s.n.clusterSlots.SetSlot(ctx, 100, s.action, s.id); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	waitRouting(t, func(r *cluster.Routing) error {
		if r.Owner(100) != r.Group("b") || r.Owner(99) != r.Group("a") || r.MigratingTo(100) >= 0 || r.ImportingFrom(100) >= 0 {
			return fmt.Errorf("slot 100 owned by %d", r.Owner(100))
		}
		return nil
	}, a, b)
	if err := a.nodes[0].node.Slots().SetSlot(ctx, 5, cluster.SlotMigrating, "0000"); !errors.Is(err, cluster.ErrUnknownNode) {
		t.Fatalf("SETSLOT naming an unknown node: %v", err)
	}
	if err := a.follower().Slots().SetSlot(ctx, 100, cluster.SlotMigrating, bID); !errors.As(err, &se) || !errors.Is(err, cluster.ErrSlotNotOwned) {
		t.Fatalf("SETSLOT MIGRATING of a slot a does not own: %v", err)
	}
	// A slot whose keys are still here is not given away.
	key := keyOfSlot(t, 200, "k")
	if _, err := write(t, aLeader, throttle(string(key), 5, 1, 60, 1)); err != nil {
		t.Fatal(err)
	}
	if err := a.follower().Slots().SetSlot(ctx, 200, cluster.SlotNode, bID); !errors.As(err, &se) || !errors.Is(err, cluster.ErrSlotHasKeys) || se.Slot != 200 {
		t.Fatalf("SETSLOT NODE of a slot with keys: %v", err)
	}
}

// leaderOf returns c's ready leader.
func leaderOf(c *testCluster) *Node {
	return c.nodes[c.WaitForLeader(10*time.Second)].node
}

func toSlots(first, last int) []int {
	s := make([]int, 0, last-first+1)
	for i := first; i <= last; i++ {
		s = append(s, i)
	}
	return s
}

func TestNewLeaderNamedByOtherGroups(t *testing.T) {
	a, b := newGroup(t, "a", 3), newGroup(t, "b", 1)
	ctx := context.Background()
	if err := b.nodes[0].node.Directory().Meet(ctx, a.nodes[1].respAddr); err != nil {
		t.Fatal(err)
	}
	old := a.WaitForLeader(10 * time.Second)
	a.stop(old)
	next := a.WaitForLeader(15*time.Second, old)
	want := a.nodes[next].respAddr
	start := time.Now()
	waitRouting(t, func(r *cluster.Routing) error {
		g := r.Group("a")
		if g < 0 {
			return fmt.Errorf("group a unknown")
		}
		if l, _ := r.Groups[g].Leader(); l.RespAddr != want {
			return fmt.Errorf("a's leader at %q, want %q", l.RespAddr, want)
		}
		return nil
	}, b)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("b named a's new leader %v after a knew it", d)
	}
}

func TestJoinOfAnotherGroupRefused(t *testing.T) {
	a := newGroup(t, "a", 1)
	err := a.nodes[0].node.Members().Join(context.Background(), "x1", "127.0.0.1:1", "127.0.0.1:2")
	if err == nil {
		t.Fatal("join of an unreachable node succeeded")
	}
	b := newGroup(t, "b", 1)
	err = a.nodes[0].node.Members().Join(context.Background(), "b-node", b.nodes[0].raftAddr, b.nodes[0].respAddr)
	if !errors.Is(err, ErrOtherGroup) || !strings.Contains(err.Error(), `group "b"`) {
		t.Fatalf("join of a node of group b into a: %v", err)
	}
	if len(a.nodes[0].node.Info().Members) != 1 {
		t.Fatal("the node of another group became a member")
	}
}

// An op the log would refuse fails alone at Write, before it could share
// an entry with other callers' ops.
func TestWriteRefusesMalformedOp(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	n := c.nodes[0].node
	before := n.raft.LastIndex()
	bad := []shards.Op{{Code: shards.OpMoveOut}}
	if err := n.Write(context.Background(), bad, make([]shards.Result, 1)); !errors.Is(err, ErrBadPayload) {
		t.Fatalf("Write of a move without keys = %v, want ErrBadPayload", err)
	}
	if after := n.raft.LastIndex(); after != before {
		t.Fatalf("the malformed op reached the log (last index %d → %d)", before, after)
	}
	if _, err := write(t, n, throttle("k", 1, 1, 60, 1)); err != nil {
		t.Fatalf("a good write after it: %v", err)
	}
}

// TestFresher pins which of two answers about a group the directory keeps.
func TestFresher(t *testing.T) {
	for _, tc := range []struct {
		name    string
		w, best *groupWire
		want    bool
	}{
		{"first answer", &groupWire{Term: 1}, nil, true},
		{"higher term", &groupWire{Term: 3}, &groupWire{Term: 2, LeaderID: "a", Applied: 90}, true},
		{"lower term", &groupWire{Term: 2, LeaderID: "a", Applied: 90}, &groupWire{Term: 3}, false},
		{"names a leader", &groupWire{Term: 2, LeaderID: "a"}, &groupWire{Term: 2, Applied: 90}, true},
		{"names none", &groupWire{Term: 2, Applied: 90}, &groupWire{Term: 2, LeaderID: "a"}, false},
		{"applied more (a lagging follower answered first)", &groupWire{Term: 2, LeaderID: "a", Applied: 12}, &groupWire{Term: 2, LeaderID: "a", Applied: 11}, true},
		{"applied less", &groupWire{Term: 2, LeaderID: "a", Applied: 11}, &groupWire{Term: 2, LeaderID: "a", Applied: 12}, false},
		{"same", &groupWire{Term: 2, LeaderID: "a", Applied: 12}, &groupWire{Term: 2, LeaderID: "a", Applied: 12}, false},
	} {
		if got := fresher(tc.w, tc.best); got != tc.want {
			t.Errorf("%s: fresher = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestGroupHasSlotKeys: a node asks another group, through its directory
// (the members' raft ports, not their RESP ports: these test members have
// no RESP server), whether it holds a key of a slot; its own group and an
// unknown one are errors, as is a group one of whose members does not
// answer.
func TestGroupHasSlotKeys(t *testing.T) {
	a, b := newGroup(t, "a", 2), newGroup(t, "b", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := leaderOf(a).Slots().AddSlots(ctx, toSlots(0, hashslot.Count-1)); err != nil {
		t.Fatal(err)
	}
	if err := leaderOf(a).Directory().Meet(ctx, b.nodes[0].respAddr); err != nil {
		t.Fatalf("MEET: %v", err)
	}
	waitRouting(t, func(r *cluster.Routing) error {
		if len(r.Groups) != 2 {
			return fmt.Errorf("%d groups", len(r.Groups))
		}
		return nil
	}, a, b)
	if _, err := write(t, leaderOf(a), throttle("k", 1, 1, 60, 1)); err != nil {
		t.Fatal(err)
	}
	a.waitConverged(15 * time.Second)
	slot := hashslot.Of([]byte("k"))
	asker := b.nodes[0].node
	for _, tc := range []struct {
		group string
		slot  int
		want  bool
	}{{"a", slot, true}, {"a", (slot + 1) % hashslot.Count, false}} {
		if got, err := asker.Slots().GroupHasSlotKeys(ctx, tc.group, tc.slot); err != nil || got != tc.want {
			t.Errorf("GroupHasSlotKeys(%s, %d) = %v, %v; want %v", tc.group, tc.slot, got, err, tc.want)
		}
	}
	if _, err := asker.Slots().GroupHasSlotKeys(ctx, "b", slot); !errors.Is(err, cluster.ErrGroupUnknown) {
		t.Errorf("GroupHasSlotKeys of its own group = %v, want ErrGroupUnknown", err)
	}
	if _, err := asker.Slots().GroupHasSlotKeys(ctx, "zz", slot); !errors.Is(err, cluster.ErrGroupUnknown) {
		t.Errorf("GroupHasSlotKeys of an unknown group = %v, want ErrGroupUnknown", err)
	}
	// A member of a that does not answer: a doubt, reported.
	a.stop(1)
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	defer cancelShort()
	if _, err := asker.Slots().GroupHasSlotKeys(short, "a", (slot+1)%hashslot.Count); err == nil {
		t.Errorf("GroupHasSlotKeys with a member of a stopped = nil error, want one")
	}
}
