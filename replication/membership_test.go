package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/internal/poll"
)

// voters returns the ids of the voters and of the non-voters in n's latest
// configuration.
func voters(t testing.TB, n *Node) (vs, nonvoters []string) {
	t.Helper()
	servers, _, err := n.mship.configuration()
	if err != nil {
		t.Fatalf("configuration: %v", err)
	}
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			vs = append(vs, string(s.ID))
		} else {
			nonvoters = append(nonvoters, string(s.ID))
		}
	}
	slices.Sort(vs)
	slices.Sort(nonvoters)
	return vs, nonvoters
}

// zombie listens on a raft port and completes the node-to-node handshake,
// so it passes the leader's probe, but then serves nothing: forwarding
// connections are closed at once and raft's are never read. It stands for
// a node that was reachable at join time and died right after.
func zombie(t *testing.T) string {
	t.Helper()
	cfg := testConfig("zombie", t.TempDir(), "127.0.0.1:1")
	s, err := newTCPStream("127.0.0.1:0", "", newSecurity(&cfg), slog.New(slog.DiscardHandler), testAcceptLimits)
	if err != nil {
		t.Fatal(err)
	}
	s.handle(func(c net.Conn) { c.Close() })
	t.Cleanup(func() { _ = s.Close() })
	return s.Addr().String()
}

