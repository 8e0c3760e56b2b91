package replication

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cellserver/cellserver/cluster"
)

// Members is a Node's membership changes (Node.Members): members join,
// are removed, hand leadership over and move address (identity.go). The
// membership state they change, and the autopilot that promotes and
// cleans up, are in autopilot.go.
type Members struct{ n *Node }

// Join adds a member: id (its NodeID), raftAddr (its raft transport
// address) and respAddr (its RESP address, replicated through the log for
// ROLE and INFO). On a follower the request goes to the leader through the
// forwarding service. The leader first checks that it can connect to
// raftAddr and that the node there passes the handshake (same TLS CA, same
// cluster secret), then adds it as a non-voter, which does not count
// towards the quorum, and promotes it to voter once it answers status
// requests and has caught up with the log (autopilot.go). Join returns nil
// once the node is a voter and its RESP address is replicated; when that
// does not happen within NoLeaderTimeout it fails with a *PendingError
// (ErrNotPromoted): the node stays a non-voter and is promoted when it
// catches up. Joining an existing member with the same addresses is a
// no-op success, so a joining node may retry freely, and an outcome left
// uncertain by a leader change is settled by retrying. Joining an existing
// member at another raft address moves it there, keeping its suffrage,
// once the leader has confirmed that the node at the new address is that
// member (identity.go); otherwise it fails with ErrIDInUse.
func (ms *Members) Join(ctx context.Context, id, raftAddr, respAddr string) error {
	n := ms.n
	if id == "" || raftAddr == "" || respAddr == "" {
		return fmt.Errorf("replication: join: id and addresses must not be empty")
	}
	return n.lead.onLeader(ctx, "join", func() error {
		return ms.join(ctx, id, raftAddr, respAddr)
	}, reqJoin, encodeJoin(id, raftAddr, respAddr), nil)
}

// join is Join on the ready leader.
func (ms *Members) join(ctx context.Context, id, raftAddr, respAddr string) error {
	n := ms.n
	deadline := time.Now().Add(n.cfg.NoLeaderTimeout)
	voter, err := ms.addNonvoter(ctx, id, raftAddr, respAddr)
	if err != nil {
		return err
	}
	for !voter {
		var pend *PendingError
		voter, pend, err = n.mship.promote(ctx, id)
		switch {
		case err != nil:
			return err
		case voter:
		case !time.Now().Before(deadline):
			return pend
		default:
			t := time.NewTimer(100 * time.Millisecond) // the non-voter catches up meanwhile
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-n.ctx.Done():
				t.Stop()
				return ErrShutdown
			}
		}
	}
	return ms.recordResp(ctx, id, respAddr)
}

// addNonvoter adds id at raftAddr as a non-voter unless it is a member at
// that address already, or moves member id to raftAddr (moveMember);
// voter reports whether it is a voter. respAddr is kept to be replicated
// once it is promoted.
func (ms *Members) addNonvoter(ctx context.Context, id, raftAddr, respAddr string) (voter bool, err error) {
	n := ms.n
	m := &n.mship
	m.changeMu.Lock()
	defer m.changeMu.Unlock()
	servers, index, err := n.mship.configuration()
	if err != nil {
		return false, err
	}
	i := serverIndex(servers, id)
	switch {
	case i >= 0 && string(servers[i].Address) == raftAddr:
		ms.setPending(id, respAddr)
		return servers[i].Suffrage == raft.Voter, nil
	case i >= 0:
		// The member at a new address (identity.go): moved only once the
		// leader has checked that the node there is that member.
		return ms.moveMember(ctx, servers, index, i, raftAddr, respAddr)
	}
	if err := ms.probe(ctx, id, raftAddr); err != nil {
		if le := (*LogError)(nil); errors.As(err, &le) {
			return false, le
		}
		return false, fmt.Errorf("replication: join %s: %w", id, err)
	}
	ms.setPending(id, respAddr)
	if err := n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.NoLeaderTimeout).Error(); err != nil {
		return false, translate("join", err)
	}
	n.log.Info("replication: added a non-voter; it is promoted once caught up", "member", id, "raft", raftAddr)
	servers, _, err = n.mship.configuration()
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(servers, func(s raft.Server) bool { return string(s.ID) == id && s.Suffrage == raft.Voter }), nil
}

