package test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// traffic drives keys of one group without pause until stopped, through
// a plain client of its leader and a ClusterClient of its own, and records
// every failure.
type traffic struct {
	mu       sync.Mutex
	ok       int
	failures []string
	worst    time.Duration
	stop     chan struct{}
	wg       sync.WaitGroup
}

// startTraffic starts one goroutine per client; each sends CL.THROTTLE
// over keys (a limit far above what it sends) one at a time.
func startTraffic(plain *redis.Client, cc *redis.ClusterClient, keys []string) *traffic {
	tr := &traffic{stop: make(chan struct{})}
	for _, do := range []func(context.Context, ...any) *redis.Cmd{plain.Do, cc.Do} {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-tr.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				t0 := time.Now()
				_, err := do(ctx, "CL.THROTTLE", keys[i%len(keys)], 999999, 1, 1).Int64Slice()
				d := time.Since(t0)
				cancel()
				tr.record(d, err)
			}
		}()
	}
	return tr
}

func (tr *traffic) record(d time.Duration, err error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.worst = max(tr.worst, d)
	if err != nil {
		tr.failures = append(tr.failures, err.Error())
	} else {
		tr.ok++
	}
}

// end stops the goroutines and returns the successes, failures and the
// slowest request.
func (tr *traffic) end() (int, []string, time.Duration) {
	close(tr.stop)
	tr.wg.Wait()
	return tr.ok, tr.failures, tr.worst
}

// kill -9 of group a's leader: a key of a exhausted before stays exhausted
// after the failover; group b's clients see no failure throughout; within
// 2 s of a's new leader every live node's CLUSTER SLOTS, and every MOVED
// from group b, names it; the ClusterClient follows it.
func TestGroupsFailover(t *testing.T) {
	groups := startGroups(t, 2)
	a, b := groups[0], groups[1]
	ctx := ctxT(t)
	cc := newClusterClient(t, groups, nil)

	ka := keysIn(a, "fo", 1)[0]
	if v, err := cc.Do(ctx, "CL.THROTTLE", ka, 0, 1, 60).Int64Slice(); err != nil || v[0] != 0 {
		t.Fatalf("CL.THROTTLE %s 0 1 60 (first) = %v, %v; want allowed", ka, v, err)
	}
	r1, err := cc.Do(ctx, "CL.THROTTLE", ka, 0, 1, 60).Int64Slice()
	if err != nil || r1[0] != 1 {
		t.Fatalf("CL.THROTTLE %s 0 1 60 (second) = %v, %v; want limited", ka, r1, err)
	}

	bl := b.leader(t)
	bcc := newClusterClient(t, groups, &redis.ClusterOptions{MaxRedirects: -1})
	tr := startTraffic(noRetryClient(t, bl.Addr), bcc, keysIn(b, "fob", 50))
	defer func() {
		if tr != nil {
			tr.end()
		}
	}()

	old := a.leader(t)
	old.kill()
	killed := time.Now()
	survivors := a.others(old)
	var nl *clusterNode
	poll.Until(t, 30*time.Second, func() error {
		if i := leaderOf(survivors); i >= 0 {
			nl = survivors[i]
			return nil
		}
		return fmt.Errorf("group a has no new leader since the kill")
	})
	elected := time.Now()
	t.Logf("group a: %s leads %v after kill -9 of %s", nl.id, elected.Sub(killed), old.id)

	// Every live node names the new leader, in CLUSTER SLOTS and in MOVED.
	leaders := map[string]*clusterNode{"a": nl, "b": bl}
	poll.Until(t, 30*time.Second, func() error {
		for _, nd := range allNodes(groups) {
			if !nd.alive() {
				continue
			}
			if err := checkGroupSlots(nd, groups, leaders); err != nil {
				return err
			}
		}
		for _, nd := range b.nodes {
			want := fmt.Sprintf("MOVED %d %s", keySlot(ka), nl.Addr)
			c := quickClient(nd.Addr)
			_, err := c.Do(ctx, "CL.THROTTLE", ka, 0, 1, 60).Result()
			c.Close()
			if err == nil || err.Error() != want {
				return fmt.Errorf("%s: CL.THROTTLE %s = %v, want %q", nd.id, ka, err, want)
			}
		}
		return nil
	})
	// The contract's bound is 2 s; the failure bound allows a loaded
	// machine (two CPUs, six servers) some slack, and the figure is logged.
	took := time.Since(elected)
	t.Logf("every live node named the new leader %v after it was ready", took)
	if took > 4*time.Second {
		t.Errorf("nodes named group a's new leader %v after it was ready, want within 2 s (failure bound 4 s)", took)
	}

	// The ClusterClient follows; the exhausted key is still exhausted.
	var r2 []int64
	poll.Until(t, 30*time.Second, func() error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var err error
		r2, err = cc.Do(cctx, "CL.THROTTLE", ka, 0, 1, 60).Int64Slice()
		return err
	})
	elapsed := int64(time.Since(killed)/time.Second) + 2
	if r2[0] != 1 || r2[3] > r1[3] || r2[3] < r1[3]-elapsed {
		t.Errorf("CL.THROTTLE %s 0 1 60 after failover = %v; want limited with retry_after in [%d, %d]", ka, r2, r1[3]-elapsed, r1[3])
	}
	for i, k := range keysIn(a, "fresh", 20) {
		if v, err := cc.Do(ctx, "CL.THROTTLE", k, 0, 1, 60).Int64Slice(); err != nil || v[0] != 0 {
			t.Fatalf("ClusterClient CL.THROTTLE %s (fresh key %d of a) after failover = %v, %v; want allowed", k, i, v, err)
		}
	}

	ok, failures, worst := tr.end()
	tr = nil
	t.Logf("group b during the failover: %d requests answered, %d failed, slowest %v", ok, len(failures), worst)
	if len(failures) > 0 {
		t.Errorf("group b noticed group a's failover: %d requests failed, first: %s", len(failures), failures[0])
	}
	if ok < 20 {
		t.Errorf("group b answered only %d requests during the failover", ok)
	}
}