// Joins of addresses that pass the probe and then never act as nodes, and
// of addresses nothing listens on, leave the voters as they were: the
// first are added as non-voters and each Join answers ErrNotPromoted
// (never an outcome "may or may not have been applied"), the others are
// refused; the cluster keeps serving throughout.
func TestBadJoinsKeepQuorum(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.WaitForLeader(10 * time.Second)
	want, _ := voters(t, c.nodes[l].node)
	for i := range 3 {
		id := fmt.Sprintf("ghost%d", i)
		via := c.nodes[(l+i)%3].node // the leader and both followers
		err := via.Members().Join(t.Context(), id, zombie(t), "127.0.0.1:1")
		var pe *PendingError
		if !errors.As(err, &pe) || pe.ID != id {
			t.Fatalf("Join(%s) of a dead node = %v, want a *PendingError (ErrNotPromoted)", id, err)
		}
		if _, err := write(t, c.nodes[l].node, throttle(fmt.Sprintf("k%d", i), 9, 10, 60, 1)); err != nil {
			t.Fatalf("write after bad join %d: %v", i, err)
		}
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	if err := c.nodes[l].node.Members().Join(t.Context(), "nobody", deadAddr, "127.0.0.1:1"); err == nil || errors.Is(err, ErrLeadershipLost) || errors.Is(err, ErrNotPromoted) {
		t.Fatalf("Join of an unreachable address = %v, want the probe's refusal", err)
	}
	// A new node may not take over a member's id at another address (it
	// would inherit the member's vote with none of its log), whether the
	// join reaches the leader directly or through a follower.
	for _, via := range []int{l, (l + 1) % 3} {
		taken := c.nodes[(l+2)%3].id
		if err := c.nodes[via].node.Members().Join(t.Context(), taken, zombie(t), "127.0.0.1:1"); !errors.Is(err, ErrIDInUse) {
			t.Fatalf("Join(%s) at another address via %s = %v, want ErrIDInUse", taken, c.nodes[via].id, err)
		}
	}
	l = c.WaitForLeader(10 * time.Second)
	got, non := voters(t, c.nodes[l].node)
	if !slices.Equal(got, want) {
		t.Errorf("voters after the bad joins = %v, want %v", got, want)
	}
	if !slices.Equal(non, []string{"ghost0", "ghost1", "ghost2"}) {
		t.Errorf("non-voters = %v, want the three ghosts", non)
	}
	for i := range c.nodes {
		if _, err := write(t, c.nodes[i].node, throttle("after", 99, 100, 60, 1)); err != nil {
			t.Fatalf("write via %s after the bad joins: %v", c.nodes[i].id, err)
		}
	}
	// The ghosts are removable: non-voters never put the quorum at risk.
	for i := range 3 {
		if err := c.nodes[l].node.Members().Remove(t.Context(), fmt.Sprintf("ghost%d", i)); err != nil {
			t.Fatalf("Remove(ghost%d): %v", i, err)
		}
	}
}

// A new node joins as a non-voter and is promoted once caught up: Join
// returns when it votes, and the leader reports its health.
func TestJoinPromotesCaughtUpNonvoter(t *testing.T) {
	c := newTestCluster(t, 2, nil)
	l := c.WaitForLeader(10 * time.Second)
	for i := range 300 { // a log to catch up with
		if _, err := write(t, c.nodes[l].node, throttle(fmt.Sprintf("k%d", i), 9, 10, 60, 1)); err != nil {
			t.Fatal(err)
		}
	}
	tn := c.addNode()
	c.waitMembers(3, 20*time.Second)
	l = c.WaitForLeader(10 * time.Second)
	poll.Until(t, 20*time.Second, func() error {
		if vs, _ := voters(t, c.nodes[l].node); !slices.Contains(vs, tn.id) {
			return fmt.Errorf("voters %v, want %s among them", vs, tn.id)
		}
		return nil
	})
	logs := c.nodes[l].logs.String()
	if !strings.Contains(logs, "added a non-voter") || !strings.Contains(logs, "promoted a caught-up non-voter") {
		t.Errorf("leader's log lacks the non-voter addition and promotion:\n%s", logs)
	}
	poll.Until(t, 10*time.Second, func() error {
		for _, m := range c.nodes[l].node.Info().Members {
			if m.ID != tn.id {
				continue
			}
			if !m.Voter || !m.Health || !m.Reachable || m.LastContact < 0 || m.Lag > promoteMaxLag {
				return fmt.Errorf("leader's view of %s = %+v, want a reachable, caught-up voter", tn.id, m)
			}
			return nil
		}
		return fmt.Errorf("%s not listed", tn.id)
	})
}

// The quorum rule: removing a voter must leave voters of which a majority
// answered the leader.
func TestQuorumAfterRemoval(t *testing.T) {
	srv := func(id string, voter bool) raft.Server {
		s := raft.Server{ID: raft.ServerID(id), Suffrage: raft.Nonvoter}
		if voter {
			s.Suffrage = raft.Voter
		}
		return s
	}
	three := []raft.Server{srv("n1", true), srv("n2", true), srv("n3", true)}
	tests := []struct {
		name    string
		servers []raft.Server
		remove  string
		reach   map[string]bool
		want    *QuorumError // nil: allowed
	}{
		{"live follower, all up", three, "n2", map[string]bool{"n1": true, "n2": true, "n3": true}, nil},
		{"dead follower", three, "n3", map[string]bool{"n1": true, "n2": true}, nil},
		{"live follower while another is dead", three, "n2", map[string]bool{"n1": true, "n2": true}, &QuorumError{ID: "n2", Reachable: 1, Remaining: 2, Needed: 2}},
		{"leader, rest up", three, "n1", map[string]bool{"n1": true, "n2": true, "n3": true}, nil},
		{"last voter", []raft.Server{srv("n1", true)}, "n1", map[string]bool{"n1": true}, &QuorumError{ID: "n1", Reachable: 0, Remaining: 0, Needed: 1}},
		{"non-voters do not count", append(slices.Clone(three), srv("n4", false), srv("n5", false)), "n2", map[string]bool{"n1": true, "n2": true, "n4": true, "n5": true}, &QuorumError{ID: "n2", Reachable: 1, Remaining: 2, Needed: 2}},
		{"five, two dead, remove a dead one", []raft.Server{srv("a", true), srv("b", true), srv("c", true), srv("d", true), srv("e", true)}, "e", map[string]bool{"a": true, "b": true, "c": true}, nil},
		{"five, two dead, remove a live one", []raft.Server{srv("a", true), srv("b", true), srv("c", true), srv("d", true), srv("e", true)}, "c", map[string]bool{"a": true, "b": true, "c": true}, &QuorumError{ID: "c", Reachable: 2, Remaining: 4, Needed: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := quorumAfterRemoval(tt.remove, tt.servers, tt.reach)
			var q *QuorumError
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("quorumAfterRemoval(%s) = %v, want nil", tt.remove, err)
			case tt.want != nil && (!errors.As(err, &q) || *q != *tt.want || !errors.Is(err, ErrQuorumAtRisk)):
				t.Fatalf("quorumAfterRemoval(%s) = %v, want %+v", tt.remove, err, *tt.want)
			}
		})
	}
}

