package replication

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func smallLogs(cfg *Config) {
	cfg.TrailingLogs = 16
	cfg.SnapshotThreshold = 1 << 30 // snapshots only when the test asks
	cfg.SnapshotInterval = time.Hour
}

func writeKeys(t *testing.T, c *testCluster, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		for attempt := 0; ; attempt++ {
			l := c.WaitForLeader(10 * time.Second)
			_, err := write(t, c.nodes[l].node, throttle(fmt.Sprintf("%s%d", prefix, i), 9, 1, 3600, 1))
			if err == nil {
				break
			}
			// A leader change on a loaded machine: the write may have been
			// applied, which only consumes more of a fresh key here.
			if attempt == 3 || !(errors.Is(err, ErrLeadershipLost) || errors.Is(err, ErrNoLeader)) {
				t.Fatalf("write %s%d: %v", prefix, i, err)
			}
		}
	}
}

func lastSnapshotIndex(n *Node) string { return n.raft.Stats()["last_snapshot_index"] }

// A restarted node restores from its snapshot plus the log after it, and
// catches up with what it missed while down.
func TestRestartRestoresFromSnapshotAndLog(t *testing.T) {
	c := newTestCluster(t, 3, smallLogs)
	writeKeys(t, c, "a", 50)
	c.waitConverged(10 * time.Second)
	f := (c.WaitForLeader(10*time.Second) + 1) % 3
	if err := c.nodes[f].node.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	writeKeys(t, c, "b", 20) // in the log after the snapshot
	c.waitConverged(10 * time.Second)
	c.stop(f)
	writeKeys(t, c, "c", 10) // missed while down
	c.restart(f)
	if got := lastSnapshotIndex(c.nodes[f].node); got == "0" {
		t.Fatalf("restarted node has no snapshot (last_snapshot_index %s)", got)
	}
	c.waitConverged(15 * time.Second)
	n := c.nodes[f].node
	if got := n.Store().Len(n.fsm.LastTime()); got != 80 {
		t.Fatalf("restarted node holds %d keys, want 50+20+10 = 80", got)
	}
	if got := len(n.fsm.Members()); got != 3 {
		t.Fatalf("restarted node knows %d RESP addresses, want 3", got)
	}
}

// A node added after the log was compacted catches up by installing a
// snapshot.
func TestLateJoinerInstallsSnapshot(t *testing.T) {
	c := newTestCluster(t, 3, smallLogs)
	writeKeys(t, c, "k", 60)
	l := c.WaitForLeader(10 * time.Second)
	if err := c.nodes[l].node.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	tn := c.addNode()
	c.waitMembers(4, 15*time.Second)
	c.waitConverged(15 * time.Second)
	if got := lastSnapshotIndex(tn.node); got == "0" {
		t.Fatalf("late joiner did not install a snapshot (last_snapshot_index %s)", got)
	}
	if got := tn.node.Store().Len(tn.node.fsm.LastTime()); got != 60 {
		t.Fatalf("late joiner holds %d keys, want 60", got)
	}
	// It serves forwarded writes like any member.
	if _, err := write(t, tn.node, throttle("late", 1, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	// And it can be removed again.
	if err := c.nodes[l].node.Remove(t.Context(), tn.id); err != nil {
		t.Fatal(err)
	}
	c.eventually(10*time.Second, func() error {
		if m := len(c.nodes[l].node.Info().Members); m != 3 {
			return fmt.Errorf("%d members after remove, want 3", m)
		}
		return nil
	})
}
