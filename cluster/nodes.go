package cluster

import (
	"strconv"

	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/internal/reply"
)

// The CLUSTER NODES, REPLICAS, SLOTS and SHARDS replies of a Routing, in
// Redis's words and shapes: the wire layer only frames or writes them.

// AppendNodeLine appends the CLUSTER NODES line of node i of sh (with its
// trailing newline); the leader's line carries the shard's slots and slot
// marks.
func (sh *Shard) AppendNodeLine(b []byte, i int) []byte {
	n := &sh.Nodes[i]
	b = append(b, n.ID...)
	b = append(b, ' ')
	b = append(b, n.Host...)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(n.Port), 10)
	b = append(b, '@')
	b = strconv.AppendInt(b, int64(n.Bus), 10)
	b = append(b, ' ')
	if n.Myself {
		b = append(b, "myself,"...)
	}
	master := "-"
	if n.Master {
		b = append(b, "master"...)
	} else {
		b = append(b, "slave"...)
		master = n.MasterID
	}
	flag, link := n.Health.nodeFlag()
	b = append(b, flag...)
	b = append(b, ' ')
	b = append(b, master...)
	b = append(b, " 0 0 "...)
	b = strconv.AppendUint(b, sh.Epoch, 10)
	b = append(b, ' ')
	b = append(b, link...)
	if i == 0 && sh.Leader {
		b = sh.appendSlotMarks(b)
	}
	return append(b, '\n')
}

// appendSlotMarks appends the shard's slot ranges, then its migrating
// ("[slot->-<target-id>]") and importing ("[slot-<-<source-id>]") slots, as
// Redis prints them in CLUSTER NODES.
func (sh *Shard) appendSlotMarks(b []byte) []byte {
	for _, rg := range sh.Slots {
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(rg[0]), 10)
		if rg[1] != rg[0] {
			b = append(b, '-')
			b = strconv.AppendInt(b, int64(rg[1]), 10)
		}
	}
	mark := func(ms []SlotMark, arrow string) {
		for _, m := range ms {
			b = append(b, " ["...)
			b = strconv.AppendInt(b, int64(m.Slot), 10)
			b = append(b, arrow...)
			b = append(b, m.NodeID...)
			b = append(b, ']')
		}
	}
	mark(sh.Migrating, "->-")
	mark(sh.Importing, "-<-")
	return b
}

// nodeFlag returns the flag a CLUSTER NODES line adds for a node of health
// h (",fail?" for a suspected node, Redis's PFAIL; ",fail" for a failed
// one, and for every node of a group that has not answered lately:
// redis-cli --cluster skips such nodes instead of connecting) and its link
// state, "disconnected" for either, else "connected".
func (h Health) nodeFlag() (flag, link string) {
	switch h {
	case HealthSuspect:
		return ",fail?", "disconnected"
	case HealthFailed:
		return ",fail", "disconnected"
	}
	return "", "connected"
}

// NodeHealth is node i's health in CLUSTER SHARDS, in Redis's words:
// "failed" for every node of a group without a known leader or that has
// not answered lately, and for a node its leader cannot reach (suspected
// or failed: unlike Redis, which waits for FAIL, a node the leader cannot
// reach is never reported online); "loading" for one that is catching up;
// else "online".
func (sh *Shard) NodeHealth(i int) string {
	n := &sh.Nodes[i]
	switch {
	case !sh.Healthy || !n.Health.Reachable():
		return "failed"
	case n.Health == HealthLoading:
		return "loading"
	}
	return "online"
}

// Role is the node's role in CLUSTER SHARDS: "master" or "replica".
func (n *ViewNode) Role() string {
	if n.Master {
		return "master"
	}
	return "replica"
}

