package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cellserver/cellserver/cluster"
)

// Errors of Meet and Join.
var (
	// ErrOwnGroup: Meet named a node of this very group.
	ErrOwnGroup = errors.New("replication: that node belongs to this group")
	// ErrOtherGroup: a node of another group was asked to join this one.
	ErrOtherGroup = errors.New("replication: that node belongs to another group")
)

// The directory: how the groups of one cluster learn about one another
// without a gossip bus. Each group's log records the other groups it knows
// (MEET) and where to reach them. Every node asks every known group, every
// directoryInterval, for its view (reqGroupView on the raft port, asking
// all of its members at once and trusting the answer with the highest
// term), and publishes a Routing built from the answers and its own
// group's state. A new leader in any group is therefore named everywhere
// within about one interval after its election. The leader of each group
// also keeps MEET symmetric and transitive: a group that an answer names
// but this group does not know is recorded, and a known group that does not
// know this one is told (reqMeet).

const (
	// directoryInterval is how often every known group is asked.
	directoryInterval = 500 * time.Millisecond
	// directoryStale is how long another group's view stays Reachable
	// without a fresh answer.
	directoryStale = 2 * time.Second
	// maxGroups bounds the other groups a group records (a hostile or
	// broken peer's answer cannot grow the log and the polling without
	// end).
	maxGroups = 1024
)

// groupWire is a group's answer to reqGroupView, as JSON.
type groupWire struct {
	Group     string               `json:"group"`
	Term      uint64               `json:"term"`
	LeaderID  string               `json:"leader,omitempty"`
	Members   []memberWire         `json:"members"`
	Slots     [][2]int             `json:"slots,omitempty"`
	Migrating map[int]string       `json:"migrating,omitempty"`
	Importing map[int]string       `json:"importing,omitempty"`
	Groups    map[string]peerSeeds `json:"groups,omitempty"`
	// Applied is the answering member's applied index when it read the
	// state above: of answers of one term, the most advanced is the
	// freshest (a lagging follower may not have applied a SETSLOT yet).
	Applied uint64 `json:"applied,omitempty"`
}

type memberWire struct {
	ID   string `json:"id"`
	Raft string `json:"raft"`
	Resp string `json:"resp"`
	// Health is the group leader's verdict on the member
	// (cluster.Health's word; absent where no leader's verdict is
	// known), and Offset its applied index as that leader last heard.
	Health string `json:"health,omitempty"`
	Offset uint64 `json:"offset,omitempty"`
}

// peerState is what this node knows of another group.
type peerState struct {
	seeds  peerSeeds
	wire   *groupWire // last answer; nil: none yet
	lastOK time.Time
}

// Directory is this node's view of the other groups, and the loop that
// keeps it (asking every known group, MEET): a Node's directory concern
// (Node.Directory). Safe for concurrent use.
type Directory struct {
	n     *Node
	mu    sync.Mutex
	peers map[string]*peerState // guarded by mu
	kick  chan struct{}         // a nudge to ask now and rebuild
	// leader is this group's leader's last answer, on a follower: the
	// verdicts on the members that only the leader judges; leaderAt is
	// when it came. Guarded by mu.
	leader   *groupWire
	leaderAt time.Time
}

// ownWire is this node's answer to reqGroupView: its group as it knows it.
func (dr *Directory) ownWire() *groupWire {
	n := dr.n
	inf := n.Info()
	st := n.fsm.clusterState()
	w := &groupWire{Group: n.cfg.Group, Term: inf.Term, Slots: st.Ranges(), Migrating: st.Migrating, Importing: st.Importing, Groups: st.Groups, Applied: inf.AppliedIndex}
	if !inf.Removed {
		w.LeaderID = inf.LeaderID
	}
	lw := dr.leaderVerdicts(&inf)
	for _, m := range inf.Members {
		if m.Voter && m.RespAddr != "" {
			mw := memberWire{ID: m.ID, Raft: m.RaftAddr, Resp: m.RespAddr}
			if m.Health {
				mw.Health, mw.Offset = m.State.String(), m.AppliedIndex
			} else if lw != nil {
				mw.Health, mw.Offset = lw[m.ID].Health, lw[m.ID].Offset
			}
			w.Members = append(w.Members, mw)
		}
	}
	return w
}

