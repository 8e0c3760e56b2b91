package replication

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/internal/testlog"
	"github.com/cellserver/cellserver/shards"
)

func TestDecide(t *testing.T) {
	hello := func(id string, expect int) Hello {
		return Hello{ID: id, RaftAddr: "r-" + id, RespAddr: "p-" + id, BootstrapExpect: expect}
	}
	member := func(h Hello) Hello { h.Member = true; return h }
	alone := func(h Hello) Hello { h.Bootstrap = true; return h }
	ans := func(h Hello) peerAnswer { return peerAnswer{addr: h.RespAddr, hello: h} }
	down := func(addr string) peerAnswer { return peerAnswer{addr: addr, err: errors.New("connection refused")} }
	servers := func(ids ...string) []raft.Server {
		var s []raft.Server
		for _, id := range ids {
			s = append(s, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress("r-" + id)})
		}
		return s
	}
	tests := []struct {
		name    string
		self    Hello
		answers []peerAnswer
		want    decision // why is matched as a substring
	}{
		{"expect 3, all fresh: bootstrap all, sorted", hello("b", 3), []peerAnswer{ans(hello("c", 3)), ans(hello("a", 3))},
			decision{act: actBootstrap, servers: servers("a", "b", "c")}},
		{"a member wins", hello("a", 3), []peerAnswer{ans(hello("b", 3)), ans(member(hello("c", 0)))},
			decision{act: actJoin, via: "p-c"}},
		{"a member wins over an unreachable peer", hello("a", 3), []peerAnswer{down("p-b"), ans(member(hello("c", 3)))},
			decision{act: actJoin, via: "p-c"}},
		{"an unreachable peer: wait", hello("a", 3), []peerAnswer{ans(hello("b", 3)), down("p-c")},
			decision{why: "no answer from p-c"}},
		{"another expect: wait", hello("a", 3), []peerAnswer{ans(hello("b", 3)), ans(hello("c", 5))},
			decision{why: "bootstrap-expect 5"}},
		{"too few distinct nodes: wait", hello("a", 3), []peerAnswer{ans(hello("b", 3)), ans(hello("b", 3))},
			decision{why: "2 nodes without raft state"}},
		{"too many nodes: wait", hello("a", 2), []peerAnswer{ans(hello("b", 2)), ans(hello("c", 2))},
			decision{why: "3 nodes without raft state"}},
		{"itself listed: counted once", hello("a", 2), []peerAnswer{ans(hello("a", 2)), ans(hello("b", 2))},
			decision{act: actBootstrap, servers: servers("a", "b")}},
		{"one id at two raft addresses: wait", hello("a", 2), []peerAnswer{{addr: "p-x", hello: Hello{ID: "a", RaftAddr: "elsewhere", BootstrapExpect: 2}}, ans(hello("b", 2))},
			decision{why: "two raft addresses"}},
		{"bootstrap alone, peers fresh joiners", alone(hello("b", 0)), []peerAnswer{ans(hello("a", 0)), ans(hello("c", 0))},
			decision{act: actBootstrap, servers: servers("b")}},
		{"bootstrap alone, a member listed: join", alone(hello("a", 0)), []peerAnswer{ans(member(hello("b", 0)))},
			decision{act: actJoin, via: "p-b"}},
		{"bootstrap alone, a peer unreachable: wait", alone(hello("a", 0)), []peerAnswer{ans(hello("b", 0)), down("p-c")},
			decision{why: "no answer from p-c"}},
		{"bootstrap alone, a smaller id would too: wait for it", alone(hello("b", 0)), []peerAnswer{ans(alone(hello("a", 0)))},
			decision{why: "node a would bootstrap too"}},
		{"bootstrap alone, a larger id would too: go first", alone(hello("a", 0)), []peerAnswer{ans(alone(hello("b", 0)))},
			decision{act: actBootstrap, servers: servers("a")}},
		{"expect 1 is bootstrap alone", alone(hello("a", 1)), []peerAnswer{ans(hello("b", 0))},
			decision{act: actBootstrap, servers: servers("a")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(tc.self, tc.answers)
			if got.act != tc.want.act || got.via != tc.want.via || !slices.Equal(got.servers, tc.want.servers) ||
				(tc.want.act == actWait && !strings.Contains(got.why, tc.want.why)) {
				t.Errorf("decide(%s) = %+v, want %+v", tc.self.ID, got, tc.want)
			}
		})
	}
	// Every node of a fresh set of three reaches the same configuration.
	all := []Hello{hello("n2", 3), hello("n0", 3), hello("n1", 3)}
	var first []raft.Server
	for i, self := range all {
		var answers []peerAnswer
		for j, o := range all {
			if j != i {
				answers = append(answers, ans(o))
			}
		}
		d := decide(self, answers)
		if d.act != actBootstrap {
			t.Fatalf("decide(%s) = %+v, want bootstrap", self.ID, d)
		}
		if first == nil {
			first = d.servers
		} else if !slices.Equal(d.servers, first) {
			t.Errorf("decide(%s) bootstraps %v, another node %v", self.ID, d.servers, first)
		}
	}
}

