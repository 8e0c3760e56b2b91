package replication

import (
	"context"
	"strconv"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/reply"
)

// ClusterView is a Node as the wire layer sees it (resp's Cluster
// interface, set by cmd/cellserver): ROLE, INFO replication and RAFT.INFO
// as data, the routing table, and the slot changes and moves of the
// node's group. Safe for concurrent use.
type ClusterView struct{ n *Node }

// NewClusterView returns n's view.
func NewClusterView(n *Node) ClusterView { return ClusterView{n} }

var (
	_ cluster.MoveLog       = ClusterView{}
	_ cluster.SlotKeysAsker = ClusterView{}
)

// Role is the ROLE reply. A leader answers like a Redis master ("master",
// offset, replicas); a follower like a replica ("slave", leader host and
// port, state, offset).
type Role struct {
	// Leader is true on the node that accepts writes.
	Leader bool
	// Offset is the replication offset: the applied index.
	Offset int64
	// Replicas lists the followers the leader reaches (leader only).
	Replicas []Replica
	// LeaderHost and LeaderPort locate the leader's RESP listener
	// (follower only).
	LeaderHost string
	LeaderPort int
	// State is the follower's link state: "connect" or "connected".
	State string
}

// Reply is r as ROLE's reply, in Redis's shape: a replica's port and
// offset are bulk strings, as Redis writes them.
func (r *Role) Reply() reply.Node {
	if !r.Leader {
		return reply.Array(reply.Bulk("slave"), reply.Bulk(r.LeaderHost), reply.Int(r.LeaderPort), reply.Bulk(r.State), reply.Int(r.Offset))
	}
	reps := reply.Array()
	for _, rep := range r.Replicas {
		reps.Elems = append(reps.Elems, reply.Array(reply.Bulk(rep.Host), reply.Bulk(strconv.Itoa(rep.Port)), reply.Bulk(strconv.FormatInt(rep.Offset, 10))))
	}
	return reply.Array(reply.Bulk("master"), reply.Int(r.Offset), reps)
}

// Replica is one follower in a leader's ROLE reply: its RESP listener and
// its applied index at its last answer to the leader's status request.
type Replica struct {
	Host   string
	Port   int
	Offset int64
}

// Role answers ROLE: a leader as a Redis master listing the other members
// with their RESP addresses, except those it cannot reach (Redis lists its
// connected replicas only), each with its applied index as the leader
// last heard it (its own slave_repl_offset); before the leader has asked a
// member (the first second of a leadership) the leader's commit index
// stands in. A follower answers as a replica of the leader.
func (v ClusterView) Role() Role {
	inf := v.n.Info()
	if inf.State == "leader" {
		r := Role{Leader: true, Offset: int64(inf.AppliedIndex)}
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
			r.Replicas = append(r.Replicas, Replica{Host: h, Port: p, Offset: int64(off)})
		}
		return r
	}
	r := Role{Offset: int64(inf.AppliedIndex), State: "connect"}
	if inf.LeaderRespAddr != "" && !inf.Removed {
		r.LeaderHost, r.LeaderPort = cluster.SplitHostPort(inf.LeaderRespAddr)
		r.State = "connected"
	}
	return r
}

// Routing returns the node's routing table.
func (v ClusterView) Routing() *cluster.Routing { return v.n.Routing() }

// AddSlots assigns slots to the node's group (CLUSTER ADDSLOTS).
func (v ClusterView) AddSlots(ctx context.Context, slots []int) error {
	return v.n.Slots().AddSlots(ctx, slots)
}

// DelSlots unassigns slots of the node's group (CLUSTER DELSLOTS).
func (v ClusterView) DelSlots(ctx context.Context, slots []int) error {
	return v.n.Slots().DelSlots(ctx, slots)
}

// Failover makes this node its group's leader (CLUSTER FAILOVER).
func (v ClusterView) Failover(ctx context.Context) error { return v.n.Members().Failover(ctx) }

// Meet introduces another group (CLUSTER MEET).
func (v ClusterView) Meet(ctx context.Context, respAddr string) error {
	return v.n.Directory().Meet(ctx, respAddr)
}

// SetSlot changes a slot's migration state or owner (CLUSTER SETSLOT).
func (v ClusterView) SetSlot(ctx context.Context, slot int, action cluster.SlotAction, clusterID string) error {
	return v.n.Slots().SetSlot(ctx, slot, action, clusterID)
}

// TakeMove takes the group's move lease through its log (cluster.MoveLog).
func (v ClusterView) TakeMove(ctx context.Context, holder string, lease time.Duration) error {
	return v.n.Slots().TakeMove(ctx, holder, lease)
}

// DropMove frees the group's move lease (cluster.MoveLog).
func (v ClusterView) DropMove(ctx context.Context, holder string) error {
	return v.n.Slots().DropMove(ctx, holder)
}

// MoveLease returns the lease as this node's replica applied it
// (cluster.MoveLog).
func (v ClusterView) MoveLease() cluster.MoveLease { return v.n.Slots().MoveLease() }

// GroupHasSlotKeys asks another group, through the node's directory,
// whether it holds a key of slot (cluster.SlotKeysAsker).
func (v ClusterView) GroupHasSlotKeys(ctx context.Context, group string, slot int) (bool, error) {
	return v.n.Slots().GroupHasSlotKeys(ctx, group, slot)
}

// MoveDest returns where a key in flight was sent.
func (v ClusterView) MoveDest(key []byte) string { return v.n.Slots().MoveDest(key) }

// Tombstone reports whether key was moved away and has not come back.
func (v ClusterView) Tombstone(key []byte) bool { return v.n.Slots().Tombstone(key) }

// ChangeSlots makes a transaction's slot changes as one log entry.
func (v ClusterView) ChangeSlots(ctx context.Context, changes []cluster.SlotChange) ([]error, error) {
	return v.n.Slots().ChangeSlots(ctx, changes)
}

// InfoFields answers INFO replication: Redis's role fields first (so that
// tools reading role/master_host/connected_slaves work), then the raft
// view. On the leader, slave<i> lines list every other member
// (ReplicaFields).
func (v ClusterView) InfoFields() [][2]string {
	inf := v.n.Info()
	u := func(x uint64) string { return strconv.FormatUint(x, 10) }
	var f [][2]string
	if inf.State == "leader" {
		f = append(f, [2]string{"role", "master"})
		f = append(f, ReplicaFields(inf.NodeID, inf.Members)...)
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
	return append(f, inf.RaftFields()...)
}

// ReplicaFields are a leader's slave<i> lines and connected_slaves, for
// the members other than self: the members it reaches first (slave0 to
// slave<connected_slaves-1>, so that a tool reading that many lines sees
// the connected ones, as Redis lists only those), then the others, each
// in ID order. Each line is ip, port, state (replicaState), offset (the
// member's applied index at its last answer, the slave_repl_offset its own
// INFO replication shows, as master_repl_offset is the leader's) and lag
// (whole seconds since it last answered the leader's status request, asked
// once a second, as Redis's lag is seconds since the replica's last ack;
// -1 before the leader has heard from it).
func ReplicaFields(self string, members []Member) [][2]string {
	var up, down []*Member
	for i := range members {
		switch m := &members[i]; {
		case m.ID == self:
		case m.State == cluster.HealthOnline || m.State == cluster.HealthLoading:
			up = append(up, m) // those Redis would count as connected
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

// RaftFields are the raft_* fields shared by INFO replication and
// RAFT.INFO, in order.
func (inf *Info) RaftFields() [][2]string {
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