// setPending keeps respAddr to be replicated once id is promoted.
func (ms *Members) setPending(id, respAddr string) {
	n := ms.n
	m := &n.mship
	m.mu.Lock()
	if m.pending == nil {
		m.pending = map[string]string{}
	}
	m.pending[id] = respAddr
	m.mu.Unlock()
}

// recordResp replicates id's RESP address unless it is recorded already,
// while id is a member (under changeMu, so that a removal between the
// promotion and this cannot leave the address of a node that left).
func (ms *Members) recordResp(ctx context.Context, id, respAddr string) error {
	n := ms.n
	m := &n.mship
	m.changeMu.Lock()
	defer m.changeMu.Unlock()
	servers, _, err := n.mship.configuration()
	if err != nil {
		return err
	}
	if serverIndex(servers, id) < 0 {
		return fmt.Errorf("replication: join %q: %w", id, ErrUnknownNode)
	}
	if addr, ok := n.fsm.member(id); !ok || addr != respAddr {
		if err := n.submit(ctx, &pending{member: &memberChange{id: id, respAddr: respAddr}}); err != nil {
			return err
		}
	}
	m.mu.Lock()
	if m.pending[id] == respAddr {
		delete(m.pending, id)
	}
	m.mu.Unlock()
	return nil
}

// probe connects to the raft port at raftAddr and completes the handshake,
// within NoLeaderTimeout, then asks the node for its status and refuses a
// node that answers with another group, or whose raft log is not this
// group's (checkLog: a *LogError for new member id). A node that completes the
// handshake but does not answer is accepted as before groups existed (it
// joins as a non-voter and is promoted only once it acts as a member).
func (ms *Members) probe(ctx context.Context, id, raftAddr string) error {
	n := ms.n
	ctx, cancel := context.WithTimeout(ctx, n.cfg.NoLeaderTimeout)
	defer cancel()
	c, err := n.stream.dial(ctx, raftAddr, headerForward)
	if err != nil {
		return fmt.Errorf("cannot connect to its raft address (tls-replication, the CA and cluster-secret must match on every node): %w", err)
	}
	_ = c.Close()
	st, err := n.mship.askStatus(ctx, raftAddr)
	if err != nil {
		return nil
	}
	if st.Group != "" && st.Group != n.cfg.Group {
		return fmt.Errorf("it belongs to group %q and this is group %q: %w", st.Group, n.cfg.Group, ErrOtherGroup)
	}
	if le := checkLog(n.fsm.groupID.Load(), st, false); le != nil {
		le.ID, le.Addr = id, raftAddr
		return le
	}
	return nil
}

// Remove removes member id from the cluster. On a follower the request
// goes to the leader through the forwarding service. A voter is removed
// only if the voters left keep a reachable majority (the leader asks each
// for its status first); otherwise Remove fails with a *QuorumError
// (ErrQuorumAtRisk) and changes nothing. Removing an unreachable member is
// therefore possible as long as the others are up, and removing the leader
// makes it step down once the change commits; it stays up as a removed
// node (Write and ReadNow fail with ErrRemoved) until it is joined again.
// ErrUnknownNode if id is not a member; a removal whose first attempt had
// an uncertain outcome and that later finds id gone succeeds.
func (ms *Members) Remove(ctx context.Context, id string) error {
	n := ms.n
	uncertain := false
	err := n.lead.onLeader(ctx, "remove", func() error { return ms.removeMember(ctx, id, "") }, reqRemove, encodeRemove(id), &uncertain)
	if uncertain && errors.Is(err, ErrUnknownNode) {
		return nil
	}
	return err
}

