package test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

// startJoinedCluster starts n nodes at once, each with --join listing the
// others and the flags mode gives node i (0-based), and waits until all
// are members.
func startJoinedCluster(t *testing.T, n int, mode func(i int) []string) []*clusterNode {
	t.Helper()
	nodes := make([]*clusterNode, n)
	for i := range nodes {
		id := "n" + strconv.Itoa(i+1)
		args := append([]string{"--node-id", id, "--raft-addr", "127.0.0.1:" + strconv.Itoa(freePort(t))}, mode(i)...)
		nodes[i] = &clusterNode{server: newServer(t, args...), id: id}
	}
	for i, nd := range nodes {
		var others []string
		for j, o := range nodes {
			if j != i {
				others = append(others, o.Addr)
			}
		}
		nd.args = append(nd.args, "--join", strings.Join(others, ","))
	}
	for _, nd := range nodes {
		nd.launch()
	}
	for _, nd := range nodes {
		nd.waitReady()
	}
	waitMembers(t, nodes, n)
	return nodes
}

// The wiped-bootstrap-node scenario: a three-node cluster started with
// --bootstrap-expect 3 (the recommended start), or with --bootstrap yes on
// n1, every node listing the others in --join, exhausts a key; n2 and n3
// freeze (SIGSTOP); n1 is killed, its data directory wiped, and restarted
// with its usual flags. It must not form a cluster of its own nor admit a
// single request on the key (commands answer CLUSTERDOWN); once n2 and n3
// resume, it rejoins them and the key is still exhausted.
func TestWipedNodeDoesNotForkCluster(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode func(i int) []string
	}{
		{"bootstrap-expect 3", func(int) []string { return []string{"--bootstrap-expect", "3"} }},
		{"bootstrap yes on n1", func(i int) []string {
			if i == 0 {
				return []string{"--bootstrap", "yes"}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testWipedNodeDoesNotFork(t, tc.mode) })
	}
}

func testWipedNodeDoesNotFork(t *testing.T, mode func(i int) []string) {
	nodes := startJoinedCluster(t, 3, mode)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	ctx := context.Background()
	l := waitLeader(t, nodes)
	lc := noRetryClient(t, nodes[l].Addr)
	// CL.THROTTLE user:1 0 1 60: one request per 60 s.
	if r, err := throttle(ctx, lc, "user:1", 0, 1, 60); err != nil || r[0] != 0 {
		t.Fatalf("CL.THROTTLE user:1 0 1 60 (first) = %v, %v; want allowed", r, err)
	}
	if r, err := throttle(ctx, lc, "user:1", 0, 1, 60); err != nil || r[0] != 1 {
		t.Fatalf("CL.THROTTLE user:1 0 1 60 (second) = %v, %v; want limited", r, err)
	}
	// Every node has applied it, so the peers hold it whoever led.
	poll.Until(t, 15*time.Second, func() error {
		want := raftInfo(nodes[l])["raft_commit_index"]
		for _, nd := range nodes {
			if got := raftInfo(nd)["raft_applied_index"]; got != want {
				return fmt.Errorf("%s applied %s, leader committed %s", nd.id, got, want)
			}
		}
		return nil
	})

	for _, nd := range []*clusterNode{n2, n3} {
		pid := nd.cmd.Process.Pid
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP %s: %v", nd.id, err)
		}
	}
	n1.kill()
	if err := os.RemoveAll(n1.Dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(n1.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n1.restart()

	// It waits for its peers, and says so.
	poll.Until(t, 30*time.Second, func() error {
		if !strings.Contains(n1.output.String(), "not in a cluster yet") {
			return fmt.Errorf("n1 has not reported waiting for its peers:\n%s", n1.output)
		}
		return nil
	})
	c1 := noRetryClient(t, n1.Addr)
	for i := range 3 {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		r, err := throttle(cctx, c1, "user:1", 0, 1, 60)
		cancel()
		if err == nil {
			t.Fatalf("CL.THROTTLE user:1 on the wiped n1 (attempt %d) = %v; want an error (no cluster to decide in)", i+1, r)
		}
		if !strings.HasPrefix(err.Error(), "CLUSTERDOWN") {
			t.Errorf("CL.THROTTLE user:1 on the wiped n1 (attempt %d): %v; want CLUSTERDOWN", i+1, err)
		}
	}
	inf := raftInfo(n1)
	if inf["raft_members"] != "0" || inf["raft_leader_id"] != "" || inf["raft_state"] == "leader" {
		t.Fatalf("wiped n1 while its peers are frozen: %q members, leader %q, state %q; want no cluster",
			inf["raft_members"], inf["raft_leader_id"], inf["raft_state"])
	}
	if strings.Contains(n1.output.String(), "bootstrapped a new cluster") {
		t.Fatalf("wiped n1 bootstrapped a cluster of its own:\n%s", n1.output)
	}

	for _, nd := range []*clusterNode{n2, n3} {
		if err := syscall.Kill(nd.cmd.Process.Pid, syscall.SIGCONT); err != nil {
			t.Fatalf("SIGCONT %s: %v", nd.id, err)
		}
	}
	waitMembers(t, nodes, 3)
	if strings.Contains(n1.output.String(), "bootstrapped a new cluster") {
		t.Fatalf("wiped n1 bootstrapped a cluster of its own:\n%s", n1.output)
	}
	for _, nd := range nodes {
		c := noRetryClient(t, nd.Addr)
		var r []int64
		poll.Until(t, 20*time.Second, func() error {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			var err error
			r, err = throttle(cctx, c, "user:1", 0, 1, 60)
			return err
		})
		if r[0] != 1 {
			t.Fatalf("CL.THROTTLE user:1 0 1 60 via %s after n1 rejoined = %v; want still limited", nd.id, r)
		}
	}
}
