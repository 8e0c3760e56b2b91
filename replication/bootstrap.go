package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// How a node with no raft state finds its cluster, or forms one without
// forking an existing one (DESIGN.md, "Bootstrap"). Nodes with raft state
// never come here: they restart from it.

// CmdHello asks a node who it is and whether it belongs to a cluster:
// RAFT.HELLO → Hello (read-only, answered by every node, member or not).
const CmdHello = "RAFT.HELLO"

// Hello is what a node answers to RAFT.HELLO: enough for a node with no
// raft state to decide whether to join, to bootstrap or to wait.
type Hello struct {
	// ID is the node's NodeID; RaftAddr its advertised raft address and
	// RespAddr its advertised RESP address.
	ID, RaftAddr, RespAddr string
	// Group is the node's group ("" from a node that predates groups).
	Group string
	// Member is true when the node belongs to a cluster: it has raft state
	// (a log or a snapshot), a non-empty raft configuration, or knows a
	// leader. Nobody bootstraps while a node they ask is a member.
	Member bool
	// LeaderID is the leader as the node knows it ("" when none).
	LeaderID string
	// BootstrapExpect is the node's Config.BootstrapExpect.
	BootstrapExpect int
	// Bootstrap is true when the node would bootstrap a cluster of its own
	// (Config.Bootstrap, or BootstrapExpect 1).
	Bootstrap bool
}

// helloFields names Hello's fields on the wire, in order.
var helloFields = []string{"id", "raft-addr", "resp-addr", "member", "leader-id", "bootstrap-expect", "bootstrap", "group"}

// Fields returns h as the name/value pairs RAFT.HELLO answers, in a fixed
// order (booleans are "1" or "0").
func (h Hello) Fields() [][2]string {
	b := func(x bool) string {
		if x {
			return "1"
		}
		return "0"
	}
	v := []string{h.ID, h.RaftAddr, h.RespAddr, b(h.Member), h.LeaderID, strconv.Itoa(h.BootstrapExpect), b(h.Bootstrap), h.Group}
	f := make([][2]string, len(helloFields))
	for i, name := range helloFields {
		f[i] = [2]string{name, v[i]}
	}
	return f
}

// decodeHello reads a RAFT.HELLO reply (name, value, name, value ...).
// Unknown names are ignored, so that later versions may add fields; id and
// raft-addr are required.
func decodeHello(v []string) (Hello, error) {
	if len(v)%2 != 0 {
		return Hello{}, fmt.Errorf("odd number of elements (%d)", len(v))
	}
	var h Hello
	flag := func(s string) (bool, error) {
		switch s {
		case "0":
			return false, nil
		case "1":
			return true, nil
		}
		return false, fmt.Errorf("not 0 or 1: %q", s)
	}
	for i := 0; i < len(v); i += 2 {
		var err error
		switch name, val := v[i], v[i+1]; name {
		case "id":
			h.ID = val
		case "raft-addr":
			h.RaftAddr = val
		case "resp-addr":
			h.RespAddr = val
		case "member":
			h.Member, err = flag(val)
		case "leader-id":
			h.LeaderID = val
		case "bootstrap-expect":
			h.BootstrapExpect, err = strconv.Atoi(val)
		case "bootstrap":
			h.Bootstrap, err = flag(val)
		case "group":
			h.Group = val
		}
		if err != nil {
			return Hello{}, fmt.Errorf("field %s: %w", v[i], err)
		}
	}
	if h.ID == "" || h.RaftAddr == "" {
		return Hello{}, errors.New("no id or raft-addr")
	}
	return h, nil
}

// Hello returns what this node answers to RAFT.HELLO. It never blocks on
// the network.
func (n *Node) Hello() Hello {
	_, leaderID := n.raft.LeaderWithID()
	member := leaderID != "" || n.raft.LastIndex() > 0 || n.boot.hasConfiguration()
	return Hello{
		ID:              n.cfg.NodeID,
		RaftAddr:        string(n.trans.LocalAddr()),
		RespAddr:        n.cfg.RespAddr,
		Group:           n.cfg.Group,
		Member:          member,
		LeaderID:        string(leaderID),
		BootstrapExpect: n.cfg.BootstrapExpect,
		Bootstrap:       n.cfg.bootstrapsAlone(),
	}
}

// bootstrap is how a Node starts: it opens the raft state (open,
// recover.go), and finds or forms its group — bootstrap alone, with the
// expected peers, or join through one of them (discoverLoop).
type bootstrap struct{ n *Node }