// A node of group b started with --join naming a node of group a is
// refused: it says why, and group a's membership and topology stay as
// they were.
func TestGroupsJoinOtherGroup(t *testing.T) {
	groups := startGroups(t, 1)
	a := groups[0]
	x := newServer(t, "--group", "b", "--node-id", "b9", "--raft-addr", "127.0.0.1:"+strconv.Itoa(freePort(t)),
		"--join", a.nodes[1].Addr)
	x.launch()
	var refusal string
	poll.Until(t, 20*time.Second, func() error {
		exited := !(&clusterNode{server: x}).alive()
		for _, line := range strings.Split(x.output.String(), "\n") {
			l := strings.ToLower(line)
			if strings.Contains(l, "group") && (exited || strings.Contains(l, "level=warn") || strings.Contains(l, "level=error")) {
				refusal = line
				return nil
			}
		}
		return fmt.Errorf("no warning or error about the group from the joining node (exited: %v); output:\n%s", exited, x.output)
	})
	t.Logf("the node of group b says: %s", refusal)

	// Whatever it does next (retry, exit), it is no member of a.
	id := clusterIDOf("b", "b9")
	for _, nd := range a.nodes {
		inf := raftInfo(nd)
		if inf["raft_members"] != "3" || inf["raft_member_b9"] != "" {
			t.Errorf("%s: RAFT.INFO raft_members %q, raft_member_b9 %q; want 3 members, not b9", nd.id, inf["raft_members"], inf["raft_member_b9"])
		}
		c := quickClient(nd.Addr)
		text, err := c.ClusterNodes(context.Background()).Result()
		c.Close()
		if err != nil || strings.Count(text, "\n") != 3 || strings.Contains(text, id) || strings.Contains(text, x.Addr) {
			t.Errorf("%s: CLUSTER NODES = %v\n%s\nwant the 3 nodes of a only", nd.id, err, text)
		}
	}
	xi := raftInfo(&clusterNode{server: x, id: "b9"})
	if xi["raft_leader_resp_addr"] != "" && xi["raft_leader_resp_addr"] != x.Addr {
		t.Errorf("b9 follows the leader at %s (group a): RAFT.INFO %v", xi["raft_leader_resp_addr"], xi)
	}
}