// leaderVerdicts returns, on a follower, the verdicts of this group's
// leader on its members, by ID, from its last answer (askLeaderView) if that
// answer is fresh (directoryStale) and comes from the leader this node
// follows in this term; nil otherwise.
func (dr *Directory) leaderVerdicts(inf *Info) map[string]memberWire {
	if inf.State == "leader" || inf.LeaderID == "" || inf.Removed {
		return nil
	}
	dr.mu.Lock()
	lw, at := dr.leader, dr.leaderAt
	dr.mu.Unlock()
	if lw == nil || time.Since(at) >= directoryStale || lw.Term != inf.Term || lw.LeaderID != inf.LeaderID {
		return nil
	}
	out := make(map[string]memberWire, len(lw.Members))
	for _, m := range lw.Members {
		out[m.ID] = m
	}
	return out
}

// askLeaderView asks this group's leader, on a follower, for its view of the
// group (reqGroupView) and keeps it for leaderVerdicts: the followers show
// the leader's verdicts on the members, so that no node of the group
// reports a member healthy that its leader cannot reach.
func (dr *Directory) askLeaderView() {
	n := dr.n
	addr, id := n.raft.LeaderWithID()
	if id == "" || string(id) == n.cfg.NodeID || n.mship.removed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, directoryInterval)
	defer cancel()
	body, err := n.fwd.do(ctx, string(addr), reqGroupView, nil, true)
	if err != nil {
		return
	}
	var w groupWire
	if json.Unmarshal(body, &w) != nil || w.Group != n.cfg.Group || w.LeaderID != string(id) {
		return
	}
	dr.mu.Lock()
	dr.leader, dr.leaderAt = &w, time.Now()
	dr.mu.Unlock()
}

