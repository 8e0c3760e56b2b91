package resp

import (
	"context"
	"strconv"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/replication"
)

// Cluster mode: the RAFT.* commands, and the ROLE / INFO replication view
// of a replication.Node. The replication package's errors are worded for
// the wire (CLUSTERDOWN, TRYAGAIN) by appendErrorText in errors.go.

// ClusterOf adapts a replication node to the Cluster interface, for
// Config.Cluster.
func ClusterOf(n *replication.Node) Cluster { return clusterView{n} }

type clusterView struct{ n *replication.Node }

// Role answers ROLE: a leader as a Redis master listing the other members
// with their RESP addresses, except those it cannot reach (Redis lists its
// connected replicas only), each with its applied index as the leader
// last heard it (its own slave_repl_offset); before the leader has asked a member (the first second of
// a leadership) the leader's commit index stands in. A follower answers as
// a replica of the leader.
func (v clusterView) Role() RoleInfo {
	inf := v.n.Info()
	if inf.State == "leader" {
		r := RoleInfo{Leader: true, Offset: int64(inf.AppliedIndex)}
		for i := range inf.Members {
			m := &inf.Members[i]
			if m.ID == inf.NodeID || m.RespAddr == "" || !m.State.Reachable() {
				continue
			}
			h, p := cluster.SplitHostPort(m.RespAddr)
			off := inf.CommitIndex
			if m.Health {
				off = m.AppliedIndex
			}
			r.Replicas = append(r.Replicas, ReplicaInfo{Host: h, Port: p, Offset: int64(off)})
		}
		return r
	}
	r := RoleInfo{Offset: int64(inf.AppliedIndex), State: "connect"}
	if inf.LeaderRespAddr != "" && !inf.Removed {
		r.LeaderHost, r.LeaderPort = cluster.SplitHostPort(inf.LeaderRespAddr)
		r.State = "connected"
	}
	return r
}

// Routing returns the node's routing table.
func (v clusterView) Routing() *cluster.Routing { return v.n.Routing() }

// AddSlots assigns slots to the node's group.
func (v clusterView) AddSlots(ctx context.Context, slots []int) error {
	return v.n.Slots().AddSlots(ctx, slots)
}

// DelSlots unassigns slots of the node's group.
func (v clusterView) DelSlots(ctx context.Context, slots []int) error {
	return v.n.Slots().DelSlots(ctx, slots)
}

// Failover makes this node its group's leader.
func (v clusterView) Failover(ctx context.Context) error { return v.n.Members().Failover(ctx) }

// Meet introduces another group.
func (v clusterView) Meet(ctx context.Context, respAddr string) error {
	return v.n.Directory().Meet(ctx, respAddr)
}

// SetSlot changes a slot's migration state or owner.
func (v clusterView) SetSlot(ctx context.Context, slot int, action cluster.SlotAction, clusterID string) error {
	return v.n.Slots().SetSlot(ctx, slot, action, clusterID)
}

// TakeMove takes the group's move lease through its log (cluster.MoveLog).
func (v clusterView) TakeMove(ctx context.Context, holder string, lease time.Duration) error {
	return v.n.Slots().TakeMove(ctx, holder, lease)
}

// DropMove frees the group's move lease (cluster.MoveLog).
func (v clusterView) DropMove(ctx context.Context, holder string) error {
	return v.n.Slots().DropMove(ctx, holder)
}

// MoveLease returns the lease as this node's replica applied it
// (cluster.MoveLog).
func (v clusterView) MoveLease() cluster.MoveLease { return v.n.Slots().MoveLease() }

var _ cluster.MoveLog = clusterView{}

// GroupHasSlotKeys asks another group, through the node's directory,
// whether it holds a key of slot (cluster.SlotKeysAsker).
func (v clusterView) GroupHasSlotKeys(ctx context.Context, group string, slot int) (bool, error) {
	return v.n.Slots().GroupHasSlotKeys(ctx, group, slot)
}

var _ cluster.SlotKeysAsker = clusterView{}

// MoveDest returns where a key in flight was sent.
func (v clusterView) MoveDest(key []byte) string { return v.n.Slots().MoveDest(key) }

// Tombstone reports whether key was moved away and has not come back.
func (v clusterView) Tombstone(key []byte) bool { return v.n.Slots().Tombstone(key) }