func TestHelloFieldsRoundTrip(t *testing.T) {
	flat := func(h Hello) []string {
		var v []string
		for _, kv := range h.Fields() {
			v = append(v, kv[0], kv[1])
		}
		return v
	}
	for _, h := range []Hello{
		{ID: "n1", RaftAddr: "127.0.0.1:8001", RespAddr: "127.0.0.1:7001"},
		{ID: "n2", RaftAddr: "h:1", RespAddr: "h:2", Member: true, LeaderID: "n1", BootstrapExpect: 3, Bootstrap: true},
	} {
		if got, err := decodeHello(flat(h)); err != nil || got != h {
			t.Errorf("decodeHello(Fields(%+v)) = %+v, %v", h, got, err)
		}
	}
	for _, bad := range [][]string{
		{"id"},
		{"id", "n1"},
		{"id", "n1", "raft-addr", "h:1", "member", "yes"},
		{"id", "n1", "raft-addr", "h:1", "bootstrap-expect", "x"},
	} {
		if h, err := decodeHello(bad); err == nil {
			t.Errorf("decodeHello(%q) = %+v, want an error", bad, h)
		}
	}
	// Unknown fields are ignored (a later version may add some).
	if h, err := decodeHello([]string{"id", "n1", "raft-addr", "h:1", "zone", "eu"}); err != nil || h.ID != "n1" {
		t.Errorf("decodeHello with an unknown field = %+v, %v", h, err)
	}
}

func TestConfigValidateBootstrap(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"bootstrap alone", func(c *Config) { c.Bootstrap = true }, ""},
		{"bootstrap with join", func(c *Config) { c.Bootstrap, c.Join = true, "127.0.0.1:7002,127.0.0.1:7003" }, ""},
		{"one join address", func(c *Config) { c.Join = "127.0.0.1:7002" }, ""},
		{"join list with spaces", func(c *Config) { c.Join = "127.0.0.1:7002, 127.0.0.1:7003" }, ""},
		{"expect 3 with two peers", func(c *Config) { c.BootstrapExpect, c.Join = 3, "127.0.0.1:7002,127.0.0.1:7003" }, ""},
		{"expect 3 listing itself too", func(c *Config) { c.BootstrapExpect, c.Join = 3, "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003" }, ""},
		{"expect 1 alone", func(c *Config) { c.BootstrapExpect = 1 }, ""},
		{"negative expect", func(c *Config) { c.BootstrapExpect = -1 }, "BootstrapExpect must not be negative"},
		{"expect 3 without join", func(c *Config) { c.BootstrapExpect = 3 }, "needs the RESP addresses of the 2 other nodes"},
		{"expect 3 listing only itself and one", func(c *Config) { c.BootstrapExpect, c.Join = 3, "127.0.0.1:7001,127.0.0.1:7002" }, "it lists 1"},
		{"bootstrap and expect", func(c *Config) { c.Bootstrap, c.BootstrapExpect, c.Join = true, 3, "127.0.0.1:7002,127.0.0.1:7003" }, "exclusive"},
		{"empty join element", func(c *Config) { c.Join = "127.0.0.1:7002,,127.0.0.1:7003" }, "empty address"},
		{"join without a port", func(c *Config) { c.Join = "127.0.0.1" }, "Join"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig("n1", t.TempDir(), "127.0.0.1:7001")
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// prepare adds n nodes to c without starting them: their RESP listeners
// are open (so every address is known before any node starts) and their
// raft ports fixed.
func (c *testCluster) prepare(n int) []net.Listener {
	c.t.Helper()
	var lns []net.Listener
	for range n {
		tn := &testNode{id: fmt.Sprintf("n%d", len(c.nodes)), dir: c.t.TempDir(), clock: &testClock{}, logs: &testlog.Buffer{}}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			c.t.Fatal(err)
		}
		tn.respAddr = ln.Addr().String()
		c.nodes = append(c.nodes, tn)
		lns = append(lns, ln)
	}
	return lns
}