// view turns w into a GroupView: the leader first, then by ID.
func (w *groupWire) view(reachable bool) cluster.GroupView {
	g := cluster.GroupView{Name: w.Group, Term: w.Term, Slots: w.Slots, Migrating: w.Migrating, Importing: w.Importing, Reachable: reachable}
	for _, m := range w.Members {
		gm := cluster.GroupMember{ID: m.ID, ClusterID: cluster.NodeID(w.Group, m.ID), RespAddr: m.Resp, RaftAddr: m.Raft, Leader: m.ID == w.LeaderID,
			Health: cluster.ParseHealth(m.Health), Offset: m.Offset}
		g.Members = append(g.Members, gm)
	}
	slices.SortFunc(g.Members, func(a, b cluster.GroupMember) int {
		switch {
		case a.Leader != b.Leader:
			if a.Leader {
				return -1
			}
			return 1
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return g
}

// Routing returns the current routing table (never nil). Safe for
// concurrent use.
func (n *Node) Routing() *cluster.Routing {
	if r := n.routing.Load(); r != nil {
		return r
	}
	return n.dir.rebuildRouting()
}

// rebuildRouting builds and publishes the routing table from this group's
// state and the directory's last answers.
func (dr *Directory) rebuildRouting() *cluster.Routing {
	n := dr.n
	n.routingMu.Lock()
	defer n.routingMu.Unlock()
	own := dr.ownWire()
	inf := own.view(own.LeaderID != "")
	groups := []cluster.GroupView{inf}
	now := time.Now()
	dr.mu.Lock()
	for name, p := range dr.peers {
		if name == n.cfg.Group {
			continue
		}
		if p.wire == nil {
			groups = append(groups, cluster.GroupView{Name: name})
			continue
		}
		groups = append(groups, p.wire.view(now.Sub(p.lastOK) < directoryStale))
	}
	dr.mu.Unlock()
	slices.SortFunc(groups, func(a, b cluster.GroupView) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	self := slices.IndexFunc(groups, func(g cluster.GroupView) bool { return g.Name == n.cfg.Group })
	r := cluster.NewRouting(self, n.cfg.NodeID, groups)
	n.routing.Store(r)
	return r
}

// clusterChanged runs on the FSM's goroutine after this group's cluster
// state changed: the routing table is rebuilt before the next entry
// applies, so that this node's own redirections follow its log at once
// (other groups' views follow within a directory interval).
func (dr *Directory) clusterChanged() {
	n := dr.n
	if n.started.Load() {
		dr.rebuildRouting()
	}
	n.kickDirectory()
}

// kickDirectory asks the directory loop to ask every group now.
func (n *Node) kickDirectory() {
	select {
	case n.dir.kick <- struct{}{}:
	default:
	}
}

// directoryLoop asks every known group for its view every
// directoryInterval (or when kicked) and rebuilds the routing table.
func (dr *Directory) directoryLoop() {
	n := dr.n
	defer n.wg.Done()
	t := time.NewTicker(directoryInterval)
	defer t.Stop()
	for {
		dr.syncPeers()
		var asking sync.WaitGroup
		asking.Add(1)
		go func() {
			defer asking.Done()
			dr.askLeaderView()
		}()
		answers := dr.askGroups()
		asking.Wait()
		dr.rebuildRouting()
		dr.learnAsync(answers)
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		case <-dr.kick:
		}
	}
}

// syncPeers makes the directory hold every group the log records, with
// the seeds the log has for it.
func (dr *Directory) syncPeers() {
	n := dr.n
	st := n.fsm.clusterState()
	dr.mu.Lock()
	defer dr.mu.Unlock()
	for name, seeds := range st.Groups {
		if p, ok := dr.peers[name]; ok {
			p.seeds = seeds
		} else {
			dr.peers[name] = &peerState{seeds: seeds}
		}
	}
}

// askGroups asks every known group for its view, all at once, records
// the answers and returns them.
func (dr *Directory) askGroups() []*groupWire {
	dr.mu.Lock()
	targets := map[string][]string{}
	for name, p := range dr.peers {
		addrs := slices.Clone(p.seeds.Raft)
		if p.wire != nil {
			for _, m := range p.wire.Members {
				addrs = append(addrs, m.Raft)
			}
		}
		slices.Sort(addrs)
		targets[name] = slices.Compact(addrs)
	}
	dr.mu.Unlock()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers []*groupWire
	)
	for name, addrs := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := dr.askGroup(name, addrs)
			if w == nil {
				return
			}
			dr.mu.Lock()
			if p, ok := dr.peers[name]; ok {
				p.wire, p.lastOK = w, time.Now()
			}
			dr.mu.Unlock()
			mu.Lock()
			answers = append(answers, w)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return answers
}

// learnAsync runs learnFrom over answers on a goroutine of its own, on the
// ready leader, unless the previous round's is still running: its log
// writes and requests to other leaders must not hold up the directory.
func (dr *Directory) learnAsync(answers []*groupWire) {
	n := dr.n
	if len(answers) == 0 || !n.ready.Load() || !n.learning.CompareAndSwap(false, true) {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer n.learning.Store(false)
		for _, w := range answers {
			dr.learnFrom(w)
		}
	}()
}

// askGroup asks every address for group name's view and returns the
// answer with the highest term, preferring one that names a leader, then
// the one that has applied the most; nil when none answered as that
// group.
func (dr *Directory) askGroup(name string, addrs []string) *groupWire {
	n := dr.n
	ctx, cancel := context.WithTimeout(n.ctx, directoryInterval)
	defer cancel()
	answers := make([]*groupWire, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, err := n.fwd.do(ctx, addr, reqGroupView, nil, true)
			if err != nil {
				return
			}
			var w groupWire
			if json.Unmarshal(body, &w) == nil && w.Group == name {
				answers[i] = &w
			}
		}()
	}
	wg.Wait()
	var best *groupWire
	for _, w := range answers {
		if w != nil && fresher(w, best) {
			best = w
		}
	}
	return best
}

// fresher reports whether answer w is a fresher view of a group than best
// (nil: none yet): a higher term; at the same term one that names a leader
// over one that does not, then the one that has applied more.
func fresher(w, best *groupWire) bool {
	switch {
	case best == nil || w.Term != best.Term:
		return best == nil || w.Term > best.Term
	case (best.LeaderID == "") != (w.LeaderID == ""):
		return w.LeaderID != ""
	}
	return w.Applied > best.Applied
}

// learnFrom runs on the ready leader after another group answered: it
// records the groups that group knows and this one does not, and tells
// that group about this one if it does not know it.
func (dr *Directory) learnFrom(w *groupWire) {
	n := dr.n
	if !n.ready.Load() {
		return
	}
	st := n.fsm.clusterState()
	for name, seeds := range w.Groups {
		_, known := st.Groups[name]
		if !known && name != n.cfg.Group && validGroupName(name) && len(seeds.Raft) > 0 && len(st.Groups) < maxGroups {
			dr.record(name, seeds)
			st.Groups[name] = seeds
		}
	}
	if _, ok := w.Groups[n.cfg.Group]; ok || w.LeaderID == "" {
		return
	}
	var leaderRaft string
	for _, m := range w.Members {
		if m.ID == w.LeaderID {
			leaderRaft = m.Raft
		}
	}
	if leaderRaft == "" {
		return
	}
	c := clusterChange{Action: actMeet, Group: n.cfg.Group, Seeds: dr.ownSeeds()}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.NoLeaderTimeout)
	defer cancel()
	if _, err := n.fwd.do(ctx, leaderRaft, reqMeet, encodeClusterChange(&c), true); err != nil {
		n.log.Debug("replication: telling another group about this one failed; retrying", "group", w.Group, "err", err)
	}
}

