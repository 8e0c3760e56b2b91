package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Membership safety (DESIGN.md, "Membership"): a leader-side loop, the
// autopilot, asks every other member for its status once a second over the
// forwarding service (reqStatus), records whom it reached and how far
// behind each is, promotes caught-up non-voters, and when
// Config.CleanupDeadServers is set removes members it has not reached for
// Config.DeadServerTimeout. Every node also watches its own membership, so
// that a removed node fails commands at once instead of waiting for a
// leader that will never contact it.

const (
	// autopilotInterval is the time between two rounds of the autopilot.
	autopilotInterval = time.Second
	// watchInterval is how often a node re-reads its raft configuration
	// to notice that it was removed or added back.
	watchInterval = 250 * time.Millisecond
	// promoteMaxLag is the most log entries a non-voter may be behind the
	// leader's last index and still be promoted.
	promoteMaxLag = 256
)

// membership is a Node's membership state. Its zero value is ready to use.
type membership struct {
	n *Node

	// changeMu serialises the configuration changes this node makes as
	// leader (join, promotion, removal, cleanup), so that each quorum
	// check holds until its change is made.
	changeMu sync.Mutex

	mu      sync.Mutex
	health  map[string]*memberHealth // the leader's view, by id; guarded by mu
	gen     uint64                   // leadGen the health belongs to; guarded by mu
	pending map[string]string        // RESP addresses to record once promoted, by id; guarded by mu
	warned  map[string]bool          // cleanup refusals already logged; guarded by mu

	// removed is set while this node is not in its latest configuration
	// and knows no other leader (or a leader said it is not a member).
	removed atomic.Bool
	// leader is the last leader known from other nodes while removed.
	leader atomic.Pointer[leaderRef]
	// servers is the latest raft configuration this node knows.
	servers atomic.Pointer[[]raft.Server]
}

// leaderRef names a leader: its id, raft and RESP addresses.
type leaderRef struct{ id, raft, resp string }

// memberHealth is what the leader knows of one other member.
type memberHealth struct {
	since       time.Time // when this leader started tracking it
	lastContact time.Time // last status answer; zero: never
	reachable   bool      // the last status request was answered
	downSince   time.Time // first unanswered request of the current outage; zero: none
	status      nodeStatus
}

// status is this node's answer to a status request from asker.
func (mp *membership) status(asker string) nodeStatus {
	n := mp.n
	addr, id := n.raft.LeaderWithID()
	st := nodeStatus{
		ID:           n.cfg.NodeID,
		Term:         n.raft.CurrentTerm(),
		LastIndex:    n.raft.LastIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
		LeaderID:     string(id),
		LeaderRaft:   string(addr),
		Ready:        n.ready.Load(),
		Group:        n.cfg.Group,
		Instance:     n.origin,
		GroupID:      n.gid.groupID(),
	}
	st.OwnLog = st.GroupID == "" && n.gid.ownLog.Load()
	if id != "" {
		st.LeaderResp, _ = n.lead.leaderResp()
	}
	if s := mp.servers.Load(); s != nil {
		st.Member = serverIndex(*s, asker) >= 0
	} else {
		st.Member = true // not read yet: accuse nobody
	}
	return st
}

// askStatus sends a status request to the node at raftAddr.
func (mp *membership) askStatus(ctx context.Context, raftAddr string) (nodeStatus, error) {
	n := mp.n
	body, err := n.fwd.do(ctx, raftAddr, reqStatus, appendBytes(nil, []byte(n.cfg.NodeID)), true)
	if err != nil {
		return nodeStatus{}, err
	}
	return decodeStatus(body)
}

// statusTimeout bounds one status request.
func (mp *membership) statusTimeout() time.Duration {
	n := mp.n
	return max(n.cfg.NoLeaderTimeout/2, 100*time.Millisecond)
}

// serverIndex is the index of member id in servers, or -1.
func serverIndex(servers []raft.Server, id string) int {
	return slices.IndexFunc(servers, func(s raft.Server) bool { return string(s.ID) == id })
}

// configuration returns the latest raft configuration and its index.
func (mp *membership) configuration() ([]raft.Server, uint64, error) {
	n := mp.n
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, 0, translate("configuration", err)
	}
	return cf.Configuration().Servers, cf.Index(), nil
}