// hasConfiguration reports whether this node's raft configuration lists any
// server: it bootstrapped, or a leader has replicated a configuration to it.
func (bt *bootstrap) hasConfiguration() bool {
	n := bt.n
	cf := n.raft.GetConfiguration()
	return cf.Error() == nil && len(cf.Configuration().Servers) > 0
}

// peerAnswer is one listed peer's answer to RAFT.HELLO (or why it gave none).
type peerAnswer struct {
	addr  string
	hello Hello
	err   error
}

// action is what a node with no raft state does after a discovery round.
type action int

const (
	actWait      action = iota // retry later; decision.why says for what
	actJoin                    // send RAFT.JOIN through decision.via
	actBootstrap               // BootstrapCluster with decision.servers
)

type decision struct {
	act     action
	via     string        // actJoin: RESP address of a member
	servers []raft.Server // actBootstrap: the configuration, sorted by ID
	why     string        // actWait: what the node waits for
}

// decide is the bootstrap rule, a pure function of this node's own Hello
// and its peers' answers (one per listed address). In order:
//
//  0. a peer of another group is a misconfiguration: wait (never join or
//     bootstrap with it);
//  1. a peer that belongs to a cluster wins: join through it;
//  2. while any listed peer has not answered, wait (it may be a member);
//  3. a peer with this node's id at another raft address is a
//     misconfiguration: wait;
//  4. bootstrapping alone (self.Bootstrap): only when no peer with a
//     smaller id would bootstrap alone too (that one goes first, and this
//     node joins it once it is a member);
//  5. BootstrapExpect N: only when every peer expects N too and the nodes,
//     this one included, are exactly N distinct ids; the configuration is
//     all of them, sorted by id, so every one of them bootstraps with the
//     same configuration.
func decide(self Hello, answers []peerAnswer) decision {
	for _, a := range answers {
		if a.err == nil && a.hello.Group != "" && a.hello.Group != self.Group {
			return decision{why: fmt.Sprintf("node %s at %s belongs to group %q and this node to group %q: join must list nodes of this node's group", a.hello.ID, a.addr, a.hello.Group, self.Group)}
		}
	}
	for _, a := range answers {
		if a.err == nil && a.hello.Member && a.hello.ID != self.ID {
			return decision{act: actJoin, via: a.addr}
		}
	}
	var down []string
	for _, a := range answers {
		if a.err != nil {
			down = append(down, fmt.Sprintf("%s (%v)", a.addr, a.err))
		}
	}
	if len(down) > 0 {
		return decision{why: "waiting for every listed node to answer " + CmdHello + "; no answer from " + strings.Join(down, ", ")}
	}
	nodes := map[string]Hello{self.ID: self}
	for _, a := range answers {
		h := a.hello
		if prev, ok := nodes[h.ID]; ok {
			if prev.RaftAddr != h.RaftAddr {
				return decision{why: fmt.Sprintf("node id %q answers at two raft addresses (%s and %s): every node needs its own id", h.ID, prev.RaftAddr, h.RaftAddr)}
			}
			continue // this node listed itself, or one node listed twice
		}
		nodes[h.ID] = h
	}
	ids := make([]string, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if self.Bootstrap {
		for _, id := range ids {
			if id < self.ID && nodes[id].Bootstrap {
				return decision{why: fmt.Sprintf("node %s would bootstrap too and goes first (smaller id); waiting to join it", id)}
			}
		}
		return decision{act: actBootstrap, servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(self.ID), Address: raft.ServerAddress(self.RaftAddr)}}}
	}
	for _, id := range ids {
		if h := nodes[id]; h.BootstrapExpect != self.BootstrapExpect {
			return decision{why: fmt.Sprintf("node %s has bootstrap-expect %d, this node %d: every node must expect the same number", id, h.BootstrapExpect, self.BootstrapExpect)}
		}
	}
	if len(ids) != self.BootstrapExpect {
		return decision{why: fmt.Sprintf("%d nodes without raft state answered (%s), bootstrap-expect is %d: list exactly the other nodes in join",
			len(ids), strings.Join(ids, ", "), self.BootstrapExpect)}
	}
	servers := make([]raft.Server, len(ids))
	for i, id := range ids {
		servers[i] = raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(nodes[id].RaftAddr)}
	}
	return decision{act: actBootstrap, servers: servers}
}

// startPatience is how long a node without raft state waits for its peers
// before its "not in a cluster yet" lines become warnings.
const startPatience = 15 * time.Second