// record commits that group name is reachable at seeds.
func (dr *Directory) record(name string, seeds peerSeeds) {
	n := dr.n
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.NoLeaderTimeout)
	defer cancel()
	c := &clusterChange{Action: actMeet, Group: name, Seeds: seeds}
	if err := n.submit(ctx, &pending{control: encodeClusterChange(c)}); err != nil {
		n.log.Debug("replication: recording a group failed; retrying", "group", name, "err", err)
	}
}

// ownSeeds is where this group can be reached: its members' addresses.
func (dr *Directory) ownSeeds() peerSeeds {
	n := dr.n
	var s peerSeeds
	for _, m := range dr.ownWire().Members {
		s.Raft = append(s.Raft, m.Raft)
		s.Resp = append(s.Resp, m.Resp)
	}
	if len(s.Raft) == 0 {
		s.Raft, s.Resp = []string{n.RaftAddr()}, []string{n.cfg.RespAddr}
	}
	return s
}

// serveMeet handles reqMeet on the leader: another group asks to be
// recorded.
func (dr *Directory) serveMeet(ctx context.Context, payload []byte) error {
	n := dr.n
	c, err := decodeClusterChange(payload)
	if err != nil {
		return err
	}
	if c.Action != actMeet || c.Group == n.cfg.Group {
		return fmt.Errorf("%w: meet request", ErrBadPayload)
	}
	groups := n.fsm.clusterState().Groups
	cur, ok := groups[c.Group]
	switch {
	case ok && slices.Equal(cur.Raft, c.Seeds.Raft):
		return nil
	case !ok && len(groups) >= maxGroups:
		return fmt.Errorf("replication: meet %s: this group knows %d groups already, the most it keeps", c.Group, maxGroups)
	}
	if err := n.submit(ctx, &pending{control: encodeClusterChange(&c)}); err != nil {
		return err
	}
	n.kickDirectory()
	return nil
}

// Meet introduces the group of the node whose RESP address is respAddr
// (CLUSTER MEET): its group is recorded in this group's log, and that
// group learns about this one from this group's leader within a directory
// interval. ErrOwnGroup when the node belongs to this group. Meeting a
// known group again updates where it is reached.
func (dr *Directory) Meet(ctx context.Context, respAddr string) error {
	n := dr.n
	hctx, cancel := context.WithTimeout(ctx, n.cfg.NoLeaderTimeout)
	h, err := helloViaRESP(hctx, respAddr, n.cfg.Password)
	cancel()
	if err != nil {
		return fmt.Errorf("replication: meet %s: %w", respAddr, err)
	}
	switch h.Group {
	case n.cfg.Group:
		return fmt.Errorf("replication: meet %s (group %s): %w", respAddr, h.Group, ErrOwnGroup)
	case "":
		return fmt.Errorf("replication: meet %s: the node names no group (an older version)", respAddr)
	}
	c := &clusterChange{Action: actMeet, Group: h.Group, Seeds: peerSeeds{Raft: []string{h.RaftAddr}, Resp: []string{respAddr}}}
	if cur, ok := n.fsm.clusterState().Groups[h.Group]; ok {
		c.Seeds.Raft = appendNew(cur.Raft, h.RaftAddr)
		c.Seeds.Resp = appendNew(cur.Resp, respAddr)
	}
	return n.lead.onLeader(ctx, "meet", func() error { return dr.serveMeet(ctx, encodeClusterChange(c)) }, reqMeet, encodeClusterChange(c), nil)
}

// appendNew returns v with s appended unless v holds it.
func appendNew(v []string, s string) []string {
	if slices.Contains(v, s) {
		return v
	}
	return append(slices.Clone(v), s)
}

// newDirectory returns an empty directory.
func newDirectory(n *Node) Directory {
	return Directory{n: n, peers: map[string]*peerState{}, kick: make(chan struct{}, 1)}
}
