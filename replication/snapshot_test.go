package replication

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

func smallLogs(cfg *Config) {
	cfg.TrailingLogs = 16
	cfg.SnapshotThreshold = 1 << 30 // snapshots only when the test asks
	cfg.SnapshotInterval = time.Hour
}

// withLogStore is a tweak selecting the log store and appendfsync mode,
// applied after the others given.
func withLogStore(store, fsync string, tweaks ...func(*Config)) func(*Config) {
	return func(cfg *Config) {
		for _, f := range tweaks {
			f(cfg)
		}
		cfg.LogStore, cfg.AppendFsync = store, fsync
	}
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

// checkStoreKind fails the test unless dir holds the given log store and
// not the other.
func checkStoreKind(t *testing.T, dir, store string) {
	t.Helper()
	files := map[string]string{LogStoreBolt: "raft.db", LogStoreWAL: "wal"}
	for kind, name := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		if has := err == nil; has != (kind == store) {
			t.Fatalf("%s: %s exists = %v, want %v (log store %s)", dir, name, has, kind == store, store)
		}
	}
}

func lastSnapshotIndex(n *Node) string { return n.raft.Stats()["last_snapshot_index"] }

// A restarted node restores from its snapshot plus the log after it, and
// catches up with what it missed while down; over each log store, syncing
// every append or every second (a clean stop syncs what is pending).
func TestRestartRestoresFromSnapshotAndLog(t *testing.T) {
	for _, store := range logStores {
		for _, fsync := range []string{FsyncAlways, FsyncEverySec} {
			t.Run(store+"/"+fsync, func(t *testing.T) { testRestartRestoresFromSnapshotAndLog(t, store, fsync) })
		}
	}
}

func testRestartRestoresFromSnapshotAndLog(t *testing.T, store, fsync string) {
	c := newTestCluster(t, 3, withLogStore(store, fsync, smallLogs))
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
	checkStoreKind(t, c.nodes[f].dir, store)
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
// snapshot, into either log store (raft-wal is monotonic: raft drops the
// joiner's whole log once the snapshot is restored).
//
// The members compact their log with boltdb: raft-wal truncates only whole
// segments (64 MiB) and still reads the truncated entries of the open one,
// so a raft-wal leader this young replicates its log from index 1 rather
// than send a snapshot. The all-wal case checks that catch-up path.
func TestLateJoinerInstallsSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name, members, joiner string
		wantSnapshot          bool
	}{
		{"boltdb", LogStoreBolt, LogStoreBolt, true},
		{"wal_joiner", LogStoreBolt, LogStoreWAL, true},
		{"wal", LogStoreWAL, LogStoreWAL, false},
	} {
		t.Run(tc.name, func(t *testing.T) { testLateJoiner(t, tc.members, tc.joiner, tc.wantSnapshot) })
	}
}

func testLateJoiner(t *testing.T, members, joiner string, wantSnapshot bool) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		smallLogs(cfg)
		cfg.LogStore = members
		if cfg.NodeID == "n3" {
			cfg.LogStore = joiner
		}
	})
	writeKeys(t, c, "k", 60)
	l := c.WaitForLeader(10 * time.Second)
	if err := c.nodes[l].node.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	tn := c.addNode()
	c.waitMembers(4, 15*time.Second)
	c.waitConverged(15 * time.Second)
	checkStoreKind(t, tn.dir, joiner)
	if wantSnapshot {
		if got := lastSnapshotIndex(tn.node); got == "0" {
			t.Fatalf("late joiner did not install a snapshot (last_snapshot_index %s)", got)
		}
		// It never held the compacted entries: its log starts after them.
		if first, err := tn.node.logStore.logs.FirstIndex(); err != nil || first <= 1 {
			t.Fatalf("late joiner's first log index = %d, %v; want past the compacted entries", first, err)
		}
	} else {
		t.Logf("late joiner caught up with last_snapshot_index %s", lastSnapshotIndex(tn.node))
	}
	if got := tn.node.Store().Len(tn.node.fsm.LastTime()); got != 60 {
		t.Fatalf("late joiner holds %d keys, want 60", got)
	}
	// It serves forwarded writes like any member.
	if _, err := write(t, tn.node, throttle("late", 1, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	// And it can be removed again.
	if err := c.nodes[l].node.Members().Remove(t.Context(), tn.id); err != nil {
		t.Fatal(err)
	}
	poll.Until(c.t, 10*time.Second, func() error {
		if m := len(c.nodes[l].node.Info().Members); m != 3 {
			return fmt.Errorf("%d members after remove, want 3", m)
		}
		return nil
	})
}
