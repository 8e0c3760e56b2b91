package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/internal/testlog"
	"github.com/cellserver/cellserver/shards"
)

// testClock is a per-node clock: real time plus an adjustable offset, so a
// test can give nodes skewed clocks.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) now() int64 { return time.Now().UnixNano() + c.offset.Load() }

// testNode is one member of an in-process cluster: a Node plus a RESP
// listener that answers RAFT.JOIN as the wire layer does (a new node's
// first request; everything else goes through the raft port).
type testNode struct {
	id       string
	dir      string
	respAddr string
	raftAddr string
	clock    *testClock
	logs     *testlog.Buffer // the node's log lines, across restarts
	node     *Node
	srv      *redcon.Server
	done     chan struct{}
}

// testCluster runs nodes on real loopback TCP transports.
type testCluster struct {
	t      testing.TB
	nodes  []*testNode
	tweak  func(*Config)
	stopMu sync.Mutex
}

// testConfig returns the configuration the package tests use: raft
// timeouts twice the defaults (the test machine is shared, and a scheduling
// stall must not depose a healthy leader mid-test; failover time with the
// defaults is measured end to end in test/), a short no-leader bound, quiet
// raft logs.
func testConfig(id, dir, respAddr string) Config {
	cfg := DefaultConfig()
	cfg.HeartbeatTimeout = time.Second
	cfg.ElectionTimeout = time.Second
	cfg.LeaderLeaseTimeout = time.Second
	cfg.NodeID = id
	cfg.Dir = dir
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.RespAddr = respAddr
	cfg.NoLeaderTimeout = 2 * time.Second
	cfg.RaftLogOutput = io.Discard
	cfg.RaftLogLevel = "error"
	return cfg
}

// newTestCluster starts n nodes: the first bootstraps, the others join
// through it. It waits until every node is a member and knows the leader.
func newTestCluster(t *testing.T, n int, tweak func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, tweak: tweak}
	// Cleanups run last in, first out, and the first t.TempDir registers
	// the removal of every node directory: register it before closeAll, so
	// that nodes stop before their directories are removed.
	_ = t.TempDir()
	t.Cleanup(c.closeAll)
	for i := 0; i < n; i++ {
		c.addNode()
		if i == 0 {
			c.WaitForLeader(10 * time.Second)
		}
	}
	c.waitMembers(n, 15*time.Second)
	return c
}