// healthRound asks every member other than this node for its status, in
// parallel, records the answers, and returns which members answered (this
// node counts as reachable). Only meaningful on the leader.
func (mp *membership) healthRound(ctx context.Context, servers []raft.Server) map[string]bool {
	n := mp.n
	gen := n.leadGen.Load()
	ch, asked := mp.askOthers(ctx, servers)
	reach := map[string]bool{n.cfg.NodeID: true}
	now := time.Now()
	m := &n.mship
	m.mu.Lock()
	if m.gen != gen || m.health == nil {
		m.gen, m.health = gen, map[string]*memberHealth{}
	}
	for id := range m.health {
		if serverIndex(servers, id) < 0 {
			delete(m.health, id)
		}
	}
	for _, s := range servers {
		if _, ok := m.health[string(s.ID)]; !ok && string(s.ID) != n.cfg.NodeID {
			m.health[string(s.ID)] = &memberHealth{since: now}
		}
	}
	m.mu.Unlock()
	for range asked {
		a := <-ch
		reach[a.id] = a.err == nil
		var down, back time.Time
		m.mu.Lock()
		if h := m.health[a.id]; h != nil && m.gen == gen {
			h.reachable = a.err == nil
			switch {
			case a.err == nil:
				h.lastContact, h.status = time.Now(), a.st
				back, h.downSince = h.downSince, time.Time{}
			case h.downSince.IsZero():
				h.downSince = now
				down = now
			}
		}
		m.mu.Unlock()
		// One line when a member stops answering and one when it is back,
		// whatever raft logs about it meanwhile (raftSink coalesces that).
		switch {
		case !down.IsZero():
			n.log.Warn("replication: a member does not answer the leader; shown as fail? then fail (cluster-node-timeout)",
				"member", a.id, "err", a.err, "node_timeout", n.cfg.NodeTimeout)
		case !back.IsZero():
			n.log.Info("replication: a member answers the leader again", "member", a.id, "down_for", time.Since(back).Round(time.Millisecond))
		}
	}
	return reach
}

// quorumAfterRemoval checks that removing id from servers leaves voters of
// which a majority is reachable; a *QuorumError if not.
func quorumAfterRemoval(id string, servers []raft.Server, reach map[string]bool) error {
	remaining, reachable := 0, 0
	for _, s := range servers {
		if s.Suffrage != raft.Voter || string(s.ID) == id {
			continue
		}
		remaining++
		if reach[string(s.ID)] {
			reachable++
		}
	}
	if needed := remaining/2 + 1; reachable < needed {
		return &QuorumError{ID: id, Reachable: reachable, Remaining: remaining, Needed: needed}
	}
	return nil
}

// lagOf returns how many entries a member that answered st is behind this
// node's last index.
func (mp *membership) lagOf(st nodeStatus) uint64 {
	n := mp.n
	last := n.raft.LastIndex()
	if st.LastIndex >= last {
		return 0
	}
	return last - st.LastIndex
}

// loadingLag is the lag (entries) past which a member that answers counts
// as catching up (cluster.HealthLoading): more than the leader keeps after
// a snapshot, so it is being sent a snapshot or a long run of entries; at
// least promoteMaxLag, the lag a non-voter is promoted at.
func (mp *membership) loadingLag() uint64 {
	n := mp.n
	return max(promoteMaxLag, n.cfg.TrailingLogs)
}

// caughtUp reports whether a member that answered st may be promoted: it
// follows this leader's term and is at most promoteMaxLag entries behind.
func (mp *membership) caughtUp(st nodeStatus) bool {
	n := mp.n
	return st.Term == n.raft.CurrentTerm() && mp.lagOf(st) <= promoteMaxLag
}

// promote promotes non-voter id to voter if it answers a status request
// and has caught up. promoted is true once id is a voter (also when it
// already was); otherwise pend says how far it is. ErrUnknownNode if id is
// no longer a member.
func (mp *membership) promote(ctx context.Context, id string) (promoted bool, pend *PendingError, err error) {
	n := mp.n
	m := &n.mship
	m.changeMu.Lock()
	defer m.changeMu.Unlock()
	servers, index, err := mp.configuration()
	if err != nil {
		return false, nil, err
	}
	i := serverIndex(servers, id)
	if i < 0 {
		return false, nil, fmt.Errorf("replication: promote %q: %w", id, ErrUnknownNode)
	}
	s := servers[i]
	if s.Suffrage == raft.Voter {
		return true, nil, nil
	}
	cctx, cancel := context.WithTimeout(ctx, mp.statusTimeout())
	st, serr := mp.askStatus(cctx, string(s.Address))
	cancel()
	pend = &PendingError{ID: id, Reachable: serr == nil && st.ID == id}
	if !pend.Reachable {
		pend.Lag = n.raft.LastIndex()
		return false, pend, nil
	}
	pend.Lag = mp.lagOf(st)
	if !mp.caughtUp(st) {
		return false, pend, nil
	}
	if err := n.raft.AddVoter(s.ID, s.Address, index, n.cfg.NoLeaderTimeout).Error(); err != nil {
		return false, nil, translate("promote", err)
	}
	n.log.Info("replication: promoted a caught-up non-voter to voter", "member", id, "lag", pend.Lag)
	return true, nil, nil
}

