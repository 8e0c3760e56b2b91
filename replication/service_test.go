package replication

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/shards"
)

// followers returns the indexes of the running nodes other than the leader.
func (c *testCluster) followers(leader int) []int {
	var f []int
	for i, tn := range c.nodes {
		if i != leader && tn.node != nil {
			f = append(f, i)
		}
	}
	return f
}

// stopRESP closes every node's RESP listener: from then on nothing between
// the nodes can go through RESP.
func (c *testCluster) stopRESP() {
	for _, tn := range c.nodes {
		_ = tn.srv.Close()
		<-tn.done
	}
}

// Writes, linearizable reads and membership changes made on followers reach
// the leader through the forwarding service on the raft port, with no RESP
// server running anywhere.
func TestForwardingService(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.WaitForLeader(10 * time.Second)
	c.stopRESP()
	fs := c.followers(l)
	for _, f := range fs {
		n := c.nodes[f].node
		key := "fwd:" + c.nodes[f].id
		r, err := write(t, n, throttle(key, 9, 10, 60, 1))
		if err != nil || r.Limited || r.Remaining != 9 {
			t.Fatalf("write via %s = %+v, %v; want allowed, remaining 9", c.nodes[f].id, r, err)
		}
		now, err := n.ReadNow(context.Background())
		if err != nil {
			t.Fatalf("ReadNow on %s: %v", c.nodes[f].id, err)
		}
		if _, ok := n.Store().Lookup([]byte(key), now); !ok {
			t.Fatalf("%s: %s missing after a linearizable read", c.nodes[f].id, key)
		}
	}
	// Joining again with the same addresses is a no-op, via the service.
	o := c.nodes[fs[1]]
	if err := c.nodes[fs[0]].node.Members().Join(context.Background(), o.id, o.raftAddr, o.respAddr); err != nil {
		t.Fatalf("Join(%s) again via %s: %v", o.id, c.nodes[fs[0]].id, err)
	}
	if err := c.nodes[fs[0]].node.Members().Remove(context.Background(), "nobody"); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("Remove(nobody) via a follower = %v, want ErrUnknownNode", err)
	}
	if err := c.nodes[fs[0]].node.Members().Remove(context.Background(), o.id); err != nil {
		t.Fatalf("Remove(%s) via %s: %v", o.id, c.nodes[fs[0]].id, err)
	}
	poll.Until(c.t, 10*time.Second, func() error {
		if got := len(c.nodes[l].node.Info().Members); got != 2 {
			return fmt.Errorf("leader sees %d members, want 2", got)
		}
		return nil
	})
}

// Whole-request errors come back by their code: each request sent to the
// wrong node, or malformed, yields the sentinel the serving node returned.
func TestForwardErrorsByCode(t *testing.T) {
	c := newTestCluster(t, 2, nil)
	l := c.WaitForLeader(10 * time.Second)
	f := c.followers(l)[0]
	from := c.nodes[f].node
	ctx := context.Background()
	tests := []struct {
		name    string
		target  int
		kind    byte
		payload []byte
		want    error
	}{
		{"apply on a follower", f, reqApply, encodeForward([]shards.Op{throttle("k", 1, 1, 1, 1)}), ErrNotLeader},
		{"read index on a follower", f, reqReadIndex, nil, ErrNotLeader},
		{"join on a follower", f, reqJoin, encodeJoin("x", "127.0.0.1:1", "127.0.0.1:2"), ErrNotLeader},
		{"garbage batch on the leader", l, reqApply, []byte{codecVersion, 0xff}, ErrBadPayload},
		{"truncated join on the leader", l, reqJoin, []byte{5, 'a'}, ErrBadPayload},
		{"unknown request on the leader", l, 99, nil, ErrBadPayload},
		{"remove of a stranger on the leader", l, reqRemove, encodeRemove("nobody"), ErrUnknownNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := from.fwd.do(ctx, c.nodes[tt.target].raftAddr, tt.kind, tt.payload, false)
			if !errors.Is(err, tt.want) {
				t.Fatalf("do(%s) = %v, want %v", tt.name, err, tt.want)
			}
		})
	}
	// A successful request on the same pooled connections still works.
	if _, err := from.fwd.do(ctx, c.nodes[l].raftAddr, reqReadIndex, nil, true); err != nil {
		t.Fatalf("read index on the leader: %v", err)
	}
}