// With one of three nodes dead, removing a live follower is refused with
// the figures (it would leave one reachable voter of two), while removing
// the dead node is allowed and the cluster keeps serving.
func TestRemoveKeepsReachableMajority(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.WaitForLeader(10 * time.Second)
	fs := c.followers(l)
	deadIdx, live := fs[0], c.nodes[fs[1]]
	deadID := c.nodes[deadIdx].id
	c.stop(deadIdx)
	err := c.nodes[l].node.Members().Remove(t.Context(), live.id)
	want := QuorumError{ID: live.id, Reachable: 1, Remaining: 2, Needed: 2}
	var q *QuorumError
	if !errors.As(err, &q) || *q != want {
		t.Fatalf("Remove(%s) with %s dead = %v, want %+v", live.id, deadID, err, want)
	}
	// The same answer through a follower (the figures travel with the code).
	if err := live.node.Members().Remove(t.Context(), live.id); !errors.As(err, &q) || *q != want {
		t.Fatalf("Remove(%s) via itself = %v, want %+v", live.id, err, want)
	}
	if vs, _ := voters(t, c.nodes[l].node); len(vs) != 3 {
		t.Fatalf("voters after the refused removal = %v, want 3", vs)
	}
	if err := live.node.Members().Remove(t.Context(), deadID); err != nil {
		t.Fatalf("Remove(%s), the dead node = %v, want nil", deadID, err)
	}
	l = c.WaitForLeader(10*time.Second, deadIdx)
	if vs, _ := voters(t, c.nodes[l].node); len(vs) != 2 || slices.Contains(vs, deadID) {
		t.Fatalf("voters after removing %s = %v", deadID, vs)
	}
	for _, i := range []int{l, fs[1]} {
		if _, err := write(t, c.nodes[i].node, throttle("k", 9, 10, 60, 1)); err != nil {
			t.Fatalf("write via %s: %v", c.nodes[i].id, err)
		}
	}
}

// A removed leader stays up as a removed node: its commands fail at once
// with ErrRemoved naming the new leader, it disturbs no election, and a
// Join sent to any member brings it back without a restart.
func TestRemovedLeaderRejoins(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.WaitForLeader(10 * time.Second)
	old := c.nodes[l]
	if err := old.node.Members().Remove(t.Context(), old.id); err != nil {
		t.Fatalf("Remove(%s), the leader = %v", old.id, err)
	}
	nl := c.WaitForLeader(15*time.Second, l)
	newLeader := c.nodes[nl]
	poll.Until(t, 15*time.Second, func() error {
		start := time.Now()
		_, err := write(t, old.node, throttle("k", 9, 10, 60, 1))
		took := time.Since(start)
		var re *RemovedError
		switch {
		case !errors.As(err, &re):
			return fmt.Errorf("write on the removed node = %v, want a *RemovedError", err)
		case took > time.Second:
			return fmt.Errorf("write on the removed node took %v, want an immediate answer", took)
		case re.LeaderID != newLeader.id || re.LeaderRespAddr != newLeader.respAddr:
			return fmt.Errorf("removed node names leader %q at %q, want %s at %s", re.LeaderID, re.LeaderRespAddr, newLeader.id, newLeader.respAddr)
		}
		return nil
	})
	if _, err := old.node.ReadNow(t.Context()); !errors.Is(err, ErrRemoved) {
		t.Fatalf("ReadNow on the removed node = %v, want ErrRemoved", err)
	}
	if inf := old.node.Info(); inf.State != "removed" || !inf.Removed {
		t.Fatalf("removed node's Info: state %q, removed %v", inf.State, inf.Removed)
	}
	// No disruption: over several election timeouts the removed node never
	// campaigns (its term stays; a campaign starts by raising it), and the
	// leader is never it.
	term := old.node.raft.CurrentTerm()
	watchUntil := time.Now().Add(4 * time.Second)
	for time.Now().Before(watchUntil) {
		if s := old.node.raft.State(); s == raft.Candidate || s == raft.Leader {
			t.Fatalf("removed node is %v", s)
		}
		if got := old.node.raft.CurrentTerm(); got != term {
			t.Fatalf("removed node's term went from %d to %d: it campaigned", term, got)
		}
		time.Sleep(50 * time.Millisecond) // sampling interval of the observation window
	}
	nl = c.WaitForLeader(10*time.Second, l)
	newLeader = c.nodes[nl]
	// Rejoin through a follower, without restarting the removed node.
	via := c.followers(nl)
	via = slices.DeleteFunc(via, func(i int) bool { return i == l })
	if err := c.nodes[via[0]].node.Members().Join(t.Context(), old.id, old.raftAddr, old.respAddr); err != nil {
		t.Fatalf("Join(%s) again = %v", old.id, err)
	}
	poll.Until(t, 15*time.Second, func() error {
		if old.node.Info().Removed {
			return errors.New("still removed")
		}
		_, err := write(t, old.node, throttle("back", 9, 10, 60, 1))
		return err
	})
	if vs, _ := voters(t, newLeader.node); len(vs) != 3 || !slices.Contains(vs, old.id) {
		t.Fatalf("voters after the rejoin = %v, want 3 with %s", vs, old.id)
	}
}

