package test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// movingNode is a cluster node whose IP address changes across restarts,
// as a pod's does: same node id, data directory and ports.
type movingNode struct {
	*clusterNode
	ip       string
	raftPort int
	extra    []string // flags after the placement's
}

// place sets the node's flags for ip, listing join (RESP addresses of the
// others) — where a StatefulSet's DNS names would point now.
func (m *movingNode) place(ip string, join []string) {
	m.ip = ip
	m.Addr = net.JoinHostPort(ip, strconv.Itoa(m.Port))
	m.args = []string{
		"--port", strconv.Itoa(m.Port), "--dir", m.Dir, "--bind", ip,
		"--node-id", m.id, "--raft-addr", net.JoinHostPort(ip, strconv.Itoa(m.raftPort)),
		"--bootstrap-expect", "3", "--join", strings.Join(join, ","),
	}
	m.args = append(m.args, m.extra...)
}

func (m *movingNode) raftAddr() string { return net.JoinHostPort(m.ip, strconv.Itoa(m.raftPort)) }

// othersOf returns the RESP addresses of every node but nodes[i].
func othersOf(nodes []*movingNode, i int) []string {
	var out []string
	for j, o := range nodes {
		if j != i {
			out = append(out, o.Addr)
		}
	}
	return out
}

// clientPool hands out one no-retry client per address, for the traffic
// of the rolling-restart test.
type clientPool struct {
	t  *testing.T
	mu sync.Mutex
	c  map[string]*redis.Client
}

func (p *clientPool) get(addr string) *redis.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.c[addr]; ok {
		return c
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 10 * time.Second, PoolSize: 20})
	p.t.Cleanup(func() { c.Close() })
	p.c[addr] = c
	return c
}

// A rolling restart where every node comes back at a new IP address (same
// node id, data directory and ports: a StatefulSet's pods, a DHCP lease, a
// compose restart): each rejoins by itself within 5 s — no RAFT.REMOVE or
// RAFT.JOIN — the quorum holds throughout, the 50 × 200 exactness test
// running across the restart never admits more than the limit, and a key
// exhausted before stays exhausted. With a cluster secret the leader's
// check of the new address is also an authentication.
func TestRollingRestartAtNewAddresses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"no secret", nil},
		{"cluster-secret", []string{"--cluster-secret", "s3cret"}},
	} {
		t.Run(tc.name, func(t *testing.T) { testRollingRestart(t, tc.extra) })
	}
}