// startAs starts node i on ln (nil: listen again on its RESP address) with
// the test configuration edited by edit.
func (c *testCluster) startAs(i int, ln net.Listener, edit func(*Config)) *Node {
	c.t.Helper()
	tn := c.nodes[i]
	if ln == nil {
		poll.Until(c.t, 5*time.Second, func() error { // the port is being released
			var err error
			ln, err = net.Listen("tcp", tn.respAddr)
			return err
		})
	}
	cfg := testConfig(tn.id, tn.dir, tn.respAddr)
	edit(&cfg)
	c.start(tn, cfg, ln)
	return tn.node
}

// others returns the RESP addresses of every node but i, comma-separated.
func (c *testCluster) others(i int) string {
	var out []string
	for j, tn := range c.nodes {
		if j != i {
			out = append(out, tn.respAddr)
		}
	}
	return strings.Join(out, ",")
}

// loneLeaderWatch samples nodes until stopped and remembers whether any was
// ever the leader of a configuration of one server: a node that
// bootstrapped alone.
type loneLeaderWatch struct {
	stopCh  chan struct{}
	stopped sync.Once
	done    chan struct{}
	mu      sync.Mutex
	seen    string // guarded by mu
}

// watchLoneLeader starts a watch over nodes; it stops at the end of the test
// at the latest.
func watchLoneLeader(t *testing.T, nodes ...*Node) *loneLeaderWatch {
	w := &loneLeaderWatch{stopCh: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() { w.stop() })
	go func() {
		defer close(w.done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, n := range nodes {
				if n.raft.State() != raft.Leader {
					continue
				}
				if cf := n.raft.GetConfiguration(); cf.Error() == nil && len(cf.Configuration().Servers) == 1 {
					w.mu.Lock()
					w.seen = fmt.Sprintf("%s led a configuration of itself alone: %v", n.cfg.NodeID, cf.Configuration().Servers)
					w.mu.Unlock()
				}
			}
			select {
			case <-w.stopCh:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// stop ends the watch and returns what it saw ("" if nothing wrong).
func (w *loneLeaderWatch) stop() string {
	w.stopped.Do(func() { close(w.stopCh) })
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// memberIDs returns the ids of n's raft configuration, sorted.
func memberIDs(n *Node) []string {
	var ids []string
	for _, m := range n.Info().Members {
		ids = append(ids, m.ID)
	}
	return ids
}

// Three nodes started with BootstrapExpect 3 and each other's addresses
// form one cluster whatever the order they start in; none bootstraps before
// all three answered.
func TestBootstrapExpectFormsOneCluster(t *testing.T) {
	for _, order := range [][]int{{0, 1, 2}, {2, 0, 1}} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			c := &testCluster{t: t}
			_ = t.TempDir() // removed after closeAll (see newTestCluster)
			t.Cleanup(c.closeAll)
			lns := c.prepare(3)
			var started []*Node
			var watch *loneLeaderWatch
			for k, i := range order {
				n := c.startAs(i, lns[i], func(cfg *Config) { cfg.BootstrapExpect, cfg.Join = 3, c.others(i) })
				started = append(started, n)
				if k == 0 {
					// Alone, it asks and waits: its log says for whom.
					poll.Until(t, 15*time.Second, func() error {
						if !strings.Contains(c.nodes[i].logs.String(), "not in a cluster yet") {
							return errors.New("first node has not reported waiting")
						}
						return nil
					})
					if n.boot.hasConfiguration() || n.raft.State() == raft.Leader {
						t.Fatalf("%s alone: configuration %v, state %v; want none, follower", c.nodes[i].id, memberIDs(n), n.raft.State())
					}
				}
				if k == 1 {
					watch = watchLoneLeader(t, started...)
				}
			}
			c.waitMembers(3, 30*time.Second)
			if seen := watch.stop(); seen != "" {
				t.Fatal(seen)
			}
			l := c.WaitForLeader(10 * time.Second)
			for _, tn := range c.nodes {
				if ids := memberIDs(tn.node); !slices.Equal(ids, []string{"n0", "n1", "n2"}) {
					t.Errorf("%s's configuration = %v, want [n0 n1 n2]", tn.id, ids)
				}
				if got := strings.Count(tn.logs.String(), "bootstrapped a new cluster"); got > 1 {
					t.Errorf("%s bootstrapped %d times", tn.id, got)
				}
				if tn.node.Info().LeaderID != c.nodes[l].id {
					t.Errorf("%s follows %q, want %s", tn.id, tn.node.Info().LeaderID, c.nodes[l].id)
				}
			}
			if r, err := write(t, c.nodes[order[0]].node, throttle("k", 0, 1, 60, 1)); err != nil || r.Limited {
				t.Fatalf("write = %+v, %v; want allowed", r, err)
			}
		})
	}
}

// exhaust makes key limited (CL.THROTTLE key 0 1 60, twice) through n.
func exhaust(t *testing.T, n *Node, key string) {
	t.Helper()
	if r, err := write(t, n, throttle(key, 0, 1, 60, 1)); err != nil || r.Limited {
		t.Fatalf("first request on %s = %+v, %v; want allowed", key, r, err)
	}
	if r, err := write(t, n, throttle(key, 0, 1, 60, 1)); err != nil || !r.Limited {
		t.Fatalf("second request on %s = %+v, %v; want limited", key, r, err)
	}
}

// wipe deletes node i's raft state (it must be stopped).
func (c *testCluster) wipe(i int) {
	c.t.Helper()
	dir := c.nodes[i].dir
	if err := os.RemoveAll(dir); err != nil {
		c.t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
}

// wipedRestart is a way to restart node 0 after its data directory was
// wiped: edit sets its configuration.
type wipedRestart struct {
	name string
	edit func(c *testCluster) func(*Config)
}

// wipedRestarts are the two safe ones: BootstrapExpect, or Bootstrap with
// the others listed.
func wipedRestarts() []wipedRestart {
	return []wipedRestart{
		{"bootstrap-expect 3", func(c *testCluster) func(*Config) {
			return func(cfg *Config) { cfg.BootstrapExpect, cfg.Join = 3, c.others(0) }
		}},
		{"bootstrap yes with join", func(c *testCluster) func(*Config) {
			return func(cfg *Config) { cfg.Bootstrap, cfg.Join = true, c.others(0) }
		}},
	}
}

// A node whose data directory was wiped, restarted with BootstrapExpect or
// with Bootstrap and the others listed, finds the cluster and joins it; at
// no moment does it lead a cluster of its own, and the key the cluster
// exhausted stays exhausted through it.
func TestWipedNodeJoinsNeverBootstraps(t *testing.T) {
	for _, tc := range wipedRestarts() {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, 3, nil)
			exhaust(t, c.nodes[c.WaitForLeader(10*time.Second)].node, "user:1")
			c.waitConverged(10 * time.Second)
			c.stop(0)
			c.wipe(0)
			n := c.startAs(0, nil, tc.edit(c))
			watch := watchLoneLeader(t, n)
			c.waitMembers(3, 30*time.Second)
			if seen := watch.stop(); seen != "" {
				t.Fatal(seen)
			}
			if logs := c.nodes[0].logs.String(); strings.Count(logs, "bootstrapped a new cluster") > 1 {
				t.Fatalf("the wiped node bootstrapped again:\n%s", logs)
			}
			if ids := memberIDs(n); !slices.Equal(ids, []string{"n0", "n1", "n2"}) {
				t.Fatalf("wiped node's configuration = %v, want [n0 n1 n2]", ids)
			}
			if r, err := write(t, n, throttle("user:1", 0, 1, 60, 1)); err != nil || !r.Limited {
				t.Fatalf("request through the wiped node = %+v, %v; want limited", r, err)
			}
		})
	}
}

