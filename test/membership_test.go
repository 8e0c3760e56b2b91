package test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

// memberRaftAddr returns member id's raft address from a RAFT.INFO view.
func memberRaftAddr(t *testing.T, inf map[string]string, id string) string {
	t.Helper()
	for _, kv := range strings.Split(inf["raft_member_"+id], ",") {
		if v, ok := strings.CutPrefix(kv, "raft="); ok {
			return v
		}
	}
	t.Fatalf("RAFT.INFO lists no raft address for %s: %v", id, inf)
	return ""
}

// Membership mistakes an operator can make over redis clients do not take
// the cluster down: RAFT.JOINs of addresses nothing listens on are refused
// with a definite error; RAFT.REMOVE of the leader leaves it running as a
// removed node that answers at once and names the new leader; RAFT.JOIN
// sent to another member brings it back without a restart.
func TestClusterMembershipMistakes(t *testing.T) {
	nodes := startCluster(t, 3)
	l := waitLeader(t, nodes)
	ctx := context.Background()

	// Three typos in RAFT.JOIN.
	for i := range 3 {
		addr := "127.0.0.1:" + strconv.Itoa(freePort(t)) // free: nothing listens
		err := noRetryClient(t, nodes[(l+i)%3].Addr).Do(ctx, "RAFT.JOIN", fmt.Sprintf("typo%d", i), addr, "127.0.0.1:1").Err()
		if err == nil || !strings.HasPrefix(err.Error(), "ERR ") || strings.Contains(err.Error(), "may or may not") {
			t.Fatalf("RAFT.JOIN of unreachable %s = %v, want a definite ERR refusal", addr, err)
		}
	}
	waitMembers(t, nodes, 3)
	for i, nd := range nodes {
		if _, err := throttle(ctx, noRetryClient(t, nd.Addr), "after-typos", 99, 100, 60); err != nil {
			t.Fatalf("CL.THROTTLE via node %d after the bad joins: %v", i, err)
		}
	}

	// Remove the leader.
	old := nodes[l]
	oldRaft := memberRaftAddr(t, raftInfo(old), old.id)
	if err := noRetryClient(t, old.Addr).Do(ctx, "RAFT.REMOVE", old.id).Err(); err != nil {
		t.Fatalf("RAFT.REMOVE %s (the leader) = %v, want OK", old.id, err)
	}
	rest := append(append([]*clusterNode{}, nodes[:l]...), nodes[l+1:]...)
	nl := rest[waitLeader(t, rest)]
	want := "CLUSTERDOWN this node was removed from the cluster (leader " + nl.id + " at " + nl.Addr + "); RAFT.JOIN it again to rejoin"
	oc := noRetryClient(t, old.Addr)
	poll.Until(t, 20*time.Second, func() error {
		start := time.Now()
		_, err := throttle(ctx, oc, "k", 9, 10, 60)
		if took := time.Since(start); err == nil || err.Error() != want || took > time.Second {
			return fmt.Errorf("CL.THROTTLE on the removed node = %v after %v, want %q at once", err, took, want)
		}
		return nil
	})
	if st := raftInfo(old)["raft_state"]; st != "removed" {
		t.Fatalf("removed node's raft_state = %q, want removed", st)
	}
	waitMembers(t, rest, 2)
	if _, err := throttle(ctx, noRetryClient(t, nl.Addr), "without-old", 9, 10, 60); err != nil {
		t.Fatalf("CL.THROTTLE on the new leader: %v", err)
	}

	// Rejoin through the member that is not the leader, no restart.
	via := rest[0]
	if via == nl {
		via = rest[1]
	}
	if err := noRetryClient(t, via.Addr).Do(ctx, "RAFT.JOIN", old.id, oldRaft, old.Addr).Err(); err != nil {
		t.Fatalf("RAFT.JOIN %s again = %v, want OK", old.id, err)
	}
	waitMembers(t, nodes, 3)
	poll.Until(t, 20*time.Second, func() error {
		if _, err := throttle(ctx, oc, "back", 9, 10, 60); err != nil {
			return fmt.Errorf("CL.THROTTLE on the rejoined node: %v", err)
		}
		inf := raftInfo(old)
		if inf["raft_state"] != "follower" || inf["raft_removed"] != "0" {
			return fmt.Errorf("rejoined node: state %q, removed %q", inf["raft_state"], inf["raft_removed"])
		}
		if v := raftInfo(nl)["raft_member_"+old.id]; !strings.Contains(v, "voter=1") || !strings.Contains(v, "reachable=1") {
			return fmt.Errorf("leader's view of %s after the rejoin = %q, want a reachable voter", old.id, v)
		}
		return nil
	})
}