// A forwarded write whose first target applied nothing — a follower that
// answers ErrNotLeader, an address nothing listens on — is retried against
// the next target, and succeeds there exactly once.
func TestForwardRetriesWhenNotApplied(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.WaitForLeader(10 * time.Second)
	fs := c.followers(l)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	tests := []struct {
		name, first string
	}{
		{"follower answers ErrNotLeader", c.nodes[fs[1]].raftAddr},
		{"nothing listening: not sent", deadAddr},
	}
	n := c.nodes[fs[0]].node
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			n.forwardTarget = func() (string, bool) {
				if calls.Add(1) == 1 {
					return tt.first, true
				}
				return n.lead.leaderRaft()
			}
			defer func() { n.forwardTarget = n.lead.leaderRaft }()
			key := fmt.Sprintf("retry%d", i)
			r, err := write(t, n, throttle(key, 9, 10, 60, 1))
			if err != nil || r.Remaining != 9 {
				t.Fatalf("write = %+v, %v; want allowed once, remaining 9", r, err)
			}
			if calls.Load() < 2 {
				t.Fatalf("target asked %d times, want a retry", calls.Load())
			}
			calls.Store(0)
			if _, err := n.ReadNow(context.Background()); err != nil {
				t.Fatalf("ReadNow after the same detour: %v", err)
			}
		})
	}
}

// A peer that passed the handshake still cannot make the service allocate
// what it claims, nor break it with malformed frames: an oversized length
// closes the connection, and the node keeps serving.
func TestServiceBoundsFrames(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	n := c.nodes[0].node
	conn, err := n.stream.dial(context.Background(), n.RaftAddr(), headerForward)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var h [frameHeaderLen]byte
	h[0] = reqApply
	binary.BigEndian.PutUint32(h[1:], 0xffffffff) // 4 GiB
	if _, err := conn.Write(h[:]); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := io.ReadAll(conn); err != nil || len(got) != 0 {
		t.Fatalf("after a 4 GiB frame header: read %q, %v; want the connection closed", got, err)
	}
	// A frame cut short is not a request either.
	conn2, err := n.stream.dial(context.Background(), n.RaftAddr(), headerForward)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(conn2)
	binary.BigEndian.PutUint32(h[1:], 100)
	w.Write(h[:])
	w.WriteString("short")
	w.Flush()
	conn2.Close()
	if r, err := write(t, n, throttle("after", 1, 1, 60, 1)); err != nil || r.Limited {
		t.Fatalf("write after bad frames = %+v, %v; want allowed", r, err)
	}
}

// A pooled connection's liveness is read from the socket beneath the TLS
// and tracking wrappers: an idle connection counts as alive (no stray
// post-handshake bytes), one the peer closed does not.
func TestConnAliveThroughWrappers(t *testing.T) {
	ca := newTestCA(t)
	for _, tt := range []struct {
		name string
		sec  *security
	}{
		{"plain", &security{secret: []byte("s")}},
		{"TLS", newSecurity(&Config{TLS: nodeTLS(t, ca), ClusterSecret: "s"})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			closeIt := make(chan struct{})
			s, err := newTCPStream("127.0.0.1:0", "", tt.sec, slog.New(slog.DiscardHandler), testAcceptLimits)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.handle(func(c net.Conn) {
				defer c.Close()
				select {
				case <-closeIt:
				case <-s.done:
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := s.dial(ctx, s.Addr().String(), headerForward)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			time.Sleep(50 * time.Millisecond) // let any post-handshake bytes arrive: there must be none
			if !connAlive(c) {
				t.Fatal("connAlive(idle connection) = false, want true")
			}
			close(closeIt)
			poll.Until(t, 5*time.Second, func() error {
				if connAlive(c) {
					return errors.New("connAlive(connection closed by the peer) still true")
				}
				return nil
			})
		})
	}
}
