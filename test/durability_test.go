package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

// durable is the limit the durability tests count against: CL.THROTTLE
// key 999 1 3600 allows 1000 at once and one more per hour, so nothing
// refills during a test and remaining = 1000 − requests applied, exactly.
var durable = []any{999, 1, 3600}

const durableLimit = 1000

// checkLogStore fails the test unless nd runs with the given log store and
// appendfsync mode (CONFIG GET) and its raft directory holds that store.
func checkLogStore(t *testing.T, nd *clusterNode, store, fsync string) {
	t.Helper()
	c := noRetryClient(t, nd.Addr)
	for name, want := range map[string]string{"raft-log-store": store, "appendfsync": fsync} {
		if v, err := c.ConfigGet(ctxT(t), name).Result(); err != nil || v[name] != want {
			t.Fatalf("%s: CONFIG GET %s = %v, %v; want %s", nd.id, name, v, err, want)
		}
	}
	files := map[string]string{"boltdb": "raft.db", "wal": "wal"}
	for kind, name := range files {
		_, err := os.Stat(filepath.Join(nd.Dir, "raft-"+nd.id, name))
		if has := err == nil; has != (kind == store) {
			t.Fatalf("%s: raft-%s/%s exists = %v, want %v (log store %s)", nd.id, nd.id, name, has, kind == store, store)
		}
	}
}

// killAll sends SIGKILL to every node before waiting for any, so that none
// outlives another by more than the signals' delivery.
func killAll(nodes []*clusterNode) {
	for _, nd := range nodes {
		nd.cmd.Process.Signal(syscall.SIGKILL)
	}
	for _, nd := range nodes {
		nd.kill() // waits for the exit
	}
}

// restartAll starts every node again with its flags and directory, all at
// once, and waits until each answers PING.
func restartAll(nodes []*clusterNode) {
	for _, nd := range nodes {
		nd.launch()
	}
	for _, nd := range nodes {
		nd.waitReady()
	}
}

// keyTally is what the clients saw for one key.
type keyTally struct {
	acked     int   // allowed replies received
	unknown   int   // requests that failed: applied or not
	lowestRem int64 // the lowest remaining among the acked replies
}

// Kill -9 every node of a cluster syncing its log once a second, while
// clients write through the leader and a follower, and start them all
// again: every decision the cluster acknowledged is still counted. With
// appendfsync everysec an acknowledged entry is in the page cache of a
// majority, which kill -9 does not lose.
func TestClusterKillAllEverysec(t *testing.T) {
	for _, tc := range []struct {
		store string
		args  []string
	}{
		{"boltdb", []string{"--appendfsync", "everysec"}},
		{"wal", []string{"--raft-log-store", "wal", "--appendfsync", "everysec"}},
	} {
		t.Run(tc.store, func(t *testing.T) { testKillAll(t, tc.store, "everysec", tc.args...) })
	}
}

func testKillAll(t *testing.T, store, fsync string, args ...string) {
	const (
		keys    = 5
		writers = 4   // two through the leader, two through a follower
		target  = 300 // acknowledged decisions before the kill
	)
	nodes := startCluster(t, 3, args...)
	for _, nd := range nodes {
		checkLogStore(t, nd, store, fsync)
	}
	l := waitLeader(t, nodes)
	via := []*clusterNode{nodes[l], nodes[(l+1)%3]}

	var mu sync.Mutex
	tally := make([]keyTally, keys)
	for k := range tally {
		tally[k].lowestRem = durableLimit
	}
	total := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		c := noRetryClient(t, via[w%2].Addr)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := (w + i) % keys
				r, err := throttle(context.Background(), c, append([]any{"dur:" + strconv.Itoa(k)}, durable...)...)
				mu.Lock()
				switch {
				case err != nil:
					tally[k].unknown++
				case r[0] != 0:
					t.Errorf("CL.THROTTLE dur:%d 999 1 3600 = %v, want allowed", k, r)
				default:
					tally[k].acked++
					tally[k].lowestRem = min(tally[k].lowestRem, r[2])
					total++
				}
				mu.Unlock()
				if err != nil {
					// Before the kill, an error is a real failure: stop
					// writing and let the test report it.
					select {
					case <-stop:
					default:
						t.Errorf("writer %d, before the kill: %v", w, err)
					}
					return
				}
			}
		}(w)
	}
	poll.Until(t, 60*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if total < target {
			return fmt.Errorf("%d decisions acknowledged, want %d", total, target)
		}
		return nil
	})
	// The writers stop sending; whatever is in flight meets the kill.
	close(stop)
	killAll(nodes)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var acked, unknown int
	for _, k := range tally {
		acked, unknown = acked+k.acked, unknown+k.unknown
	}
	t.Logf("killed all three after %d acknowledged decisions (%d in flight at the kill)", acked, unknown)

	restartAll(nodes)
	waitLeader(t, nodes)
	// Every node answers a peek (a linearizable read) with one history
	// that counts every acknowledged decision: remaining is at most what
	// the lowest acknowledged reply said (1000 − acknowledged or less) and
	// at least 1000 − acknowledged − requests whose reply was lost.
	for k, want := range tally {
		key := "dur:" + strconv.Itoa(k)
		hi, lo := want.lowestRem, int64(durableLimit-want.acked-want.unknown)
		for i, nd := range nodes {
			c := noRetryClient(t, nd.Addr)
			var r []int64
			poll.Until(t, 15*time.Second, func() error {
				var err error
				r, err = throttle(context.Background(), c, append(append([]any{key}, durable...), 0)...)
				return err
			})
			if r[1] != durableLimit || r[2] > hi || r[2] < lo {
				t.Errorf("after restarting all: CL.THROTTLE %s 999 1 3600 0 via %s = %v; want limit %d, remaining in [%d, %d] (%d acknowledged, %d unknown)",
					key, nd.id, r, durableLimit, lo, hi, want.acked, want.unknown)
			}
			if i == 0 {
				t.Logf("%s: %d acknowledged, %d unknown; remaining after the restart %d", key, want.acked, want.unknown, r[2])
			}
		}
	}
}