// ChangeSlots makes a transaction's slot changes as one log entry.
func (v clusterView) ChangeSlots(ctx context.Context, changes []cluster.SlotChange) ([]error, error) {
	return v.n.Slots().ChangeSlots(ctx, changes)
}

// InfoFields answers INFO replication: Redis's role fields first (so that
// tools reading role/master_host/connected_slaves work), then the raft view.
// On the leader, slave<i> lines list every other member (replicaFields).
func (v clusterView) InfoFields() [][2]string {
	inf := v.n.Info()
	u := func(x uint64) string { return strconv.FormatUint(x, 10) }
	var f [][2]string
	if inf.State == "leader" {
		f = append(f, [2]string{"role", "master"})
		f = append(f, replicaFields(inf.NodeID, inf.Members)...)
	} else {
		h, p := cluster.SplitHostPort(inf.LeaderRespAddr)
		status := "down" // also on a removed node: no leader replicates to it
		if inf.LeaderRespAddr != "" && !inf.Removed {
			status = "up"
		}
		f = append(f, [2]string{"role", "slave"}, [2]string{"master_host", h}, [2]string{"master_port", strconv.Itoa(p)},
			[2]string{"master_link_status", status}, [2]string{"slave_repl_offset", u(inf.AppliedIndex)})
	}
	f = append(f, [2]string{"master_repl_offset", u(inf.AppliedIndex)})
	return append(f, raftFields(&inf)...)
}

// replicaFields are a leader's slave<i> lines and connected_slaves, for
// the members other than self: the members it reaches first (slave0 to
// slave<connected_slaves-1>, so that a tool reading that many lines sees
// the connected ones, as Redis lists only those), then the others, each
// in ID order. Each line is ip, port, state (replicaState), offset (the
// member's applied index at its last answer, the slave_repl_offset its own
// INFO replication shows, as master_repl_offset is the leader's) and lag (whole
// seconds since it last answered the leader's status request, asked once
// a second, as Redis's lag is seconds since the replica's last ack; -1
// before the leader has heard from it).
func replicaFields(self string, members []replication.Member) [][2]string {
	var up, down []*replication.Member
	for i := range members {
		switch m := &members[i]; {
		case m.ID == self:
		case replicaConnected(m):
			up = append(up, m)
		default:
			down = append(down, m)
		}
	}
	f := make([][2]string, 0, len(up)+len(down)+1)
	for i, m := range append(up, down...) {
		h, p := cluster.SplitHostPort(m.RespAddr)
		lag := "-1"
		if m.Health && m.LastContact >= 0 {
			lag = strconv.FormatInt(int64(m.Silence/time.Second), 10)
		}
		f = append(f, [2]string{"slave" + strconv.Itoa(i), "ip=" + h + ",port=" + strconv.Itoa(p) + ",state=" + replicaState(m.State) +
			",offset=" + strconv.FormatUint(m.AppliedIndex, 10) + ",lag=" + lag})
	}
	return append(f, [2]string{"connected_slaves", strconv.Itoa(len(up))})
}

// replicaConnected reports whether the leader reaches member m (online or
// catching up), the replicas Redis would count as connected.
func replicaConnected(m *replication.Member) bool {
	return m.State == cluster.HealthOnline || m.State == cluster.HealthLoading
}

// replicaState is the state= word of a member's slave<i> line: Redis's
// "online" for a member that answers and is caught up and "send_bulk" for
// one that answers but is catching up (it is being sent a snapshot or a
// long run of entries; CLUSTER SHARDS loading); "disconnected" for one
// the leader does not reach (fail? or fail in CLUSTER NODES: Redis drops a
// lost replica's line, this one stays so that dashboards see it); and
// "unknown" before the leader has asked it (the first second of a
// leadership).
func replicaState(h cluster.Health) string {
	switch h {
	case cluster.HealthOnline:
		return "online"
	case cluster.HealthLoading:
		return "send_bulk"
	case cluster.HealthSuspect, cluster.HealthFailed:
		return "disconnected"
	}
	return "unknown"
}

