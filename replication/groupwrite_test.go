package replication

import (
	"context"
	"errors"
	"fmt"
	"github.com/cellserver/cellserver/cluster"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/shards"
)

// writeIn runs one op through n.WriteGroup in group, bounded by d, and
// returns its result.
func writeIn(n *Node, group string, d time.Duration, op shards.Op) (shards.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	res := make([]shards.Result, 1)
	err := n.WriteGroup(ctx, group, []shards.Op{op}, res)
	return res[0], err
}

// TestWriteGroup: any node of group a decides ops in group b through b's
// leader, exactly (b's limit holds whichever node of a asks); an op whose
// key b does not serve fails alone with cluster.ErrMoved, nothing applied; when b's
// leader stops, writes wait for the new one; without a quorum in b they
// fail with ErrNoLeader within the bound, never succeed.
func TestWriteGroup(t *testing.T) {
	a, b := newGroup(t, "a", 3), newGroup(t, "b", 3)
	ctx := context.Background()
	if err := a.follower().Slots().AddSlots(ctx, toSlots(0, 8191)); err != nil {
		t.Fatal(err)
	}
	if err := b.follower().Slots().AddSlots(ctx, toSlots(8192, 16383)); err != nil {
		t.Fatal(err)
	}
	if err := a.follower().Directory().Meet(ctx, b.nodes[0].respAddr); err != nil {
		t.Fatal(err)
	}
	waitRouting(t, func(r *cluster.Routing) error {
		if len(r.Groups) != 2 {
			return fmt.Errorf("groups %+v", r.Groups)
		}
		for g := range r.Groups {
			if _, ok := r.Groups[g].Leader(); !ok {
				return fmt.Errorf("group %s: no leader known", r.Groups[g].Name)
			}
		}
		return nil
	}, a, b)

	kb := string(keyOfSlot(t, 9000, "wg"))
	ka := string(keyOfSlot(t, 100, "wg"))
	// CL.THROTTLE kb 3 1 3600: 4 allowed, then limited, asked through
	// every node of a in turn.
	allowed := 0
	for i := range 8 {
		n := a.nodes[i%3].node
		r, err := writeIn(n, "b", 10*time.Second, throttle(kb, 3, 1, 3600, 1))
		if err != nil || r.Err != nil {
			t.Fatalf("call %d through a/%s: %v, %v", i, n.cfg.NodeID, err, r.Err)
		}
		if !r.Results[0].Limited {
			allowed++
		}
	}
	if allowed != 4 {
		t.Fatalf("allowed %d of 8 in group b, want 4", allowed)
	}
	if got := leaderOf(b).Store().Exists([][]byte{[]byte(kb)}, time.Now().UnixNano()); got != 1 {
		t.Fatalf("key %s not in b's leader", kb)
	}
	if got := leaderOf(a).Store().Exists([][]byte{[]byte(kb)}, time.Now().UnixNano()); got != 0 {
		t.Fatalf("key %s of b in a's keyspace", kb)
	}
	// Writing in one's own group is Write.
	if r, err := writeIn(a.follower(), "a", 10*time.Second, throttle(ka, 3, 1, 3600, 1)); err != nil || r.Err != nil || r.Results[0].Limited {
		t.Fatalf("write in own group: %+v, %v", r, err)
	}
	// b refuses a key of a at apply time, alone.
	r, err := writeIn(a.follower(), "b", 10*time.Second, throttle(ka, 3, 1, 3600, 1))
	if err != nil || !errors.Is(r.Err, cluster.ErrMoved) {
		t.Fatalf("a key of a written in b: %+v, %v; want cluster.ErrMoved", r, err)
	}
	if got := leaderOf(b).Store().Exists([][]byte{[]byte(ka)}, time.Now().UnixNano()); got != 0 {
		t.Fatalf("refused key %s landed in b", ka)
	}

	// b's leader stops: writes fail (never succeed wrongly) until b's new
	// leader decides them.
	old := b.WaitForLeader(10 * time.Second)
	b.stop(old)
	poll.Until(t, 30*time.Second, func() error {
		r, err := writeIn(a.nodes[0].node, "b", 10*time.Second, throttle(kb, 3, 1, 3600, 1))
		switch {
		case err != nil:
			return err
		case r.Err != nil || !r.Results[0].Limited:
			t.Fatalf("after b's leader stopped: %+v; want limited (the key kept its state)", r)
		}
		return nil
	})

	// Without a quorum in b, a write fails within its bound.
	for i := range b.nodes {
		if i != old && b.nodes[i].node != nil && !isLeader(b.nodes[i].node) {
			b.stop(i)
			break
		}
	}
	start := time.Now()
	r, err = writeIn(a.nodes[1].node, "b", 4*time.Second, throttle(kb+"x", 3, 1, 3600, 1))
	if err == nil {
		t.Fatalf("write in b without a quorum succeeded: %+v", r)
	}
	if el := time.Since(start); el > 8*time.Second {
		t.Errorf("write in b without a quorum took %v, want its bound (4 s)", el)
	}
	if !errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrLeadershipLost) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("write in b without a quorum: %v; want no leader, outcome unknown or the deadline", err)
	}
	if _, err := writeIn(a.nodes[1].node, "zz", time.Second, throttle(kb, 3, 1, 3600, 1)); !errors.Is(err, ErrNoLeader) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("write in an unknown group: %v; want no leader", err)
	}
}
