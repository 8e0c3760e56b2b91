package replication

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/poll"
)

// TestMoveLeaseAcrossNodes: the group's move lease, taken on one node, is
// refused on another (a follower's take forwarded to the leader comes back
// as a *cluster.MoveBusyError naming the holder), a drop by anyone but the
// holder leaves it, and once the holder drops it another node takes it.
func TestMoveLeaseAcrossNodes(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	li := c.WaitForLeader(10 * time.Second)
	leader, follower := c.nodes[li].node, c.nodes[(li+1)%3].node
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := follower.Slots().TakeMove(ctx, "f/1", time.Minute); err != nil {
		t.Fatalf("follower TakeMove = %v, want the lease", err)
	}
	var busy *cluster.MoveBusyError
	for _, n := range []*Node{leader, c.nodes[(li+2)%3].node} {
		err := n.clusterSlots.TakeMove(ctx, "other/1", time.Minute)
		if !errors.As(err, &busy) || busy.Holder != "f/1" || !errors.Is(err, cluster.ErrMoveBusy) {
			t.Errorf("TakeMove on %s while f/1 holds the lease = %v, want a MoveBusyError naming f/1", n.cfg.NodeID, err)
		}
	}
	if err := leader.Slots().DropMove(ctx, "other/1"); err != nil {
		t.Fatalf("DropMove by a non-holder = %v", err)
	}
	if err := leader.Slots().TakeMove(ctx, "other/1", time.Minute); !errors.Is(err, cluster.ErrMoveBusy) {
		t.Errorf("TakeMove after a non-holder's drop = %v, want ErrMoveBusy", err)
	}
	if err := follower.Slots().DropMove(ctx, "f/1"); err != nil {
		t.Fatalf("holder's DropMove = %v", err)
	}
	if err := leader.Slots().TakeMove(ctx, "other/1", time.Minute); err != nil {
		t.Errorf("TakeMove after the holder's drop = %v, want the lease", err)
	}
	// Every replica holds the same lease.
	for _, tn := range c.nodes {
		poll.Until(t, 10*time.Second, func() error {
			if l := tn.node.fsm.clusterState().Lease; l.Holder != "other/1" {
				return fmt.Errorf("node %s: lease %+v, want other/1's", tn.node.cfg.NodeID, l)
			}
			return nil
		})
	}
}