func testRollingRestart(t *testing.T, extra []string) {
	const (
		clients, requests = 50, 200
		limit             = 4000 // of 10000 requests: exhausted midway
		rejoinBound       = 5 * time.Second
	)
	ips := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	moved := []string{"127.0.0.12", "127.0.0.13", "127.0.0.14"}
	nodes := make([]*movingNode, 3)
	for i := range nodes {
		id := "n" + strconv.Itoa(i+1)
		nodes[i] = &movingNode{clusterNode: &clusterNode{server: newServer(t), id: id}, raftPort: freePort(t), extra: extra}
		nodes[i].ip = ips[i]
		nodes[i].Addr = net.JoinHostPort(ips[i], strconv.Itoa(nodes[i].Port))
	}
	for i, nd := range nodes {
		nd.place(ips[i], othersOf(nodes, i))
		nd.launch()
	}
	plain := make([]*clusterNode, 3)
	for i, nd := range nodes {
		nd.waitReady()
		plain[i] = nd.clusterNode
	}
	waitMembers(t, plain, 3)
	l := waitLeader(t, plain)
	ctx := context.Background()
	if r, err := throttle(ctx, noRetryClient(t, nodes[l].Addr), "roll:exhausted", 0, 1, 3600); err != nil || r[0] != 0 {
		t.Fatalf("CL.THROTTLE roll:exhausted 0 1 3600 = %v, %v; want allowed", r, err)
	}

	// The traffic: 50 clients × 200 requests on one key, paced to span
	// the rolling restart; each client moves to another node when its
	// node fails it.
	pool := &clientPool{t: t, c: map[string]*redis.Client{}}
	var addrMu sync.Mutex
	addrs := []string{nodes[0].Addr, nodes[1].Addr, nodes[2].Addr}
	var allowed, denied, unknown atomic.Int64
	var wrong atomic.Value
	var wg sync.WaitGroup
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(75 * time.Millisecond)
			defer tick.Stop()
			at := g % 3
			for range requests {
				<-tick.C
				addrMu.Lock()
				addr := addrs[at]
				addrMu.Unlock()
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				r, err := throttle(cctx, pool.get(addr), "roll:exact", limit-1, 1, 3600)
				cancel()
				switch {
				case err != nil:
					unknown.Add(1) // applied or not: the client cannot tell
					at = (at + 1) % 3
				case len(r) != 5:
					wrong.Store(fmt.Sprintf("reply %v", r))
				case r[0] == 0:
					allowed.Add(1)
				default:
					denied.Add(1)
				}
			}
		}()
	}

	// The quorum: the longest stretch without a ready leader (an election
	// after the leader's restart takes one; a lost quorum would last).
	var longestLeaderless atomic.Int64
	// The watcher asks the nodes at their current addresses, which the
	// restarts below change: it reads them under placeMu, into nodes of its
	// own.
	var placeMu sync.Mutex
	placed := func() []*clusterNode {
		placeMu.Lock()
		defer placeMu.Unlock()
		out := make([]*clusterNode, len(plain))
		for i, nd := range plain {
			out[i] = &clusterNode{server: &server{Addr: nd.Addr}, id: nd.id}
		}
		return out
	}
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		since := time.Now()
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if leaderOf(placed()) >= 0 {
				since = time.Now()
			} else if d := time.Since(since); d > time.Duration(longestLeaderless.Load()) {
				longestLeaderless.Store(int64(d))
			}
		}
	}()
	var rejoins []time.Duration
	var earlier strings.Builder // the output of the runs before each restart
	for i, nd := range nodes {
		nd.stop() // SIGTERM, as a rolling update sends
		earlier.WriteString(nd.output.String())
		placeMu.Lock()
		nd.place(moved[i], othersOf(nodes, i))
		placeMu.Unlock()
		start := time.Now()
		nd.launch()
		nd.waitReady()
		c := noRetryClient(t, nd.Addr)
		var took time.Duration
		poll.Until(t, 30*time.Second, func() error {
			nd.failIfExited()
			l := leaderOf(plain)
			if l < 0 {
				return fmt.Errorf("no ready leader")
			}
			inf := raftInfo(plain[l])
			if got := memberRaftAddr(t, inf, nd.id); got != nd.raftAddr() {
				return fmt.Errorf("the leader %s lists %s at %s, want %s", plain[l].id, nd.id, got, nd.raftAddr())
			}
			// Its RESP address too: ROLE and CLUSTER replies send clients there.
			if m := inf["raft_member_"+nd.id]; !strings.Contains(m, "resp="+nd.Addr+",") || !strings.Contains(m, "voter=1") {
				return fmt.Errorf("the leader lists %s as %q, want resp=%s and voter=1", nd.id, m, nd.Addr)
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			r, err := throttle(cctx, c, "roll:exhausted", 0, 1, 3600)
			if err != nil {
				return fmt.Errorf("CL.THROTTLE via %s: %v", nd.id, err)
			}
			if r[0] != 1 {
				t.Fatalf("CL.THROTTLE roll:exhausted via %s after its restart = %v: admitted an exhausted key", nd.id, r)
			}
			took = time.Since(start)
			return nil
		})
		rejoins = append(rejoins, took)
		t.Logf("%s restarted at %s: rejoined %v after its launch", nd.id, nd.ip, took.Round(time.Millisecond))
		if took > rejoinBound {
			t.Errorf("%s rejoined %v after its launch at %s, want within %v\n%s", nd.id, took, nd.ip, rejoinBound, nd.output)
		}
		if !strings.Contains(nd.output.String(), "raft address changed since the configuration was written") {
			t.Errorf("%s did not log that its raft address changed:\n%s", nd.id, nd.output)
		}
		addrMu.Lock()
		addrs[i] = nd.Addr
		addrMu.Unlock()
		// Caught up before the next restart (what a readiness probe
		// waits for): the quorum then never depends on a lagging node.
		poll.Until(t, 30*time.Second, func() error {
			l := leaderOf(plain)
			if l < 0 {
				return fmt.Errorf("no ready leader")
			}
			want, _ := strconv.Atoi(raftInfo(plain[l])["raft_commit_index"])
			got, _ := strconv.Atoi(raftInfo(nd.clusterNode)["raft_applied_index"])
			if got < want {
				return fmt.Errorf("%s applied %d, leader committed %d", nd.id, got, want)
			}
			return nil
		})
	}
	wg.Wait()
	close(stopWatch)
	<-watchDone
	gap := time.Duration(longestLeaderless.Load())
	t.Logf("longest stretch without a ready leader: %v", gap.Round(time.Millisecond))
	if gap > rejoinBound {
		t.Errorf("no ready leader for %v during the rolling restart: the quorum was lost", gap)
	}
	if w := wrong.Load(); w != nil {
		t.Fatalf("unexpected CL.THROTTLE reply: %v", w)
	}
	a, d, u := allowed.Load(), denied.Load(), unknown.Load()
	t.Logf("across the rolling restart: %d allowed, %d denied, %d failed (outcome unknown); rejoins %v", a, d, u, rejoins)
	if a > limit {
		t.Errorf("allowed = %d, over the limit %d", a, limit)
	}
	if a+u < limit {
		t.Errorf("allowed %d + outcome unknown %d < limit %d: requests lost", a, u, limit)
	}
	if u == 0 && a != limit {
		t.Errorf("allowed = %d with no failed request, want exactly %d", a, limit)
	}
	for _, nd := range nodes {
		earlier.WriteString(nd.output.String())
	}
	if n := strings.Count(earlier.String(), "a member's raft address changed"); n != len(nodes) {
		t.Errorf("leaders logged %d address changes, want %d", n, len(nodes))
	}
	// Every node, at its new address, still refuses both keys.
	for _, nd := range nodes {
		c := noRetryClient(t, nd.Addr)
		for _, k := range []struct {
			key   string
			burst int
		}{{"roll:exhausted", 0}, {"roll:exact", limit - 1}} {
			r, err := throttle(ctx, c, k.key, k.burst, 1, 3600)
			if err != nil || r[0] != 1 {
				t.Errorf("CL.THROTTLE %s via %s at the end = %v, %v; want limited", k.key, nd.id, r, err)
			}
		}
	}
}

// An advertised host name stays a name: the raft configuration lists
// localhost:port, not the address it resolved to at start-up.
func TestAdvertisedNameKept(t *testing.T) {
	nodes := make([]*clusterNode, 3)
	for i := range nodes {
		id := "n" + strconv.Itoa(i+1)
		port := strconv.Itoa(freePort(t))
		args := []string{"--node-id", id, "--raft-addr", "127.0.0.1:" + port, "--raft-advertise", "localhost:" + port, "--bootstrap-expect", "3"}
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
		nd.launch()
	}
	for _, nd := range nodes {
		nd.waitReady()
	}
	waitMembers(t, nodes, 3)
	inf := raftInfo(nodes[waitLeader(t, nodes)])
	for _, nd := range nodes {
		if got := memberRaftAddr(t, inf, nd.id); !strings.HasPrefix(got, "localhost:") {
			t.Errorf("the configuration lists %s at %s, want its advertised name localhost:port", nd.id, got)
		}
	}
}