// A wiped node whose peers are all unreachable waits: no configuration, no
// leader, commands fail with ErrNoLeader within NoLeaderTimeout. Once the
// peers are back it joins them.
func TestWipedNodeWaitsForUnreachablePeers(t *testing.T) {
	for _, tc := range wipedRestarts() {
		t.Run(tc.name, func(t *testing.T) { testWipedNodeWaits(t, tc.edit) })
	}
}

func testWipedNodeWaits(t *testing.T, edit func(c *testCluster) func(*Config)) {
	c := newTestCluster(t, 3, nil)
	exhaust(t, c.nodes[c.WaitForLeader(10*time.Second)].node, "user:1")
	c.waitConverged(10 * time.Second)
	for i := range c.nodes {
		c.stop(i)
	}
	c.wipe(0)
	n := c.startAs(0, nil, edit(c))
	watch := watchLoneLeader(t, n)
	poll.Until(t, 15*time.Second, func() error {
		if !strings.Contains(c.nodes[0].logs.String(), "no answer from") {
			return errors.New("the wiped node has not reported waiting for its peers")
		}
		return nil
	})
	start := time.Now()
	_, err := write(t, n, throttle("user:1", 0, 1, 60, 1))
	took := time.Since(start)
	if !errors.Is(err, ErrNoLeader) {
		t.Fatalf("write while waiting = %v, want ErrNoLeader", err)
	}
	if bound := n.cfg.NoLeaderTimeout + 5*time.Second; took > bound {
		t.Errorf("write while waiting failed after %v, want within %v", took, bound)
	}
	if n.boot.hasConfiguration() || n.Info().LeaderID != "" {
		t.Fatalf("waiting node has a configuration %v or a leader %q; want neither", memberIDs(n), n.Info().LeaderID)
	}
	c.restart(1)
	c.restart(2)
	c.waitMembers(3, 30*time.Second)
	if seen := watch.stop(); seen != "" {
		t.Fatal(seen)
	}
	if r, err := write(t, n, throttle("user:1", 0, 1, 60, 1)); err != nil || !r.Limited {
		t.Fatalf("request through the rejoined node = %+v, %v; want limited", r, err)
	}
}

