package test

import (
	"context"
	"errors"
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

// A process with a raft log of its own never takes a member's vote (issue
// 27, case 2): with a member killed, a process started with that member's
// id and --bootstrap yes (a one-node log of its own, entries 1–4 at the
// same index and term as the group's) at another raft address asks the
// leader, by RAFT.JOIN, to be that member there. The leader refuses it with
// an error naming the other log and what to do, keeps the member at its
// address, and the real member restarted there from its data is a voter
// again. Every member shows the same group id in RAFT.INFO, the process
// another.
func TestOwnLogCannotTakeMemberVote(t *testing.T) {
	secret := []string{"--cluster-secret", "s3cret"}
	nodes := startCluster(t, 3, secret...)
	l := waitLeader(t, nodes)
	ctx := context.Background()
	leader := nodes[l]
	if r, err := throttle(ctx, noRetryClient(t, leader.Addr), "own-log", 0, 1, 3600); err != nil || r[0] != 0 {
		t.Fatalf("CL.THROTTLE own-log 0 1 3600 = %v, %v; want allowed", r, err)
	}
	group := raftInfo(leader)["raft_group_id"]
	member := nodes[(l+1)%3]
	own := memberRaftAddr(t, raftInfo(leader), member.id)
	member.kill()

	imp := startClusterNode(t, member.id, "", secret...)
	poll.Until(t, 15*time.Second, func() error {
		inf := raftInfo(imp)
		if last, _ := strconv.Atoi(inf["raft_last_log_index"]); inf["raft_ready"] != "1" || last < 3 {
			return fmt.Errorf("the lone process is not the ready leader of its own log yet: ready %q, last index %q", inf["raft_ready"], inf["raft_last_log_index"])
		}
		return nil
	})
	impInfo := raftInfo(imp)
	impRaft := memberRaftAddr(t, impInfo, member.id)
	err := noRetryClient(t, leader.Addr).Do(ctx, "RAFT.JOIN", member.id, impRaft, imp.Addr).Err()
	// Its first leader may or may not have recorded its group id yet: a
	// log of another group either way.
	if err == nil || !strings.HasPrefix(err.Error(), "ERR refusing "+member.id+" at "+impRaft+": ") ||
		!(strings.Contains(err.Error(), "raft log of another group") || strings.Contains(err.Error(), "raft log of its own")) ||
		!strings.Contains(err.Error(), group) || !strings.Contains(err.Error(), "data directory") {
		t.Fatalf("RAFT.JOIN %s %s (a process with a log of its own) = %v, want a refusal naming the other log, this group's id and what to do", member.id, impRaft, err)
	}
	poll.Until(t, 15*time.Second, func() error {
		if impInfo = raftInfo(imp); impInfo["raft_group_id"] == "" {
			return errors.New("the lone process has recorded no group id yet")
		}
		return nil
	})
	if len(group) != 32 || impInfo["raft_group_id"] == group {
		t.Fatalf("raft_group_id: the group's %q, the lone process's %q; want 32 hex digits each, different", group, impInfo["raft_group_id"])
	}
	err = noRetryClient(t, leader.Addr).Do(ctx, "RAFT.JOIN", member.id, impRaft, imp.Addr).Err()
	if err == nil || !strings.Contains(err.Error(), "raft log of another group (its raft_group_id is "+impInfo["raft_group_id"]+", this group's is "+group+")") {
		t.Fatalf("RAFT.JOIN %s %s again = %v, want a refusal naming both group ids", member.id, impRaft, err)
	}
	if got := memberRaftAddr(t, raftInfo(leader), member.id); got != own {
		t.Fatalf("the leader lists %s at %s after the refused join, want %s", member.id, got, own)
	}
	imp.kill()

	member.restart()
	poll.Until(t, 30*time.Second, func() error {
		v := raftInfo(leader)["raft_member_"+member.id]
		if !strings.Contains(v, "raft="+own+",") || !strings.Contains(v, "voter=1") || !strings.Contains(v, "reachable=1") {
			return fmt.Errorf("leader's view of %s = %q, want a reachable voter at %s", member.id, v, own)
		}
		inf := raftInfo(member)
		if inf["raft_state"] != "follower" || inf["raft_group_id"] != group {
			return fmt.Errorf("%s restarted: state %q, group id %q; want follower of group %s", member.id, inf["raft_state"], inf["raft_group_id"], group)
		}
		return nil
	})
	if r, err := throttle(ctx, noRetryClient(t, member.Addr), "own-log", 0, 1, 3600); err != nil || r[0] != 1 {
		t.Fatalf("CL.THROTTLE own-log on %s after its return = %v, %v; want limited (its state is the group's)", member.id, r, err)
	}
}
