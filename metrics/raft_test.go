package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/resp"
	"github.com/cellserver/cellserver/shards"
)

// startOneNode starts a one-node cluster and waits until it leads; it is
// closed with the test.
func startOneNode(t *testing.T) *replication.Node {
	t.Helper()
	store, err := shards.New(shards.Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	cfg := replication.DefaultConfig()
	cfg.NodeID = "n1"
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.RespAddr = "127.0.0.1:6379"
	cfg.Dir = t.TempDir()
	cfg.Bootstrap = true
	cfg.RaftLogOutput = io.Discard
	node, err := replication.NewNode(cfg, store, discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	poll.Until(t, 10*time.Second, func() error {
		if !node.Info().Ready {
			return errors.New("no leader")
		}
		return nil
	})
	return node
}

// TestRaftMetrics runs a one-node cluster, applies writes through raft and
// checks the raft metrics against the node's own Info.
func TestRaftMetrics(t *testing.T) {
	node := startOneNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < 5; i++ {
		ops := []shards.Op{{Code: shards.OpLimit, Keys: [][]byte{[]byte("k")},
			Reqs: []engine.Request{{Kind: engine.KindGCRA, Burst: 2, Rate: 1, Period: int64(time.Minute), Quantity: 1}}}}
		res := make([]shards.Result, 1)
		if err := node.Write(ctx, ops, res); err != nil {
			t.Fatal(err)
		}
	}
	// A connection that sends nothing on the raft port is closed when its
	// first bytes are late, and counted.
	idle, err := net.Dial("tcp", node.RaftAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	poll.Until(t, 10*time.Second, func() error {
		if p := node.Info().RaftPort; p.TimedOut != 1 || p.Handshakes != 0 {
			return fmt.Errorf("raft port: %+v; want 1 timed out, none under way", p)
		}
		return nil
	})
	srv, err := resp.NewServer(resp.DefaultConfig(), node)
	if err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry(Sources{Server: srv, Store: node.Store(), Raft: node})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		got[mf.GetName()] = mf
	}
	inf := node.Info()
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"cellserver_raft_state", map[string]string{"state": "leader"}, 1},
		{"cellserver_raft_state", map[string]string{"state": "follower"}, 0},
		{"cellserver_raft_leader_ready", nil, 1},
		{"cellserver_raft_members", map[string]string{"suffrage": "voter"}, 1},
		{"cellserver_keys", map[string]string{"kind": "gcra"}, 1},
		{"cellserver_raft_port_refused_total", map[string]string{"reason": "timeout"}, 1},
		{"cellserver_raft_port_refused_total", map[string]string{"reason": "full"}, 0},
		{"cellserver_raft_port_handshakes", nil, 0},
		{"cellserver_raft_member_health", map[string]string{"member": "n1", "health": "online"}, 1},
		{"cellserver_raft_member_health", map[string]string{"member": "n1", "health": "fail"}, 0},
	}
	for _, tt := range tests {
		if v, ok := value(got, tt.name, tt.labels); !ok || v != tt.want {
			t.Errorf("%s%v = %v (present %v), want %v", tt.name, tt.labels, v, ok, tt.want)
		}
	}
	// Indexes only grow; the scrape came after the Info above.
	atLeast := []struct {
		name string
		min  float64
	}{
		{"cellserver_raft_term", float64(inf.Term)},
		{"cellserver_raft_applied_index", float64(inf.AppliedIndex)},
		{"cellserver_raft_commit_index", float64(inf.CommitIndex)},
		{"cellserver_raft_last_log_index", float64(inf.LastLogIndex)},
		{"cellserver_raft_leader_changes_total", 1},
		{"cellserver_raft_ops_submitted_total", 5},
	}
	for _, a := range atLeast {
		if v, ok := value(got, a.name, nil); !ok || v < a.min || v < 1 {
			t.Errorf("%s = %v (present %v), want at least %v and 1", a.name, v, ok, a.min)
		}
	}
}
