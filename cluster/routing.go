package cluster

import (
	"crypto/sha1"
	"encoding/hex"
	"net"

	"github.com/cellserver/cellserver/internal/hashslot"
)

// Several groups form one Redis Cluster: each group owns a set of hash
// slots, recorded in its own log, and learns the other groups' members,
// leaders and slots by asking them (replication's directory). Routing is
// the resulting table, rebuilt whenever this group's slot state or another
// group's answer changes.

// NodeID is the 40 lowercase hex digits the Redis Cluster protocol
// uses as a node's id: the SHA-1 of "group/nodeID", the same on every node
// of every group and across restarts.
func NodeID(group, nodeID string) string {
	h := sha1.Sum([]byte(group + "/" + nodeID))
	return hex.EncodeToString(h[:])
}

// GroupMember is a voting member of a group with a replicated RESP address.
type GroupMember struct {
	ID        string // its NodeID
	ClusterID string // NodeID(group, ID)
	RespAddr  string // host:port of its RESP listener
	RaftAddr  string // host:port of its raft transport
	Leader    bool   // the group's leader as last known
	// Health is the group leader's verdict on it (HealthUnknown where no
	// leader's verdict is known), and Offset its applied index as that
	// leader last heard (0: unknown).
	Health Health
	Offset uint64
}

// GroupView is what one group looks like from this node.
type GroupView struct {
	Name string
	// Term is the group's raft term as last seen (the config epoch CLUSTER
	// NODES reports).
	Term uint64
	// Members lists the voters with a RESP address: the leader (when
	// known) first, then by ID.
	Members []GroupMember
	// Slots are the slot ranges the group owns, inclusive, ascending and
	// disjoint.
	Slots [][2]int
	// Migrating and Importing map a slot to the other group's name.
	Migrating, Importing map[int]string
	// Reachable: for this node's own group, a leader is known; for another
	// group, its last answer came within the staleness bound.
	Reachable bool
}

// Leader returns the group's leader, if known.
func (g *GroupView) Leader() (GroupMember, bool) {
	if len(g.Members) > 0 && g.Members[0].Leader {
		return g.Members[0], true
	}
	return GroupMember{}, false
}

// Routing is the cluster as this node sees it: every known group and which
// serves each slot. Immutable once published; Node.Routing returns the
// current one.
type Routing struct {
	// Sharded is false while this group owns no slot and knows no other
	// group: it then serves every key, as a single shard owning 0–16383.
	Sharded bool
	// Self is the index of this node's group in Groups.
	Self int
	// SelfID is this node's NodeID.
	SelfID string
	// Groups lists every known group, sorted by name.
	Groups []GroupView

	owner     [hashslot.Count]int16 // index into Groups, -1: unowned
	migrating [hashslot.Count]int16 // target group of a slot of Self, -1: none
	importing [hashslot.Count]int16 // source group of a slot imported by Self, -1: none
}

// better reports whether group g's claim of slot beats group o's (see
// NewRouting).
func (r *Routing) better(g, o, slot int) bool {
	_, migrating := r.Groups[r.Self].Migrating[slot]
	fresh := func(x int) bool { return x == r.Self || r.Groups[x].Reachable }
	switch {
	case g == r.Self:
		return !migrating || !fresh(o)
	case o == r.Self:
		return migrating && fresh(g)
	}
	return fresh(g) && !fresh(o)
}

// Owner returns the index in Groups of the group owning slot, or -1. In an
// unsharded routing every slot is Self's.
func (r *Routing) Owner(slot int) int {
	if !r.Sharded {
		return r.Self
	}
	return int(r.owner[slot])
}

// GroupOfKey names the group that serves key's slot (ok false when no group
// does) and, while that slot migrates out of it, the group importing it
// ("" otherwise): where a front door that routes by group (Envoy's
// rate-limit service) sends an op on key, and where it goes after ASK.
func (r *Routing) GroupOfKey(key []byte) (owner, importer string, ok bool) {
	slot := hashslot.Of(key)
	g := r.Owner(slot)
	if g < 0 {
		return "", "", false
	}
	return r.Groups[g].Name, r.Groups[g].Migrating[slot], true
}

// MigratingTo returns the index of the group slot migrates to from Self,
// or -1.
func (r *Routing) MigratingTo(slot int) int { return int(r.migrating[slot]) }

// ImportingFrom returns the index of the group Self imports slot from, or
// -1.
func (r *Routing) ImportingFrom(slot int) int { return int(r.importing[slot]) }