// removeMember removes id on the ready leader after the quorum check; why
// is logged (empty for an operator's request).
func (ms *Members) removeMember(ctx context.Context, id, why string) error {
	n := ms.n
	m := &n.mship
	m.changeMu.Lock()
	defer m.changeMu.Unlock()
	servers, _, err := n.mship.configuration()
	if err != nil {
		return err
	}
	i := serverIndex(servers, id)
	_, hasAddr := n.fsm.member(id)
	if !hasAddr && i < 0 {
		return fmt.Errorf("replication: remove %q: %w", id, ErrUnknownNode)
	}
	if i >= 0 && servers[i].Suffrage == raft.Voter {
		reach := n.mship.healthRound(ctx, servers)
		if err := quorumAfterRemoval(id, servers, reach); err != nil {
			return err
		}
	}
	// The address entry goes first: once the leader removes itself it can
	// commit nothing more.
	if hasAddr {
		if err := n.submit(ctx, &pending{member: &memberChange{id: id, remove: true}}); err != nil {
			return err
		}
	}
	if i >= 0 {
		if err := n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.NoLeaderTimeout).Error(); err != nil {
			return translate("remove", err)
		}
	}
	m.mu.Lock()
	delete(m.pending, id)
	delete(m.warned, id)
	m.mu.Unlock()
	if why == "" {
		why = "RAFT.REMOVE"
	}
	n.log.Info("replication: removed a member", "member", id, "by", why)
	return nil
}

// onLeader runs fn on the leader: here when this node is the ready leader,
// otherwise by sending the request (kind, payload) to the leader's
// forwarding service. fn must be idempotent (membership changes check the
// configuration first). It retries while no leader is known, the target
// was not the leader, the request could not be sent, or its outcome is
// uncertain (leadership lost, the connection failed after sending), for up
// to twice NoLeaderTimeout, so that the answer is definite: applied, or a
// definite error. uncertain, when not nil, is set when an attempt's
// outcome was uncertain.
func (ld *leadership) onLeader(ctx context.Context, what string, fn func() error, kind byte, payload []byte, uncertain *bool) error {
	return ld.onLeaderReply(ctx, what, fn, kind, payload, uncertain, nil)
}

