package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// Join adds a voting member: id (its NodeID), raftAddr (its raft transport
// address) and respAddr (its RESP address, replicated through the log for
// ROLE and INFO). On a follower the request goes to the leader through the
// forwarding service. Before adding a new voter the leader checks that it
// can connect to raftAddr and that the node there passes the handshake
// (same TLS CA, same cluster secret): a voter raft cannot reach would count
// towards the quorum without ever voting. Joining an existing member with
// the same addresses is a no-op success, so a joining node may retry
// freely.
func (n *Node) Join(ctx context.Context, id, raftAddr, respAddr string) error {
	if id == "" || raftAddr == "" || respAddr == "" {
		return fmt.Errorf("replication: join: id and addresses must not be empty")
	}
	return n.onLeader(ctx, "join", func() error {
		return n.join(ctx, id, raftAddr, respAddr)
	}, reqJoin, encodeJoin(id, raftAddr, respAddr))
}

// join is Join on the ready leader.
func (n *Node) join(ctx context.Context, id, raftAddr, respAddr string) error {
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return translate("join", err)
	}
	present := false
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == id && string(s.Address) == raftAddr && s.Suffrage == raft.Voter {
			present = true
		}
	}
	if !present {
		if err := n.probe(ctx, raftAddr); err != nil {
			return fmt.Errorf("replication: join %s: %w", id, err)
		}
		if err := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.NoLeaderTimeout).Error(); err != nil {
			return translate("join", err)
		}
	}
	if addr, ok := n.fsm.member(id); ok && addr == respAddr {
		return nil
	}
	return n.submit(ctx, &pending{member: &memberChange{id: id, respAddr: respAddr}})
}

// probe connects to the raft port at raftAddr and completes the handshake
// (nothing else is sent), within NoLeaderTimeout.
func (n *Node) probe(ctx context.Context, raftAddr string) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.NoLeaderTimeout)
	defer cancel()
	c, err := n.stream.dial(ctx, raftAddr, headerForward)
	if err != nil {
		return fmt.Errorf("cannot connect to its raft address (tls-replication, the CA and cluster-secret must match on every node): %w", err)
	}
	return c.Close()
}

// Remove removes member id from the cluster (it shuts its raft down once it
// learns of it). On a follower the request goes to the leader through the
// forwarding service. Removing the leader makes it step down after the
// change commits. ErrUnknownNode if id is not a member.
func (n *Node) Remove(ctx context.Context, id string) error {
	return n.onLeader(ctx, "remove", func() error { return n.remove(ctx, id) }, reqRemove, encodeRemove(id))
}

// remove is Remove on the ready leader.
func (n *Node) remove(ctx context.Context, id string) error {
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return translate("remove", err)
	}
	found := slices.ContainsFunc(cf.Configuration().Servers, func(s raft.Server) bool { return string(s.ID) == id })
	if _, ok := n.fsm.member(id); !ok && !found {
		return fmt.Errorf("replication: remove %q: %w", id, ErrUnknownNode)
	}
	// The address entry goes first: once the leader removes itself it can
	// commit nothing more.
	if err := n.submit(ctx, &pending{member: &memberChange{id: id, remove: true}}); err != nil {
		return err
	}
	if found {
		if err := n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.NoLeaderTimeout).Error(); err != nil {
			return translate("remove", err)
		}
	}
	return nil
}

// onLeader runs fn on the leader: here when this node is the ready leader,
// otherwise by sending the request (kind, payload) to the leader's
// forwarding service. It retries while no leader is known, the target was
// not the leader or the request could not be sent, up to NoLeaderTimeout.
func (n *Node) onLeader(ctx context.Context, what string, fn func() error, kind byte, payload []byte) error {
	deadline := time.Now().Add(n.cfg.NoLeaderTimeout)
	for {
		var err error
		switch {
		case n.ready.Load():
			err = fn()
		case n.raft.State() == raft.Leader:
			err = ErrNotLeader // not ready yet: wait for the barrier
		default:
			addr, ok := n.forwardTarget()
			if !ok {
				err = ErrNoLeader
				break
			}
			cctx, cancel := context.WithDeadline(ctx, deadline.Add(n.cfg.NoLeaderTimeout))
			_, err = n.fwd.do(cctx, addr, kind, payload, true)
			cancel()
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrNoLeader) && !errors.Is(err, errNotSent) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !n.waitLeaderChange(deadline) {
			return fmt.Errorf("replication: %s: %w", what, ErrNoLeader)
		}
	}
}