// SlotsReply is the CLUSTER SLOTS reply: each served range with its
// group's nodes, each an array of ip, port, id and an empty
// networking-metadata map, as Redis 7 has it.
func (r *Routing) SlotsReply() reply.Node {
	shards := r.Shards()
	out := reply.Array()
	for _, rg := range r.SlotRanges() {
		e := reply.Array(reply.Int(rg.First), reply.Int(rg.Last))
		for _, n := range shards[rg.Group].Nodes {
			e.Elems = append(e.Elems, reply.Array(reply.Bulk(n.Host), reply.Int(n.Port), reply.Bulk(n.ID), reply.Map()))
		}
		out.Elems = append(out.Elems, e)
	}
	return out
}

// ShardsReply is the CLUSTER SHARDS reply: one map of slots and nodes per
// group.
func (r *Routing) ShardsReply() reply.Node {
	shards := r.Shards()
	out := reply.Array()
	for g := range shards {
		sh := &shards[g]
		slots, nodes := reply.Array(), reply.Array()
		for _, rg := range sh.Slots {
			slots.Elems = append(slots.Elems, reply.Int(rg[0]), reply.Int(rg[1]))
		}
		for i := range sh.Nodes {
			n := &sh.Nodes[i]
			nodes.Elems = append(nodes.Elems, reply.Map(
				reply.Bulk("id"), reply.Bulk(n.ID),
				reply.Bulk("port"), reply.Int(n.Port),
				reply.Bulk("ip"), reply.Bulk(n.Host),
				reply.Bulk("endpoint"), reply.Bulk(n.Host),
				reply.Bulk("role"), reply.Bulk(n.Role()),
				reply.Bulk("replication-offset"), reply.Int(n.Offset),
				reply.Bulk("health"), reply.Bulk(sh.NodeHealth(i))))
		}
		out.Elems = append(out.Elems, reply.Map(reply.Bulk("slots"), slots, reply.Bulk("nodes"), nodes))
	}
	return out
}

// Nodes returns the CLUSTER NODES text: every node of every known group.
func (r *Routing) Nodes() []byte {
	var b []byte
	shards := r.Shards()
	for g := range shards {
		for i := range shards[g].Nodes {
			b = shards[g].AppendNodeLine(b, i)
		}
	}
	return b
}

// Replicas returns the CLUSTER REPLICAS lines of node id (without their
// newlines): those of its group's followers, when id is its leader. An id
// no known group has is a *NodeIDError; one that is not a leader,
// ErrNotMaster.
func (r *Routing) Replicas(id string) ([][]byte, error) {
	g := r.NodeGroup(id)
	if g < 0 {
		return nil, &NodeIDError{ID: id}
	}
	sh := r.shard(g)
	if !sh.Leader || sh.Nodes[0].ID != id {
		return nil, ErrNotMaster
	}
	lines := make([][]byte, 0, len(sh.Nodes)-1)
	for i := 1; i < len(sh.Nodes); i++ {
		line := sh.AppendNodeLine(nil, i)
		lines = append(lines, line[:len(line)-1])
	}
	return lines, nil
}

// InfoFields returns the CLUSTER INFO fields of s, in Redis's order and
// words (cluster_state is "ok" when every slot is served by a Healthy
// group; the message and pfail counters are always 0: there is no bus).
func (s Summary) InfoFields() [][2]string {
	state := "fail"
	if s.OK == hashslot.Count {
		state = "ok"
	}
	i := strconv.Itoa
	return [][2]string{
		{"cluster_state", state},
		{"cluster_slots_assigned", i(s.Assigned)},
		{"cluster_slots_ok", i(s.OK)},
		{"cluster_slots_pfail", "0"},
		{"cluster_slots_fail", i(s.Assigned - s.OK)},
		{"cluster_known_nodes", i(s.KnownNodes)},
		{"cluster_size", i(s.Size)},
		{"cluster_current_epoch", strconv.FormatUint(s.CurrentEpoch, 10)},
		{"cluster_my_epoch", strconv.FormatUint(s.MyEpoch, 10)},
		{"cluster_stats_messages_sent", "0"},
		{"cluster_stats_messages_received", "0"},
		{"total_cluster_links_buffer_limit_exceeded", "0"},
	}
}