// addNode starts a new node; the first bootstraps, later ones join node 0
// (or any running node).
func (c *testCluster) addNode() *testNode {
	c.t.Helper()
	tn := &testNode{id: fmt.Sprintf("n%d", len(c.nodes)), dir: c.t.TempDir(), clock: &testClock{}, logs: &testlog.Buffer{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	tn.respAddr = ln.Addr().String()
	cfg := testConfig(tn.id, tn.dir, tn.respAddr)
	if len(c.nodes) == 0 {
		cfg.Bootstrap = true
	} else {
		for _, o := range c.nodes {
			if o.node != nil {
				cfg.Join = o.respAddr
				break
			}
		}
	}
	c.start(tn, cfg, ln)
	c.nodes = append(c.nodes, tn)
	return tn
}

func (c *testCluster) start(tn *testNode, cfg Config, ln net.Listener) {
	c.t.Helper()
	cfg.Clock = tn.clock.now
	if tn.raftAddr != "" {
		cfg.RaftAddr = tn.raftAddr
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	store, err := shards.New(shards.Config{Shards: 8})
	if err != nil {
		c.t.Fatal(err)
	}
	// NewNode waits forever for a lock on its stores that is still held
	// (bolt's flock): fail the test with a reason instead of hanging it.
	type opened struct {
		node *Node
		err  error
	}
	ch := make(chan opened, 1)
	go func() {
		node, err := NewNode(cfg, store, slog.New(slog.NewTextHandler(tn.logs, nil)))
		ch <- opened{node, err}
	}()
	var node *Node
	select {
	case o := <-ch:
		node, err = o.node, o.err
	case <-time.After(30 * time.Second):
		ln.Close()
		c.t.Fatalf("NewNode(%s) blocked for 30 s: a lock on its raft state in %s is still held", tn.id, tn.dir)
	}
	if err != nil {
		ln.Close()
		c.t.Fatalf("NewNode(%s): %v", tn.id, err)
	}
	tn.node = node
	tn.raftAddr = node.RaftAddr()
	tn.srv = redcon.NewServerNetwork("tcp", tn.respAddr, func(conn redcon.Conn, cmd redcon.Command) {
		serveJoin(node, conn, cmd)
	}, nil, nil)
	tn.done = make(chan struct{})
	go func(srv *redcon.Server, done chan struct{}) {
		defer close(done)
		_ = srv.Serve(ln)
	}(tn.srv, tn.done)
}

// serveJoin answers RAFT.JOIN and RAFT.HELLO (AUTH too, accepting any
// password) as the wire layer does: what a node without raft state asks.
func serveJoin(node *Node, conn redcon.Conn, cmd redcon.Command) {
	switch strings.ToUpper(string(cmd.Args[0])) {
	case "AUTH":
		conn.WriteString("OK")
	case CmdJoin:
		if len(cmd.Args) != 4 {
			conn.WriteError("ERR wrong number of arguments for 'raft.join' command")
			return
		}
		if err := node.Members().Join(context.Background(), string(cmd.Args[1]), string(cmd.Args[2]), string(cmd.Args[3])); err != nil {
			conn.WriteError("ERR " + err.Error())
			return
		}
		conn.WriteString("OK")
	case CmdHello:
		f := node.Hello().Fields()
		conn.WriteArray(2 * len(f))
		for _, kv := range f {
			conn.WriteBulkString(kv[0])
			conn.WriteBulkString(kv[1])
		}
	default:
		conn.WriteError("ERR unknown command")
	}
}

// stop closes node i (as a crash would, minus the disk: its raft state
// stays in its directory).
func (c *testCluster) stop(i int) {
	c.t.Helper()
	tn := c.nodes[i]
	if tn.node == nil {
		return
	}
	_ = tn.srv.Close()
	<-tn.done
	if err := tn.node.Close(); err != nil {
		c.t.Logf("close %s: %v", tn.id, err)
	}
	tn.node = nil
}

// restart starts a stopped node again on the same directory and addresses.
func (c *testCluster) restart(i int) {
	c.t.Helper()
	tn := c.nodes[i]
	var ln net.Listener
	poll.Until(c.t, 5*time.Second, func() error { // the port is being released
		var err error
		ln, err = net.Listen("tcp", tn.respAddr)
		return err
	})
	c.start(tn, testConfig(tn.id, tn.dir, tn.respAddr), ln)
}

func (c *testCluster) closeAll() {
	for i := range c.nodes {
		c.stop(i)
	}
}

// isLeader reports whether n is the leader and ready to serve.
func isLeader(n *Node) bool { return n.ready.Load() }

// WaitForLeader polls until a ready leader exists (other than the excluded
// nodes) and returns its index; it fails the test at the deadline.
func (c *testCluster) WaitForLeader(timeout time.Duration, exclude ...int) int {
	c.t.Helper()
	leader := -1
	poll.Until(c.t, timeout, func() error {
		for i, tn := range c.nodes {
			skip := false
			for _, e := range exclude {
				skip = skip || e == i
			}
			if !skip && tn.node != nil && isLeader(tn.node) {
				leader = i
				return nil
			}
		}
		return errors.New("no ready leader")
	})
	return leader
}

// Partition cuts node i's raft traffic (both directions) or restores it:
// while cut, its stream refuses every dial and accept, and the connections
// open when it is cut are closed. The filter is set before the connections
// are closed, so none is tracked after closeConns without being refused.
func (c *testCluster) Partition(i int, cut bool) {
	s := c.nodes[i].node.stream
	if !cut {
		s.admit.Store(nil)
		return
	}
	refuse := func() bool { return false }
	s.admit.Store(&refuse)
	s.closeConns()
}

// waitMembers polls until every running node sees want members, each with
// its RESP address, and knows a leader.
func (c *testCluster) waitMembers(want int, timeout time.Duration) {
	c.t.Helper()
	poll.Until(c.t, timeout, func() error {
		for _, tn := range c.nodes {
			if tn.node == nil {
				continue
			}
			inf := tn.node.Info()
			if len(inf.Members) != want {
				return fmt.Errorf("%s sees %d members, want %d", tn.id, len(inf.Members), want)
			}
			for _, m := range inf.Members {
				if m.RespAddr == "" {
					return fmt.Errorf("%s: member %s has no RESP address yet", tn.id, m.ID)
				}
			}
			if inf.LeaderRespAddr == "" {
				return fmt.Errorf("%s knows no leader", tn.id)
			}
		}
		return nil
	})
}

// waitConverged polls until every running node has applied as far as the
// leader.
func (c *testCluster) waitConverged(timeout time.Duration) {
	c.t.Helper()
	poll.Until(c.t, timeout, func() error {
		var max uint64
		for _, tn := range c.nodes {
			if tn.node != nil {
				max = maxU(max, tn.node.fsm.LastIndex())
			}
		}
		for _, tn := range c.nodes {
			if tn.node != nil && tn.node.fsm.LastIndex() != max {
				return fmt.Errorf("%s applied %d, want %d", tn.id, tn.node.fsm.LastIndex(), max)
			}
		}
		return nil
	})
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// throttle is CL.THROTTLE key burst rate period(s) qty as an Op.
func throttle(key string, burst, rate, periodSec, qty int64) shards.Op {
	return shards.Op{Code: shards.OpLimit, Keys: [][]byte{[]byte(key)}, Reqs: []engine.Request{{
		Kind: engine.KindGCRA, Burst: burst, Rate: rate, Period: periodSec * int64(time.Second), Quantity: qty,
	}}}
}

// write runs one op on node and returns its limiter result.
func write(t testing.TB, n *Node, op shards.Op) (engine.Result, error) {
	t.Helper()
	res := make([]shards.Result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Write(ctx, []shards.Op{op}, res); err != nil {
		return engine.Result{}, err
	}
	if res[0].Err != nil {
		return engine.Result{}, res[0].Err
	}
	if len(res[0].Results) != 1 {
		return engine.Result{}, errors.New("no limiter result")
	}
	return res[0].Results[0], nil
}