// With dead-server cleanup on, the leader removes a member it has not
// reached for the dead-server timeout; with it off, the member stays.
func TestDeadServerCleanup(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		t.Run(fmt.Sprintf("enabled=%v", enabled), func(t *testing.T) {
			const timeout = 2 * time.Second
			c := newTestCluster(t, 3, func(cfg *Config) {
				cfg.CleanupDeadServers = enabled
				cfg.DeadServerTimeout = timeout
			})
			l := c.WaitForLeader(10 * time.Second)
			deadIdx := c.followers(l)[0]
			deadID := c.nodes[deadIdx].id
			poll.Until(t, 10*time.Second, func() error { // the leader has reached it once
				for _, m := range c.nodes[l].node.Info().Members {
					if m.ID == deadID && m.Health && m.Reachable {
						return nil
					}
				}
				return fmt.Errorf("leader has not reached %s yet", deadID)
			})
			c.stop(deadIdx)
			if enabled {
				poll.Until(t, 30*time.Second, func() error {
					l := c.WaitForLeader(10*time.Second, deadIdx)
					if vs, non := voters(t, c.nodes[l].node); slices.Contains(vs, deadID) || slices.Contains(non, deadID) {
						return fmt.Errorf("%s still a member: voters %v, non-voters %v", deadID, vs, non)
					}
					return nil
				})
				// The leader that removed it logs why once the removal
				// call returns, which is after the new configuration is
				// visible above; leadership may have moved since on a
				// loaded machine, so any survivor's log will do.
				poll.Until(t, 10*time.Second, func() error {
					for i := range c.nodes {
						if i != deadIdx && strings.Contains(c.nodes[i].logs.String(), "unreachable for longer than the dead-server timeout") {
							return nil
						}
					}
					return errors.New("no survivor's log mentions the cleanup")
				})
			} else {
				// Wait until the leader has not reached it for well over the
				// timeout: a cleanup would have happened by then.
				poll.Until(t, 30*time.Second, func() error {
					l := c.WaitForLeader(10*time.Second, deadIdx)
					for _, m := range c.nodes[l].node.Info().Members {
						if m.ID == deadID && m.Health && !m.Reachable && m.LastContact > timeout+3*autopilotInterval {
							return nil
						}
					}
					return fmt.Errorf("leader has not yet missed %s for %v: %+v", deadID, timeout+3*autopilotInterval, c.nodes[l].node.Info().Members)
				})
				l = c.WaitForLeader(10*time.Second, deadIdx)
				if vs, _ := voters(t, c.nodes[l].node); !slices.Contains(vs, deadID) {
					t.Fatalf("cleanup off, yet %s was removed: voters %v", deadID, vs)
				}
			}
			if _, err := write(t, c.nodes[l].node, throttle("k", 9, 10, 60, 1)); err != nil {
				t.Fatalf("write after the cleanup: %v", err)
			}
		})
	}
}

// The figures of QuorumError, PendingError and RemovedError, and status
// answers, survive the forwarding service's encoding.
func TestMembershipWireEncoding(t *testing.T) {
	errs := []error{
		&QuorumError{ID: "n2", Reachable: 1, Remaining: 2, Needed: 2},
		&PendingError{ID: "n4", Reachable: true, Lag: 1234},
		&PendingError{ID: "n5"},
		&RemovedError{LeaderID: "n1", LeaderRespAddr: "127.0.0.1:7001"},
		fmt.Errorf("replication: remove: %w", &QuorumError{ID: "x", Remaining: 4, Needed: 3}),
	}
	n := &Node{}
	for _, e := range errs {
		code, body := n.svc.errorStatus(e)
		got := statusError(code, body)
		if got.Error() != errors.Unwrap(e).Error() && got.Error() != e.Error() {
			t.Errorf("statusError(errorStatus(%v)) = %v", e, got)
		}
		for _, s := range []error{ErrQuorumAtRisk, ErrNotPromoted, ErrRemoved} {
			if errors.Is(e, s) != errors.Is(got, s) {
				t.Errorf("statusError(errorStatus(%v)) = %v: errors.Is(%v) differs", e, got, s)
			}
		}
	}
	// A bare sentinel travels without figures.
	if got := statusError(errorCode(ErrRemoved), nil); got != ErrRemoved {
		t.Errorf("statusError(ErrRemoved code, no body) = %v", got)
	}
	st := nodeStatus{ID: "n3", Term: 7, LastIndex: 1000, AppliedIndex: 998, LeaderID: "n1", LeaderRaft: "127.0.0.1:8001", LeaderResp: "127.0.0.1:7001", Ready: false, Member: true, Group: "g", Instance: 1<<63 | 5}
	got, err := decodeStatus(encodeStatus(st))
	if err != nil || got != st {
		t.Errorf("decodeStatus(encodeStatus(%+v)) = %+v, %v", st, got, err)
	}
	if _, err := decodeStatus(encodeStatus(st)[:5]); !errors.Is(err, ErrBadPayload) {
		t.Errorf("decodeStatus(truncated) = %v, want ErrBadPayload", err)
	}
}