// writePeers writes Dir/peers.json for node i.
func (c *testCluster) writePeers(i int, text string) string {
	c.t.Helper()
	p := filepath.Join(c.nodes[i].dir, PeersFile)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// A three-node cluster loses two nodes for good: the survivor, given a
// peers.json listing itself alone, recovers with its data and serves; the
// file is applied once; a fresh node then joins it.
func TestRecoverFromPeersJSON(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	exhaust(t, c.nodes[c.WaitForLeader(10*time.Second)].node, "user:1")
	c.waitConverged(10 * time.Second)
	for i := range c.nodes {
		c.stop(i)
	}
	// n1 and n2 are gone for good. Restarted as they are, n0 has no quorum.
	p := c.writePeers(0, fmt.Sprintf(`[{"id": "n0", "address": %q, "non_voter": false}]`, c.nodes[0].raftAddr))
	c.restart(0)
	if l := c.WaitForLeader(15 * time.Second); l != 0 {
		t.Fatalf("leader = n%d, want n0", l)
	}
	n := c.nodes[0].node
	if ids := memberIDs(n); !slices.Equal(ids, []string{"n0"}) {
		t.Fatalf("recovered configuration = %v, want [n0]", ids)
	}
	if r, err := write(t, n, throttle("user:1", 0, 1, 60, 1)); err != nil || !r.Limited {
		t.Fatalf("request after recovery = %+v, %v; want limited (the data survived)", r, err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("peers.json still present after recovery: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.nodes[0].dir, PeersApplied)); err != nil {
		t.Errorf("peers.info missing after recovery: %v", err)
	}
	if !strings.Contains(c.nodes[0].logs.String(), "RECOVERING THE CLUSTER") {
		t.Errorf("the recovery was not logged:\n%s", c.nodes[0].logs)
	}
	// A fresh node joins the recovered cluster; a restart of n0 keeps the
	// new configuration (the renamed file is not applied again).
	c.nodes[1].node, c.nodes[2].node = nil, nil
	c.nodes = c.nodes[:1]
	c.addNode()
	c.waitMembers(2, 30*time.Second)
	c.stop(0)
	c.restart(0)
	c.waitMembers(2, 30*time.Second)
	if ids := memberIDs(c.nodes[0].node); !slices.Equal(ids, []string{"n0", "n1"}) {
		t.Fatalf("configuration after a restart = %v, want [n0 n1]", ids)
	}
}

// A peers.json that is malformed or does not fit the node stops it from
// starting, with an error naming the file, and is left in place.
func TestPeersJSONRefused(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	exhaust(t, c.nodes[0].node, "user:1")
	c.stop(0)
	tn := c.nodes[0]
	self := fmt.Sprintf(`{"id": "n0", "address": %q}`, tn.raftAddr)
	tests := []struct {
		name, text, want string
	}{
		{"not JSON", `n0 127.0.0.1:1`, "not a JSON list"},
		{"Consul's old format", fmt.Sprintf(`[%q]`, tn.raftAddr), "not a JSON list"},
		{"unknown field", fmt.Sprintf(`[{"id": "n0", "address": %q, "nonvoter": true}]`, tn.raftAddr), "unknown field"},
		{"trailing data", "[" + self + "] []", "trailing data"},
		{"empty list", `[]`, "lists no server"},
		{"no address", `[{"id": "n0"}]`, "no id or no address"},
		{"this node missing", `[{"id": "x", "address": "127.0.0.1:1"}]`, "does not list this node"},
		{"this node elsewhere", `[{"id": "n0", "address": "127.0.0.1:1"}]`, "its raft address is"},
		{"duplicate id", "[" + self + `, {"id": "n0", "address": "127.0.0.1:1"}]`, "duplicate ID"},
		{"no voter", fmt.Sprintf(`[{"id": "n0", "address": %q, "non_voter": true}]`, tn.raftAddr), "at least one voter"},
	}
	open := func(dir string) error {
		store, err := shards.New(shards.Config{Shards: 8})
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(tn.id, dir, tn.respAddr)
		cfg.RaftAddr = tn.raftAddr
		n, err := NewNode(cfg, store, slog.New(slog.NewTextHandler(tn.logs, nil)))
		if err == nil {
			n.Close()
		}
		return err
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := c.writePeers(0, tc.text)
			err := open(tn.dir)
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewNode with peers.json %s = %v, want an error naming %s and saying %q", tc.text, err, p, tc.want)
			}
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("refused peers.json was moved: %v", err)
			}
		})
	}
	// A valid file on a node with no raft state is refused too: there is
	// nothing to recover, and starting fresh is a bootstrap or a join.
	fresh := t.TempDir()
	if err := os.WriteFile(filepath.Join(fresh, PeersFile), []byte("["+self+"]"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := open(fresh); err == nil || !strings.Contains(err.Error(), "no raft state") {
		t.Fatalf("NewNode with peers.json and no state = %v, want a refusal", err)
	}
	// Without the file the node starts with its state intact.
	if err := os.Remove(filepath.Join(tn.dir, PeersFile)); err != nil {
		t.Fatal(err)
	}
	c.restart(0)
	c.WaitForLeader(15 * time.Second)
	if r, err := write(t, c.nodes[0].node, throttle("user:1", 0, 1, 60, 1)); err != nil || !r.Limited {
		t.Fatalf("request after the refusals = %+v, %v; want limited", r, err)
	}
}