// autopilot runs the leader-side rounds until the node closes.
func (mp *membership) autopilot() {
	n := mp.n
	defer n.wg.Done()
	t := time.NewTicker(autopilotInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		if !n.ready.Load() {
			continue
		}
		mp.autopilotRound()
	}
}

// autopilotRound is one round on the ready leader: refresh every member's
// health, promote caught-up non-voters, and clean up dead members when
// configured to.
func (mp *membership) autopilotRound() {
	n := mp.n
	servers, _, err := mp.configuration()
	if err != nil {
		return
	}
	reach := mp.healthRound(n.ctx, servers)
	for _, s := range servers {
		if s.Suffrage == raft.Voter || !reach[string(s.ID)] || n.ctx.Err() != nil {
			continue
		}
		id := string(s.ID)
		promoted, _, err := mp.promote(n.ctx, id)
		if err != nil {
			n.log.Warn("replication: promote non-voter", "member", id, "err", err)
			continue
		}
		if promoted {
			mp.recordPending(id)
		}
	}
	if n.cfg.CleanupDeadServers {
		mp.cleanupDead()
	}
}

// recordPending replicates the RESP address a join left for id, once id
// is a voter.
func (mp *membership) recordPending(id string) {
	n := mp.n
	m := &n.mship
	m.mu.Lock()
	addr, ok := m.pending[id]
	m.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.NoLeaderTimeout)
	defer cancel()
	if err := n.members.recordResp(ctx, id, addr); err != nil {
		n.log.Warn("replication: record a promoted member's RESP address", "member", id, "err", err)
	}
}

// cleanupDead removes the members this leader has not reached for
// DeadServerTimeout, each only if the voters left keep a reachable
// majority.
func (mp *membership) cleanupDead() {
	n := mp.n
	m := &n.mship
	now := time.Now()
	var dead []string
	m.mu.Lock()
	for id, h := range m.health {
		last := h.lastContact
		if last.IsZero() {
			last = h.since
		}
		if !h.reachable && now.Sub(last) > n.cfg.DeadServerTimeout {
			dead = append(dead, id)
		}
	}
	m.mu.Unlock()
	slices.Sort(dead)
	for _, id := range dead {
		if n.ctx.Err() != nil || !n.ready.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(n.ctx, 2*n.cfg.NoLeaderTimeout)
		err := n.members.removeMember(ctx, id, "dead-server cleanup")
		cancel()
		var q *QuorumError
		switch {
		case err == nil:
			n.log.Warn("replication: removed a member unreachable for longer than the dead-server timeout", "member", id, "timeout", n.cfg.DeadServerTimeout)
		case errors.As(err, &q):
			m.mu.Lock()
			first := !m.warned[id]
			if m.warned == nil {
				m.warned = map[string]bool{}
			}
			m.warned[id] = true
			m.mu.Unlock()
			if first {
				n.log.Warn("replication: not removing a dead member: the rest would have no reachable majority",
					"member", id, "reachable", q.Reachable, "remaining", q.Remaining, "needed", q.Needed)
			}
		case errors.Is(err, ErrUnknownNode):
		default:
			n.log.Warn("replication: dead-server cleanup", "member", id, "err", err)
		}
	}
}

// memberHealthOf returns the leader's view of member id (ok false when
// this node is not the ready leader or has not tracked id).
func (mp *membership) memberHealthOf(id string) (memberHealth, bool) {
	n := mp.n
	if !n.ready.Load() {
		return memberHealth{}, false
	}
	if id == n.cfg.NodeID {
		now := time.Now()
		return memberHealth{since: now, lastContact: now, reachable: true, status: nodeStatus{ID: id, LastIndex: n.raft.LastIndex(), AppliedIndex: n.raft.AppliedIndex()}}, true
	}
	m := &n.mship
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.health[id]
	if !ok || m.gen != n.leadGen.Load() {
		return memberHealth{}, false
	}
	return *h, true
}