// A node removed while it was down, restarted on its old state, believes
// it is still a member; the leader's answer tells it otherwise, so it
// fails commands at once instead of campaigning behind a CLUSTERDOWN, and
// the cluster's leader keeps its term.
func TestRestartedRemovedNodeKnowsIt(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.WaitForLeader(10 * time.Second)
	gone := c.followers(l)[0]
	c.stop(gone)
	if err := c.nodes[l].node.Members().Remove(t.Context(), c.nodes[gone].id); err != nil {
		t.Fatalf("Remove(%s), stopped = %v", c.nodes[gone].id, err)
	}
	l = c.WaitForLeader(10*time.Second, gone)
	leader := c.nodes[l]
	term := leader.node.Info().Term
	c.restart(gone)
	n := c.nodes[gone].node
	poll.Until(t, 20*time.Second, func() error {
		_, err := write(t, n, throttle("k", 9, 10, 60, 1))
		var re *RemovedError
		if !errors.As(err, &re) || re.LeaderID != leader.id {
			return fmt.Errorf("write on the restarted removed node = %v, want a *RemovedError naming %s", err, leader.id)
		}
		return nil
	})
	if !isLeader(leader.node) || leader.node.Info().Term != term {
		t.Fatalf("leader %s: ready %v, term %d (was %d): the restarted removed node disrupted it", leader.id, isLeader(leader.node), leader.node.Info().Term, term)
	}
	if vs, _ := voters(t, leader.node); slices.Contains(vs, c.nodes[gone].id) {
		t.Fatalf("voters %v still hold %s", vs, c.nodes[gone].id)
	}
}

// Failover: a follower asked to lead becomes the ready leader, and a key
// decided before the hand-over keeps its state (nothing lost, nothing
// applied twice); asked of the leader it is refused with ErrAlreadyLeader;
// the old leader follows. Concurrent writes through the old leader during
// the hand-over all get an answer (applied or a retryable error).
func TestFailover(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.WaitForLeader(10 * time.Second)
	ctx := context.Background()
	if err := c.nodes[l].node.Members().Failover(ctx); !errors.Is(err, ErrAlreadyLeader) {
		t.Fatalf("Failover on the leader: %v, want ErrAlreadyLeader", err)
	}
	for i := 0; i < 3; i++ {
		if _, err := write(t, c.nodes[l].node, throttle("f", 9, 1, 3600, 1)); err != nil {
			t.Fatal(err)
		}
	}
	f := (l + 1) % 3
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var applied, failed atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := write(t, c.nodes[(l+2)%3].node, throttle("other", 1000000, 1, 1, 1)); err != nil {
				failed.Add(1)
			} else {
				applied.Add(1)
			}
		}
	}()
	if err := c.nodes[f].node.Members().Failover(ctx); err != nil {
		t.Fatalf("Failover on follower %s: %v", c.nodes[f].id, err)
	}
	close(stop)
	wg.Wait()
	if !isLeader(c.nodes[f].node) {
		t.Fatalf("%s answered Failover but is not the ready leader", c.nodes[f].id)
	}
	if got := c.WaitForLeader(10 * time.Second); got != f {
		t.Fatalf("leader is %s, want %s", c.nodes[got].id, c.nodes[f].id)
	}
	r, err := write(t, c.nodes[f].node, throttle("f", 9, 1, 3600, 0))
	if err != nil {
		t.Fatal(err)
	}
	if r.Remaining != 7 {
		t.Fatalf("after the hand-over f has %d left, want 7 (10 - 3 taken)", r.Remaining)
	}
	t.Logf("writes through a follower during the hand-over: %d applied, %d failed", applied.Load(), failed.Load())
}