// Group returns the index of the group named name, or -1.
func (r *Routing) Group(name string) int {
	for i := range r.Groups {
		if r.Groups[i].Name == name {
			return i
		}
	}
	return -1
}

// NodeGroup returns the index of the group with a member whose ClusterID
// is clusterID, or -1.
func (r *Routing) NodeGroup(clusterID string) int {
	for i := range r.Groups {
		for _, m := range r.Groups[i].Members {
			if m.ClusterID == clusterID {
				return i
			}
		}
	}
	return -1
}

// Ranges returns the slot ranges group g serves in this table (each slot
// counted for its one winner, see NewRouting), inclusive and ascending.
// In an unsharded table Self serves 0–16383.
func (r *Routing) Ranges(g int) [][2]int {
	var out [][2]int
	for s := 0; s < hashslot.Count; s++ {
		if r.Owner(s) != g {
			continue
		}
		if n := len(out); n > 0 && out[n-1][1] == s-1 {
			out[n-1][1] = s
		} else {
			out = append(out, [2]int{s, s})
		}
	}
	return out
}

// RedirectAddr returns the RESP address a MOVED or ASK redirection to
// group g names: its leader's when one is known (members list the leader
// first), else its first member's, so that a client finds the group even
// mid-election; "" when g is out of range or has no member.
func (r *Routing) RedirectAddr(g int) string {
	if g < 0 || g >= len(r.Groups) || len(r.Groups[g].Members) == 0 {
		return ""
	}
	return r.Groups[g].Members[0].RespAddr
}

// NewRouting builds the routing table of this node, whose group is
// groups[self] and whose NodeID is selfID, from the groups' Slots,
// Migrating and Importing. Sharded is set when any group owns a slot or
// more than one group is known. Only Self's Migrating and Importing are
// routed (another group's are for display). Where two groups claim a slot
// (the instant of a handover, or a view not refreshed yet), this group's
// own claim wins (its log is current) unless it is migrating the slot out
// and a group with a fresh view claims it (the source hands over);
// between other groups, the first by name whose view is fresh. groups must be sorted by name; they are kept, not copied.
func NewRouting(self int, selfID string, groups []GroupView) *Routing {
	r := &Routing{Self: self, SelfID: selfID, Groups: groups, Sharded: len(groups) > 1}
	for i := range r.owner {
		r.owner[i], r.migrating[i], r.importing[i] = -1, -1, -1
	}
	for g := range groups {
		for _, rg := range groups[g].Slots {
			for s := max(rg[0], 0); s <= min(rg[1], hashslot.Count-1); s++ {
				r.Sharded = true
				if o := r.owner[s]; o < 0 || r.better(g, int(o), s) {
					r.owner[s] = int16(g)
				}
			}
		}
	}
	for s, name := range groups[self].Migrating {
		if s >= 0 && s < hashslot.Count {
			r.migrating[s] = int16(r.Group(name))
		}
	}
	for s, name := range groups[self].Importing {
		if s >= 0 && s < hashslot.Count {
			r.importing[s] = int16(r.Group(name))
		}
	}
	return r
}

// GroupOfAddr returns the index of a known group with a member whose RESP
// address may be addr (host:port), or -1 when none may. It errs towards a
// match: the same port with a host that is not an IP literal on either
// side counts, since a name may resolve to a member. The rule that a move
// in flight may be put back only when its destination is in no group
// (CLUSTER ABORTMOVE) relies on that.
func (r *Routing) GroupOfAddr(addr string) int {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return -1
	}
	ip := net.ParseIP(host)
	for g := range r.Groups {
		for _, m := range r.Groups[g].Members {
			mh, mp, err := net.SplitHostPort(m.RespAddr)
			if err != nil || mp != port {
				continue
			}
			mip := net.ParseIP(mh)
			if mh == host || ip == nil || mip == nil || mip.Equal(ip) || mip.IsUnspecified() {
				return g
			}
		}
	}
	return -1
}

// SlotOwner is Table's: whether Self, another group or none serves slot.
func (r *Routing) SlotOwner(slot int) Owner {
	switch o := r.Owner(slot); {
	case o == r.Self:
		return Here
	case o < 0:
		return Nobody
	}
	return Elsewhere
}

// SlotMigrating is Table's.
func (r *Routing) SlotMigrating(slot int) bool { return r.MigratingTo(slot) >= 0 }

// SlotImporting is Table's.
func (r *Routing) SlotImporting(slot int) bool { return r.ImportingFrom(slot) >= 0 }

var _ Table = (*Routing)(nil)
