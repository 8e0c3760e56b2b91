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

// TestMoveLeaseWaitWritesNothing: a Mover waiting on one node for the
// lease another node holds writes nothing to the group's log while it
// waits (it watches the lease its replica applies), and takes the lease
// as soon as the holder drops it.
func TestMoveLeaseWaitWritesNothing(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	li := c.WaitForLeader(10 * time.Second)
	leader, holder, waiter := c.nodes[li].node, c.nodes[(li+1)%3].node, c.nodes[(li+2)%3].node
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := holder.Slots().TakeMove(ctx, "h/1", time.Minute); err != nil {
		t.Fatalf("TakeMove = %v", err)
	}
	// The waiter's replica shows the lease held before the wait starts.
	poll.Until(t, 10*time.Second, func() error {
		if l := waiter.Slots().MoveLease(); l.Holder != "h/1" {
			return fmt.Errorf("waiter's lease %+v, want h/1's", l)
		}
		return nil
	})
	before := leader.Info().LastLogIndex
	ran := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- cluster.NewMover(waiter.Slots(), "w").Run(ctx, time.Minute, 50*time.Second, func() error { close(ran); return nil })
	}()
	// The waiter's first ask is refused: one entry. Then it only watches.
	var start uint64
	poll.Until(t, 10*time.Second, func() error {
		if start = leader.Info().LastLogIndex; start == before {
			return errors.New("the waiter has not asked yet")
		}
		return nil
	})
	time.Sleep(1500 * time.Millisecond) // a window a 200 ms retry would fill with entries
	if got := leader.Info().LastLogIndex - start; got != 0 {
		t.Errorf("%d log entries appended while the waiter waited 1.5 s, want 0 (it watches its replica's lease)", got)
	}
	select {
	case <-ran:
		t.Fatal("the waiter ran while h/1 held the lease")
	default:
	}
	if err := holder.Slots().DropMove(ctx, "h/1"); err != nil {
		t.Fatalf("DropMove = %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiter's Run after the drop = %v", err)
	}
}
