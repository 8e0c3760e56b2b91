package test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

// probe GETs path on a metrics address and returns the status code and body
// (code 0 when the request fails).
func probe(addr, path string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	r, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, strings.TrimSpace(string(b))
}

// waitProbe polls path until it answers code.
func waitProbe(t *testing.T, who, addr, path string, code int, within time.Duration) {
	t.Helper()
	poll.Until(t, within, func() error {
		if got, body := probe(addr, path); got != code {
			return fmt.Errorf("%s GET %s = %d %q, want %d", who, path, got, body, code)
		}
		return nil
	})
}

// /readyz on a cluster member: 503 while it knows no leader (alone, waiting
// for --bootstrap-expect; again when its peers freeze), 200 once it follows
// or is the leader and has applied the log up to it, and a member that
// reads ready has applied what the leader had committed. /healthz is 200
// throughout.
func TestReadyzFollowsLeader(t *testing.T) {
	nodes := make([]*clusterNode, 3)
	metricsAddr := make([]string, 3)
	for i := range nodes {
		id := "n" + strconv.Itoa(i+1)
		metricsAddr[i] = "127.0.0.1:" + strconv.Itoa(freePort(t))
		nodes[i] = &clusterNode{id: id, server: newServer(t, "--node-id", id,
			"--raft-addr", "127.0.0.1:"+strconv.Itoa(freePort(t)),
			"--bootstrap-expect", "3", "--metrics-addr", metricsAddr[i])}
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
	// n1 alone: alive, not ready.
	nodes[0].start()
	waitProbe(t, "n1", metricsAddr[0], "/healthz", 200, 10*time.Second)
	for range 3 {
		if code, body := probe(metricsAddr[0], "/readyz"); code != 503 || !strings.Contains(body, "no leader") {
			t.Fatalf("n1 alone: GET /readyz = %d %q, want 503 no leader known", code, body)
		}
		time.Sleep(200 * time.Millisecond) // it stays so: sampled a few times
	}
	nodes[1].start()
	nodes[2].start()
	for i, nd := range nodes {
		waitProbe(t, nd.id, metricsAddr[i], "/readyz", 200, 30*time.Second)
	}
	l := waitLeader(t, nodes)
	c := noRetryClient(t, nodes[l].Addr)
	for i := range 20 {
		if _, err := throttle(ctxT(t), c, "user:"+strconv.Itoa(i), 5, 10, 60); err != nil {
			t.Fatal(err)
		}
	}
	committed, _ := strconv.ParseUint(raftInfo(nodes[l])["raft_commit_index"], 10, 64)
	// A follower learns the commit index with the next append or
	// heartbeat; once it has learnt the leader's, reading ready means it
	// has applied that far.
	for i, nd := range nodes {
		poll.Until(t, 15*time.Second, func() error {
			if known, _ := strconv.ParseUint(raftInfo(nd)["raft_commit_index"], 10, 64); known < committed {
				return fmt.Errorf("%s knows commit index %d, leader committed %d", nd.id, known, committed)
			}
			return nil
		})
		waitProbe(t, nd.id, metricsAddr[i], "/readyz", 200, 15*time.Second)
		if applied, _ := strconv.ParseUint(raftInfo(nd)["raft_applied_index"], 10, 64); applied < committed {
			t.Errorf("%s reads ready having applied %d, leader committed %d", nd.id, applied, committed)
		}
	}

	// The leader's peers freeze: it steps down and knows no leader, so it
	// is not ready; it stays alive.
	for i, nd := range nodes {
		if i == l {
			continue
		}
		pid := nd.cmd.Process.Pid
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	waitProbe(t, nodes[l].id, metricsAddr[l], "/readyz", 503, 30*time.Second)
	if code, _ := probe(metricsAddr[l], "/healthz"); code != 200 {
		t.Errorf("%s without quorum: GET /healthz = %d, want 200", nodes[l].id, code)
	}
	for i, nd := range nodes {
		if i != l {
			_ = syscall.Kill(nd.cmd.Process.Pid, syscall.SIGCONT)
		}
	}
	for i, nd := range nodes {
		waitProbe(t, nd.id, metricsAddr[i], "/readyz", 200, 30*time.Second)
	}
}

// /readyz standalone: 200 once the server serves (its snapshot loaded).
func TestReadyzStandalone(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	startServer(t, "--metrics-addr", addr)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := probe(addr, path); code != 200 {
			t.Errorf("GET %s = %d %q, want 200", path, code, body)
		}
	}
}