// discoverLoop brings a node with no raft state into a cluster: it asks the
// Join peers (RAFT.HELLO), then joins, bootstraps or waits as decide says,
// every round until it is a member or the node closes. Plain Join (neither
// Bootstrap nor BootstrapExpect) only joins: it sends RAFT.JOIN to each
// peer in turn.
func (bt *bootstrap) discoverLoop() {
	n := bt.n
	defer n.wg.Done()
	peers := n.cfg.joinPeers()
	bootstrapping := n.cfg.Bootstrap || n.cfg.BootstrapExpect > 0
	var lastWhy string
	var lastLog time.Time
	started := time.Now()
	backoff := 100 * time.Millisecond
	for round := 1; ; round++ {
		if bt.hasConfiguration() {
			n.log.Info("replication: this node is a member (a configuration was replicated to it)", "rounds", round-1)
			bt.announce()
			return
		}
		d := decision{act: actJoin, via: peers[(round-1)%len(peers)]}
		if bootstrapping {
			d = decide(n.Hello(), bt.askPeers(peers))
		}
		switch d.act {
		case actJoin:
			if err := bt.joinThrough(d.via); err != nil {
				n.log.Warn("replication: join attempt failed; retrying", "via", d.via, "round", round, "err", err)
				break
			}
			n.log.Info("replication: joined the cluster", "via", d.via, "rounds", round)
			return
		case actBootstrap:
			err := n.raft.BootstrapCluster(raft.Configuration{Servers: d.servers}).Error()
			switch {
			case errors.Is(err, raft.ErrCantBootstrap):
				n.log.Info("replication: not bootstrapping: raft state arrived from the cluster meanwhile")
			case err != nil:
				d.why = fmt.Sprintf("bootstrap failed: %v", err)
			default:
				n.gid.markOwnLog()
				ids := make([]string, len(d.servers))
				for i, s := range d.servers {
					ids[i] = string(s.ID)
				}
				n.log.Info("replication: bootstrapped a new cluster", "servers", strings.Join(ids, ","))
			}
			if d.why == "" {
				bt.announce()
				return
			}
		}
		if d.why != "" && (d.why != lastWhy || time.Since(lastLog) >= 10*time.Second) {
			// The nodes of a new group start a few seconds apart: waiting
			// for them is news (info) until it lasts startPatience.
			level := slog.LevelInfo
			if time.Since(started) >= startPatience {
				level = slog.LevelWarn
			}
			n.log.Log(context.Background(), level, "replication: not in a cluster yet; retrying", "reason", d.why, "round", round)
			lastWhy, lastLog = d.why, time.Now()
		}
		if !bt.pause(backoff) {
			return
		}
		backoff = min(2*backoff, time.Second)
	}
}

// announce makes sure the cluster has this node's RESP address (for ROLE
// and INFO): a node that became a member by bootstrapping together with
// others, or by a leader replicating to it, never sent RAFT.JOIN with it.
// Join is a no-op for a voter already present, except that it records the
// address; it retries until that is done or the node closes.
func (bt *bootstrap) announce() {
	n := bt.n
	backoff := 100 * time.Millisecond
	for {
		if addr, ok := n.fsm.member(n.cfg.NodeID); ok && addr == n.cfg.RespAddr {
			return
		}
		err := n.members.Join(n.ctx, n.cfg.NodeID, string(n.trans.LocalAddr()), n.cfg.RespAddr)
		if err == nil {
			return
		}
		n.log.Debug("replication: recording this node's RESP address; retrying", "err", err)
		if !bt.pause(backoff) {
			return
		}
		backoff = min(2*backoff, time.Second)
	}
}

// joinThrough sends RAFT.JOIN for this node to the RESP server at addr.
func (bt *bootstrap) joinThrough(addr string) error {
	n := bt.n
	// The member may forward to the leader, which probes this node before
	// adding it: up to three NoLeaderTimeouts in all.
	ctx, cancel := context.WithTimeout(n.ctx, 4*n.cfg.NoLeaderTimeout)
	defer cancel()
	return joinViaRESP(ctx, addr, n.cfg.Password, n.cfg.NodeID, string(n.trans.LocalAddr()), n.cfg.RespAddr)
}

// askPeers sends RAFT.HELLO to every peer at once, each bounded by
// NoLeaderTimeout (a stopped process accepts connections and never
// answers), and returns their answers in the order of peers.
func (bt *bootstrap) askPeers(peers []string) []peerAnswer {
	n := bt.n
	out := make([]peerAnswer, len(peers))
	var wg sync.WaitGroup
	for i, addr := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(n.ctx, n.cfg.NoLeaderTimeout)
			defer cancel()
			h, err := helloViaRESP(ctx, addr, n.cfg.Password)
			out[i] = peerAnswer{addr: addr, hello: h, err: err}
		}()
	}
	wg.Wait()
	return out
}

// pause waits d; false when the node closes first.
func (bt *bootstrap) pause(d time.Duration) bool {
	n := bt.n
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-n.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