// onLeaderReply is onLeader whose forwarded request has an answer: reply,
// when not nil, decodes it.
func (ld *leadership) onLeaderReply(ctx context.Context, what string, fn func() error, kind byte, payload []byte, uncertain *bool, reply func([]byte) error) error {
	n := ld.n
	deadline := time.Now().Add(2 * n.cfg.NoLeaderTimeout)
	for {
		var err error
		forwarded := false
		switch {
		case n.ready.Load():
			err = fn()
		case n.raft.State() == raft.Leader:
			err = ErrNotLeader // not ready yet: wait for the barrier
		default:
			addr, ok := n.mship.membershipTarget()
			if !ok {
				err = ErrNoLeader
				break
			}
			forwarded = true
			cctx, cancel := context.WithDeadline(ctx, deadline.Add(n.cfg.NoLeaderTimeout))
			var body []byte
			body, err = n.fwd.do(cctx, addr, kind, payload, true)
			cancel()
			if err == nil && reply != nil {
				err = reply(body)
			}
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		unsure := errors.Is(err, ErrLeadershipLost) || (forwarded && !definite(err))
		if unsure && uncertain != nil {
			*uncertain = true
		}
		leaderless := errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoLeader) || errors.Is(err, errNotSent)
		switch {
		case leaderless:
			if !n.waitLeaderChange(deadline) {
				return fmt.Errorf("replication: %s: %w", what, ErrNoLeader)
			}
		case unsure:
			if !time.Now().Before(deadline) {
				return fmt.Errorf("replication: %s: %w", what, ErrNoLeader)
			}
			t := time.NewTimer(100 * time.Millisecond) // then ask again
			select {
			case <-t.C:
			case <-n.leaderChanged():
				t.Stop()
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		default:
			return err
		}
	}
}

// definite reports whether err is an answer (a sentinel by its code, or
// another node's error reply) rather than a transport failure.
func definite(err error) bool {
	var (
		re *RemoteError
		pe *PeerError
		se *cluster.SlotError
	)
	if errors.As(err, &re) || errors.As(err, &pe) || errors.As(err, &se) || errors.Is(err, errNotSent) {
		return true
	}
	for _, s := range codeErrors {
		if s != nil && s != ErrLeadershipLost && errors.Is(err, s) {
			return true
		}
	}
	return false
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
	// Health is true when the fields below are known: on the ready
	// leader, for the other members it has tracked since it took over
	// (status requests once a second).
	Health bool
	// Reachable is true when the member answered the last status request.
	Reachable bool
	// LastContact is how long ago it last answered (-1: never, since this
	// leader took over).
	LastContact time.Duration
	// LastIndex is its last log index at its last answer, and Lag how many
	// entries that is behind the leader's last index now.
	LastIndex, Lag uint64
	// AppliedIndex is its applied index at its last answer: its replication
	// offset (what its own INFO replication reports as slave_repl_offset).
	AppliedIndex uint64
	// Silence is how long since it last answered, or since this leader
	// began asking it when it never did (0 for this node).
	Silence time.Duration
	// State is the leader's verdict (cluster.JudgeHealth over the fields
	// above and Config.NodeTimeout): the one every view shows.
	// cluster.HealthUnknown when Health is false.
	State cluster.Health
}

// Info is a snapshot of a node's replication status (RAFT.INFO, ROLE,
// INFO replication).
type Info struct {
	// GroupID is the group id this node's raft log records ("" until
	// one is applied: a new node, or a log from before group ids whose
	// leader has not recorded one yet).
	GroupID string
	// NodeID is this node's id; State is "leader", "follower", "candidate",
	// "shutdown", or "removed" while this node is not a member of the
	// cluster any more (Removed is then true and every command fails with
	// ErrRemoved). Ready is true on a leader that has applied every entry
	// of earlier terms and so serves commands.
	NodeID  string
	State   string
	Ready   bool
	Removed bool
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
	// RaftPort counts the inbound connections of the raft port.
	RaftPort RaftPortStats
}

// Info returns the node's replication status. It never blocks on the
// network.
func (n *Node) Info() Info {
	leaderAddr, leaderID := n.raft.LeaderWithID()
	inf := Info{
		GroupID:        n.gid.groupID(),
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
		RaftPort:       n.stream.handshaking.stats(),
	}
	if leaderID != "" {
		inf.LeaderRespAddr, _ = n.lead.leaderResp()
	}
	if n.mship.removed.Load() {
		inf.State, inf.Removed = "removed", true
		if l := n.mship.leader.Load(); l != nil && leaderID == "" {
			inf.LeaderID, inf.LeaderRaftAddr, inf.LeaderRespAddr = l.id, l.raft, l.resp
		}
	}
	if e := n.done.load(); e > 0 {
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
			if h, ok := n.mship.memberHealthOf(string(s.ID)); ok {
				m := &inf.Members[len(inf.Members)-1]
				m.Health, m.Reachable, m.LastContact, m.LastIndex, m.AppliedIndex = true, h.reachable, -1, h.status.LastIndex, h.status.AppliedIndex
				if !h.lastContact.IsZero() {
					m.LastContact = time.Since(h.lastContact)
					m.Silence = m.LastContact
					m.Lag = n.mship.lagOf(h.status)
				} else {
					m.Silence = time.Since(h.since)
					m.Lag = inf.LastLogIndex
				}
				m.State = cluster.JudgeHealth(!h.lastContact.IsZero() || !h.downSince.IsZero(), h.reachable, m.Silence, m.Lag, n.mship.loadingLag(), h.status.LastIndex > 0, n.cfg.NodeTimeout)
			}
		}
	}
	slices.SortFunc(inf.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return inf
}

// RaftAddr returns the advertised raft transport address (useful when
// Config.RaftAddr had port 0).
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// Failover makes this node the group's leader (CLUSTER FAILOVER sent to a
// replica): the leader hands leadership over with raft's leadership
// transfer (it stops taking writes, brings this node's log up to date and
// tells it to start an election at once), and Failover returns once this
// node leads and serves, within 2 × Config.NoLeaderTimeout. Writes in
// flight during the hand-over wait for the new leader as in any election.
//
// Errors: ErrAlreadyLeader on the leader; ErrNotVoter on a non-voter (it
// cannot be elected); ErrNoLeader when no leader answers or the transfer
// did not complete in time (then the group elects as usual and may keep
// its leader); ErrRemoved, ErrShutdown, ctx's error.
func (ms *Members) Failover(ctx context.Context) error {
	n := ms.n
	if err := n.mship.removedErr(); err != nil {
		return err
	}
	if n.raft.State() == raft.Leader {
		return ErrAlreadyLeader
	}
	id := n.cfg.NodeID
	if err := n.lead.onLeader(ctx, "failover", func() error { return ms.transferLeadership(id) }, reqFailover, encodeRemove(id), nil); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * n.cfg.NoLeaderTimeout)
	for !n.ready.Load() {
		if time.Now().After(deadline) {
			return fmt.Errorf("replication: failover: leadership was handed over but this node does not lead yet: %w", ErrNoLeader)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := n.ctx.Err(); err != nil {
			return ErrShutdown
		}
		n.waitLeaderChange(time.Now().Add(50 * time.Millisecond))
	}
	return nil
}

// transferLeadership hands leadership to voter id, on the ready leader.
func (ms *Members) transferLeadership(id string) error {
	n := ms.n
	if id == n.cfg.NodeID {
		return nil // asked by a node that has since become the leader
	}
	servers, _, err := n.mship.configuration()
	if err != nil {
		return err
	}
	i := serverIndex(servers, id)
	switch {
	case i < 0:
		return fmt.Errorf("replication: failover to %q: %w", id, ErrUnknownNode)
	case servers[i].Suffrage != raft.Voter:
		return fmt.Errorf("replication: failover to %q: %w", id, ErrNotVoter)
	}
	n.log.Info("replication: handing leadership over", "to", id)
	if err := n.futureError(n.raft.LeadershipTransferToServer(servers[i].ID, servers[i].Address)); err != nil {
		return translate("failover", err)
	}
	return nil
}

// SetSetting makes name take value on every node of the group: it commits
// a setting entry to the log, and each node's Config.OnSetting receives it
// as the node applies it (and again from a snapshot that holds it). Only
// the leader takes it: a follower answers ErrNotLeader (the caller names
// the leader, LeaderResp). It returns once the entry is applied here.
func (n *Node) SetSetting(ctx context.Context, name, value string) error {
	return n.submit(ctx, &pending{setting: &settingChange{name: name, value: value}})
}

// LeaderResp returns the RESP address of the group's leader, if one is
// known (for an error that names it).
func (n *Node) LeaderResp() (string, bool) { return n.lead.leaderResp() }

// SetTLS replaces the certificate this node presents on its raft port and
// the CA it checks other nodes against (Config.TLS: Certificates[0] and
// RootCAs), for certificate rotation: handshakes from now on use them,
// connections already open keep their session. It fails, changing
// nothing, on a node started without TLS (turning TLS on or off needs a
// restart) or for a configuration without a certificate or CA.
func (n *Node) SetTLS(c *tls.Config) error { return n.stream.sec.setTLS(c) }