// raftFields are the raft_* fields shared by INFO replication and RAFT.INFO.
func raftFields(inf *replication.Info) [][2]string {
	u := func(x uint64) string { return strconv.FormatUint(x, 10) }
	b := func(x bool) string {
		if x {
			return "1"
		}
		return "0"
	}
	perEntry := "0"
	if inf.Entries > 0 {
		perEntry = strconv.FormatFloat(float64(inf.Ops)/float64(inf.Entries), 'f', 2, 64)
	}
	f := [][2]string{
		{"raft_group_id", inf.GroupID},
		{"raft_node_id", inf.NodeID},
		{"raft_state", inf.State},
		{"raft_removed", b(inf.Removed)},
		{"raft_ready", b(inf.Ready)},
		{"raft_term", u(inf.Term)},
		{"raft_leader_id", inf.LeaderID},
		{"raft_leader_raft_addr", inf.LeaderRaftAddr},
		{"raft_leader_resp_addr", inf.LeaderRespAddr},
		{"raft_commit_index", u(inf.CommitIndex)},
		{"raft_applied_index", u(inf.AppliedIndex)},
		{"raft_last_log_index", u(inf.LastLogIndex)},
		{"raft_last_applied_time_ns", strconv.FormatInt(inf.LastTime, 10)},
		{"raft_leader_changes", u(inf.LeaderChanges)},
		{"raft_entries_submitted", u(inf.Entries)},
		{"raft_ops_submitted", u(inf.Ops)},
		{"raft_ops_per_entry", perEntry},
		{"raft_mean_commit_latency_us", strconv.FormatInt(inf.CommitLatency.Microseconds(), 10)},
		{"raft_local_reads", b(inf.LocalReads)},
		{"raft_port_handshakes", strconv.Itoa(inf.RaftPort.Handshakes)},
		{"raft_port_accepted", u(inf.RaftPort.Accepted)},
		{"raft_port_refused_full", u(inf.RaftPort.RefusedFull)},
		{"raft_port_refused_evicted", u(inf.RaftPort.Evicted)},
		{"raft_port_refused_timeout", u(inf.RaftPort.TimedOut)},
		{"raft_port_refused_handshake", u(inf.RaftPort.Failed)},
		{"raft_members", strconv.Itoa(len(inf.Members))},
	}
	for _, m := range inf.Members {
		v := "raft=" + m.RaftAddr + ",resp=" + m.RespAddr + ",voter=" + b(m.Voter) + ",leader=" + b(m.Leader)
		if m.Health {
			contact := "-1"
			if m.LastContact >= 0 {
				contact = strconv.FormatInt(m.LastContact.Milliseconds(), 10)
			}
			v += ",reachable=" + b(m.Reachable) + ",last_contact_ms=" + contact + ",last_log_index=" + u(m.LastIndex) + ",lag=" + u(m.Lag) + ",health=" + m.State.String()
		}
		f = append(f, [2]string{"raft_member_" + m.ID, v})
	}
	return f
}

// RegisterCluster adds the cluster commands to s, backed by n: RAFT.JOIN,
// RAFT.REMOVE, RAFT.HELLO and RAFT.INFO. Nodes forward writes and reads to the leader
// through the replication package's own service on the raft port, not
// through RESP. Call it once, before s serves.
func RegisterCluster(s *Server, n *replication.Node) {
	s.raft = n
	for _, cmd := range commands(registerRaft) {
		s.Handle(cmd)
	}
}

func raftJoinHandler(c *Conn, args [][]byte) error {
	n := c.srv.raft
	if err := n.Members().Join(c.srv.ctx, string(args[1]), string(args[2]), string(args[3])); err != nil {
		return err
	}
	c.WriteOK()
	return nil
}

func raftRemoveHandler(c *Conn, args [][]byte) error {
	n := c.srv.raft
	if err := n.Members().Remove(c.srv.ctx, string(args[1])); err != nil {
		return err
	}
	c.WriteOK()
	return nil
}

func raftHelloHandler(c *Conn, _ [][]byte) error {
	n := c.srv.raft
	f := n.Hello().Fields()
	c.WriteMap(len(f))
	for _, kv := range f {
		c.WriteBulkString(kv[0])
		c.WriteBulkString(kv[1])
	}
	return nil
}

func raftInfoHandler(c *Conn, _ [][]byte) error {
	n := c.srv.raft
	inf := n.Info()
	var b []byte
	for _, f := range raftFields(&inf) {
		b = field(b, f[0], f[1])
	}
	c.WriteBulk(b)
	return nil
}
