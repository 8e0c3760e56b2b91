package cluster

import (
	"maps"
	"net"
	"slices"
	"strconv"

	"github.com/cellserver/cellserver/internal/hashslot"
)

// The CLUSTER views (SLOTS, SHARDS, NODES, INFO, REPLICAS) as data, taken
// from one Routing. Each group is one Redis Cluster shard: its leader the
// master, its other members replicas; while it has no known leader every
// member shows as a master and it serves no slot. The wire layer words
// and formats them.

// ViewNode is one member of a group as the views show it.
type ViewNode struct {
	ID   string // cluster node id (NodeID)
	Host string // of its RESP address
	Port int    // of its RESP address (0 when it does not parse)
	Bus  int    // its raft port, reported as the cluster bus port
	// Myself: this very node.
	Myself bool
	// Master: the group's leader, or any member while none is known.
	Master bool
	// MasterID is a replica's leader's id ("" for a master).
	MasterID string
	// Health is its group leader's verdict (GroupMember.Health), or
	// HealthFailed for every member of a group that is not Linked.
	// Offset is its applied index as the leader last heard (0: unknown).
	Health Health
	Offset uint64
}

// SlotMark is a slot migrating to, or importing from, the group whose
// node id (its leader's, else its first member's) is NodeID.
type SlotMark struct {
	Slot   int
	NodeID string
}

// Shard is one group as the views show it.
type Shard struct {
	Name string
	// Epoch is the group's raft term (the config epoch).
	Epoch uint64
	// Slots are the ranges it serves, inclusive and ascending; none while
	// it has no known leader.
	Slots [][2]int
	// Migrating and Importing are its slot marks, by slot.
	Migrating, Importing []SlotMark
	// Nodes are its members, the leader (when known) first.
	Nodes []ViewNode
	// Leader: a leader is known (the first node).
	Leader bool
	// Linked: this node's group, or another that answered recently (its
	// nodes are not shown failed).
	Linked bool
	// Healthy: a leader is known and it is Linked, so it serves its slots.
	Healthy bool
}

// SlotRange is one served range of CLUSTER SLOTS: slots First..Last of
// group Group (an index in Routing.Groups and in Shards).
type SlotRange struct{ First, Last, Group int }

// Summary is CLUSTER INFO's figures.
type Summary struct {
	// Assigned slots some group owns; OK of those, owned by a Healthy one.
	Assigned, OK int
	// KnownNodes: members of every known group; Size: groups owning a slot.
	KnownNodes, Size int
	// CurrentEpoch is the highest term of the known groups; MyEpoch this
	// group's.
	CurrentEpoch, MyEpoch uint64
}

// Shards returns every known group as the views show it, in Groups' order.
func (r *Routing) Shards() []Shard {
	out := make([]Shard, len(r.Groups))
	for g := range r.Groups {
		out[g] = r.shard(g)
	}
	return out
}

func (r *Routing) shard(g int) Shard {
	gv := &r.Groups[g]
	leader, hasLeader := gv.Leader()
	linked := g == r.Self || gv.Reachable
	s := Shard{Name: gv.Name, Epoch: gv.Term, Leader: hasLeader, Linked: linked, Healthy: hasLeader && gv.Reachable}
	if hasLeader {
		s.Slots = r.Ranges(g)
	}
	marks := func(m map[int]string) []SlotMark {
		var out []SlotMark
		for _, slot := range slices.Sorted(maps.Keys(m)) {
			out = append(out, SlotMark{Slot: slot, NodeID: r.groupNodeID(r.Group(m[slot]))})
		}
		return out
	}
	s.Migrating, s.Importing = marks(gv.Migrating), marks(gv.Importing)
	for i := range gv.Members {
		m := &gv.Members[i]
		n := ViewNode{ID: m.ClusterID, Myself: g == r.Self && m.ID == r.SelfID, Master: i == 0 || !hasLeader, Health: m.Health, Offset: m.Offset}
		if !linked {
			n.Health = HealthFailed
		}
		n.Host, n.Port = SplitHostPort(m.RespAddr)
		_, n.Bus = SplitHostPort(m.RaftAddr)
		if !n.Master {
			n.MasterID = leader.ClusterID
		}
		s.Nodes = append(s.Nodes, n)
	}
	return s
}

// groupNodeID returns the cluster node id that stands for group g: its
// leader's when known, else its first member's ("" when it has none).
func (r *Routing) groupNodeID(g int) string {
	if g < 0 || g >= len(r.Groups) || len(r.Groups[g].Members) == 0 {
		return ""
	}
	return r.Groups[g].Members[0].ClusterID
}

// SlotRanges returns every served slot range (CLUSTER SLOTS), by first
// slot: the ranges of each group with a known leader.
func (r *Routing) SlotRanges() []SlotRange {
	var out []SlotRange
	for g := range r.Groups {
		if _, ok := r.Groups[g].Leader(); !ok {
			continue
		}
		for _, rg := range r.Ranges(g) {
			out = append(out, SlotRange{rg[0], rg[1], g})
		}
	}
	slices.SortFunc(out, func(a, b SlotRange) int { return a.First - b.First })
	return out
}

// Summary returns CLUSTER INFO's figures.
func (r *Routing) Summary() Summary {
	var s Summary
	owning := make([]bool, len(r.Groups))
	healthy := make([]bool, len(r.Groups))
	for g := range r.Groups {
		_, ok := r.Groups[g].Leader()
		healthy[g] = ok && r.Groups[g].Reachable
	}
	for slot := range hashslot.Count {
		g := r.Owner(slot)
		if g < 0 || g >= len(r.Groups) {
			continue
		}
		s.Assigned++
		owning[g] = true
		if healthy[g] {
			s.OK++
		}
	}
	for g := range r.Groups {
		if owning[g] {
			s.Size++
		}
		s.KnownNodes += len(r.Groups[g].Members)
		s.CurrentEpoch = max(s.CurrentEpoch, r.Groups[g].Term)
	}
	s.MyEpoch = r.Groups[r.Self].Term
	return s
}

// MyID returns this node's cluster node id.
func (r *Routing) MyID() string { return NodeID(r.Groups[r.Self].Name, r.SelfID) }

// SplitHostPort splits host:port for the CLUSTER and ROLE views (port 0
// when it does not parse).
func SplitHostPort(addr string) (string, int) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	p, _ := strconv.Atoi(port)
	return host, p
}