// Kill -9 the leader of a cluster on the wal log store (appendfsync
// always) and start it again: it recovers its log from its own disk (shown
// while the others are paused, so that nothing can have reached it from
// them), rejoins as a follower and catches up with what it missed.
func TestClusterWALRestart(t *testing.T) {
	nodes := startCluster(t, 3, "--raft-log-store", "wal")
	for _, nd := range nodes {
		checkLogStore(t, nd, "wal", "always")
	}
	l := waitLeader(t, nodes)
	ctx := context.Background()
	lc := noRetryClient(t, nodes[l].Addr)
	const before, after = 50, 20
	for i := 0; i < before; i++ {
		if r, err := throttle(ctx, lc, append([]any{"before"}, durable...)...); err != nil || r[0] != 0 {
			t.Fatalf("CL.THROTTLE before 999 1 3600 (#%d) = %v, %v; want allowed", i+1, r, err)
		}
	}
	pre := raftInfo(nodes[l])
	preLast, _ := strconv.ParseUint(pre["raft_last_log_index"], 10, 64)
	preCommit, _ := strconv.ParseUint(pre["raft_commit_index"], 10, 64)
	if preLast == 0 || preCommit == 0 {
		t.Fatalf("leader's RAFT.INFO before the kill: last log %q, commit %q", pre["raft_last_log_index"], pre["raft_commit_index"])
	}

	nodes[l].kill()
	var others []*clusterNode
	for i, nd := range nodes {
		if i != l {
			others = append(others, nd)
		}
	}
	nl := others[waitLeader(t, others)]
	nc := noRetryClient(t, nl.Addr)
	for i := 0; i < after; i++ {
		r, err := throttle(ctx, nc, append([]any{"after"}, durable...)...)
		if err != nil || r[0] != 0 {
			t.Fatalf("CL.THROTTLE after 999 1 3600 (#%d) via the new leader = %v, %v; want allowed", i+1, r, err)
		}
	}

	// Pause the survivors, restart the old leader: what its log holds now
	// came from its own disk.
	paused := false
	resume := func() {
		if paused {
			for _, nd := range others {
				nd.cmd.Process.Signal(syscall.SIGCONT)
			}
			paused = false
		}
	}
	t.Cleanup(resume)
	for _, nd := range others {
		if err := nd.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	paused = true
	nodes[l].restart()
	if !strings.Contains(nodes[l].output.String(), "restarting from existing raft state") {
		t.Errorf("restarted node did not report its existing raft state:\n%s", nodes[l].output)
	}
	var alone map[string]string
	poll.Until(t, 10*time.Second, func() error {
		if alone = raftInfo(nodes[l]); alone["raft_last_log_index"] == "" {
			return errors.New("restarted node does not answer RAFT.INFO")
		}
		return nil
	})
	last, _ := strconv.ParseUint(alone["raft_last_log_index"], 10, 64)
	if last < preCommit {
		t.Fatalf("restarted node, alone, has log up to %d; it had committed %d before the kill (its log was not recovered)", last, preCommit)
	}
	t.Logf("restarted node alone: last log index %s (was %d), applied %s, term %s (was %s)",
		alone["raft_last_log_index"], preLast, alone["raft_applied_index"], alone["raft_term"], pre["raft_term"])
	resume()

	var applied []string
	poll.Until(t, 30*time.Second, func() error {
		inf := raftInfo(nodes[l])
		if inf["raft_state"] != "follower" || inf["raft_leader_resp_addr"] == "" {
			return fmt.Errorf("restarted node: state %q, leader %q", inf["raft_state"], inf["raft_leader_resp_addr"])
		}
		if len(applied) == 0 || applied[len(applied)-1] != inf["raft_applied_index"] {
			applied = append(applied, inf["raft_applied_index"])
		}
		got, _ := strconv.ParseUint(inf["raft_applied_index"], 10, 64)
		committed, _ := strconv.ParseUint(raftInfo(nl)["raft_commit_index"], 10, 64)
		if got < committed {
			return fmt.Errorf("restarted node applied %d, cluster committed %d", got, committed)
		}
		return nil
	})
	t.Logf("restarted node's applied index, as polled: %v", applied)
	oc := noRetryClient(t, nodes[l].Addr)
	for key, n := range map[string]int{"before": before, "after": after} {
		var r []int64
		poll.Until(t, 15*time.Second, func() error {
			var err error
			r, err = throttle(ctx, oc, append(append([]any{key}, durable...), 0)...)
			return err
		})
		if r[2] != int64(durableLimit-n) {
			t.Errorf("CL.THROTTLE %s 999 1 3600 0 via the restarted node = %v; want remaining %d", key, r, durableLimit-n)
		}
	}
}