// watchMembership keeps the removed flag and the cached configuration up
// to date, until the node closes: on every leader change and every
// watchInterval it re-reads the configuration; while removed, or while no
// leader is known, it asks the other members once a second who leads and
// whether this node is still a member.
func (mp *membership) watchMembership() {
	n := mp.n
	defer n.wg.Done()
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	var lastAsk time.Time
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		case <-n.leaderChanged():
		}
		servers, index, err := mp.configuration()
		if err != nil {
			continue
		}
		mp.servers.Store(&servers)
		in := serverIndex(servers, n.cfg.NodeID) >= 0
		_, leader := n.raft.LeaderWithID()
		otherLeader := leader != "" && string(leader) != n.cfg.NodeID
		// A configuration not known to be committed may still be undone
		// by the next leader (a removal replicated here, then lost with
		// its leader): only a committed one is trusted alone; otherwise
		// the leader's own answer (askLeader) decides.
		committed := index <= n.raft.CommitIndex()
		was := mp.removed.Load()
		removed := was
		switch {
		case !in && len(servers) > 0 && !otherLeader && committed:
			removed = true // left out, and nobody leads it any more
		case leader != "":
			removed = false // a leader contacts it, or it leads
		}
		if leader == "" && len(servers) > 0 && time.Since(lastAsk) >= autopilotInterval {
			lastAsk = time.Now()
			if ref, member, ok := mp.askLeader(servers); ok {
				mp.leader.Store(ref)
				removed = removed || !member
			}
		}
		if removed != was {
			mp.removed.Store(removed)
			if removed {
				n.log.Warn("replication: this node is not a member of the cluster any more; RAFT.JOIN it again to rejoin")
			} else {
				n.log.Info("replication: this node is a member of the cluster again")
			}
		}
	}
}

// statusAnswer is one member's answer to a status request: err is set when
// it did not answer, or answered as another id.
type statusAnswer struct {
	id  string
	st  nodeStatus
	err error
}

// askOthers sends a status request to every member but this node, all at
// once, each bounded by statusTimeout and ctx. Exactly asked answers come on
// the channel, which is buffered for them all, so every asker ends even if
// nobody reads.
func (mp *membership) askOthers(ctx context.Context, servers []raft.Server) (answers <-chan statusAnswer, asked int) {
	n := mp.n
	ch := make(chan statusAnswer, len(servers))
	for _, s := range servers {
		if string(s.ID) == n.cfg.NodeID {
			continue
		}
		asked++
		go func(id, addr string) {
			cctx, cancel := context.WithTimeout(ctx, mp.statusTimeout())
			defer cancel()
			st, err := mp.askStatus(cctx, addr)
			if err == nil && st.ID != id {
				err = fmt.Errorf("%s answered as %q", addr, st.ID)
			}
			ch <- statusAnswer{id, st, err}
		}(string(s.ID), string(s.Address))
	}
	return ch, asked
}

// askLeader asks the other servers, all at once, who leads; ok when one
// that is the ready leader, or knows the leader, answered. member is the
// leader's own verdict on this node when the leader answered, true
// otherwise. It takes at most one status timeout, however many members are
// down.
func (mp *membership) askLeader(servers []raft.Server) (ref *leaderRef, member, ok bool) {
	n := mp.n
	ctx, cancel := context.WithCancel(n.ctx)
	defer cancel()
	answers, asked := mp.askOthers(ctx, servers)
	// Every answer is awaited (the askers end at once when cancelled), so
	// that none outlives the watcher that Close waits for.
	member = true
	ready := false
	for range asked {
		a := <-answers
		st := a.st
		if ready || a.err != nil || st.LeaderID == "" || st.LeaderID == n.cfg.NodeID {
			continue
		}
		ref = &leaderRef{id: st.LeaderID, raft: st.LeaderRaft, resp: st.LeaderResp}
		ok = true
		if st.Ready {
			ready, member = true, st.Member
			cancel()
		}
	}
	return ref, member, ok
}

// removedErr is ErrRemoved (a *RemovedError naming the last known leader)
// while this node is removed, nil otherwise. It reads cached state only.
func (mp *membership) removedErr() error {
	if !mp.removed.Load() {
		return nil
	}
	e := &RemovedError{}
	if l := mp.leader.Load(); l != nil {
		e.LeaderID, e.LeaderRespAddr = l.id, l.resp
	}
	return e
}

// membershipTarget is where a membership request goes when this node is
// not the leader: the leader's raft address, or while removed the leader
// other members named.
func (mp *membership) membershipTarget() (string, bool) {
	n := mp.n
	if addr, ok := n.forwardTarget(); ok {
		return addr, true
	}
	if l := mp.leader.Load(); l != nil && mp.removed.Load() && l.raft != "" {
		return l.raft, true
	}
	return "", false
}