// joinLoop asks the member at Config.Join (a RESP address) to add this
// node, retrying until it succeeds or the node closes.
func (n *Node) joinLoop() {
	defer n.wg.Done()
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		// The member may forward to the leader, which probes this node
		// before adding it: up to three NoLeaderTimeouts in all.
		ctx, cancel := context.WithTimeout(n.ctx, 4*n.cfg.NoLeaderTimeout)
		err := joinViaRESP(ctx, n.cfg.Join, n.cfg.Password, n.cfg.NodeID, string(n.trans.LocalAddr()), n.cfg.RespAddr)
		cancel()
		if err == nil {
			n.log.Info("replication: joined the cluster", "via", n.cfg.Join, "attempts", attempt)
			return
		}
		n.log.Warn("replication: join attempt failed; retrying", "via", n.cfg.Join, "attempt", attempt, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-n.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// Member is one cluster member as Info reports it.
type Member struct {
	// ID is the member's NodeID.
	ID string
	// RaftAddr is its raft transport address.
	RaftAddr string
	// RespAddr is its advertised RESP address ("" until replicated).
	RespAddr string
	// Voter is false for a non-voting member.
	Voter bool
	// Leader is true for the current leader as this node knows it.
	Leader bool
}

// Info is a snapshot of a node's replication status (RAFT.INFO, ROLE,
// INFO replication).
type Info struct {
	// NodeID is this node's id; State is "leader", "follower", "candidate"
	// or "shutdown". Ready is true on a leader that has applied every
	// entry of earlier terms and so serves commands.
	NodeID string
	State  string
	Ready  bool
	// Term is the current raft term.
	Term uint64
	// LeaderID, LeaderRaftAddr and LeaderRespAddr describe the leader as
	// this node knows it ("" when none is known).
	LeaderID, LeaderRaftAddr, LeaderRespAddr string
	// CommitIndex, AppliedIndex and LastLogIndex are raft indexes.
	CommitIndex, AppliedIndex, LastLogIndex uint64
	// LastTime is the last applied stamped time (Unix ns), the instant
	// local reads and active expiry use here.
	LastTime int64
	// LeaderChanges counts the leader changes this node observed since it
	// started.
	LeaderChanges uint64
	// Members lists the raft configuration, sorted by ID.
	Members []Member
	// Entries and Ops count the command entries this node submitted as
	// leader and the operations they carried: Ops/Entries is the mean
	// group-commit batch size.
	Entries, Ops uint64
	// CommitLatency is the mean time from submitting an entry to raft to
	// its being applied here, over every entry this node submitted.
	CommitLatency time.Duration
	// LocalReads reports whether reads are served locally (possibly stale).
	LocalReads bool
}

// Info returns the node's replication status. It never blocks on the
// network.
func (n *Node) Info() Info {
	leaderAddr, leaderID := n.raft.LeaderWithID()
	inf := Info{
		NodeID:         n.cfg.NodeID,
		State:          strings.ToLower(n.raft.State().String()),
		Ready:          n.ready.Load(),
		Term:           n.raft.CurrentTerm(),
		LeaderID:       string(leaderID),
		LeaderRaftAddr: string(leaderAddr),
		CommitIndex:    n.raft.CommitIndex(),
		AppliedIndex:   n.raft.AppliedIndex(),
		LastLogIndex:   n.raft.LastIndex(),
		LastTime:       n.fsm.LastTime(),
		LeaderChanges:  n.leaderChanges.Load(),
		Entries:        n.batches.Load(),
		Ops:            n.batchedOps.Load(),
		LocalReads:     n.cfg.LocalReads,
	}
	if leaderID != "" {
		inf.LeaderRespAddr, _ = n.leaderResp()
	}
	if e := n.seqDone(); e > 0 {
		inf.CommitLatency = time.Duration(n.commitNanos.Load() / e)
	}
	members := n.fsm.Members()
	if cf := n.raft.GetConfiguration(); cf.Error() == nil {
		for _, s := range cf.Configuration().Servers {
			inf.Members = append(inf.Members, Member{
				ID:       string(s.ID),
				RaftAddr: string(s.Address),
				RespAddr: members[string(s.ID)],
				Voter:    s.Suffrage == raft.Voter,
				Leader:   s.ID == leaderID,
			})
		}
	}
	slices.SortFunc(inf.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return inf
}

// RaftAddr returns the advertised raft transport address (useful when
// Config.RaftAddr had port 0).
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// seqDone is the number of entries submitted and completed.
func (n *Node) seqDone() uint64 { return n.done.load() }
