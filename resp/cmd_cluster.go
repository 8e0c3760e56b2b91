package resp

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// The Redis Cluster protocol over replication groups. Each group (a raft
// cluster) is one Redis Cluster shard: its leader the master, its other
// voters the replicas. A group that owns no slot and knows no other group
// (an unsharded routing) answers as one shard owning slots 0–16383, so that
// cluster-aware clients find the leader by themselves. Every view is
// computed from one cluster.Routing, an immutable table (its views as data: Shards, SlotRanges, Summary). A standalone
// server answers every CLUSTER subcommand, READONLY, READWRITE and ASKING
// as a Redis server without cluster support does.

// errClusterDisabled is Redis's reply on a server without cluster support.
var errClusterDisabled = &textError{"ERR This instance has cluster support disabled"}

var errFailoverOption = &textError{"ERR FORCE and TAKEOVER are not needed: a group whose leader is down elects a new one by itself"}

// clusterRouting returns the node's routing table, or errClusterDisabled
// on a standalone server. Before the node has a table, an unsharded one of
// a single group without members stands in (no slot is served).
func clusterRouting(c *Conn) (Cluster, *cluster.Routing, error) {
	cl := c.srv.cfg.Cluster
	if cl == nil {
		return nil, nil, errClusterDisabled
	}
	r := cl.Routing()
	if r == nil {
		r = cluster.NewRouting(0, "", []cluster.GroupView{{}})
	}
	return cl, r, nil
}

// clusterHandler wraps a CLUSTER subcommand's handler: on a standalone
// server it answers errClusterDisabled instead.
func clusterHandler(h func(c *Conn, cl Cluster, r *cluster.Routing, args [][]byte) error) func(c *Conn, args [][]byte) error {
	return func(c *Conn, args [][]byte) error {
		cl, r, err := clusterRouting(c)
		if err != nil {
			return err
		}
		return h(c, cl, r, args)
	}
}

// parseSlot parses a slot number; anything but an integer in [0, 16384)
// is Redis's invalid-slot error, msg.
func parseSlot(b []byte, msg string) (int, error) {
	n, err := engine.ParseInt(b)
	if err != nil {
		return 0, err
	}
	if n < 0 || n >= clusterSlots {
		return 0, &textError{msg}
	}
	return int(n), nil
}

// errBadSlot is Redis's reply to a slot argument of ADDSLOTS, DELSLOTS and
// SETSLOT that is not an integer in [0, 16384).
var errBadSlot = &textError{"ERR Invalid or out of range slot"}

// parseSlotArg parses a slot of ADDSLOTS, DELSLOTS or SETSLOT, where Redis
// answers errBadSlot for a non-integer too.
func parseSlotArg(b []byte) (int, error) {
	n, err := engine.ParseInt(b)
	if err != nil || n < 0 || n >= clusterSlots {
		return 0, errBadSlot
	}
	return int(n), nil
}

// parseSlotList parses ADDSLOTS / DELSLOTS arguments: each a slot, none twice.
func parseSlotList(args [][]byte) ([]int, error) {
	slots := make([]int, 0, len(args))
	seen := map[int]bool{}
	for _, a := range args {
		s, err := parseSlotArg(a)
		if err != nil {
			return nil, err
		}
		if seen[s] {
			return nil, &textError{"ERR Slot " + strconv.Itoa(s) + " specified multiple times"}
		}
		seen[s] = true
		slots = append(slots, s)
	}
	return slots, nil
}

// parseSlotRanges parses ADDSLOTSRANGE / DELSLOTSRANGE arguments: pairs of
// start and end slots (inclusive), no slot twice. An odd count is the arity
// error, as in Redis.
func parseSlotRanges(args [][]byte) ([]int, error) {
	if len(args)%2 != 0 {
		return nil, engine.ErrArity
	}
	var slots []int
	seen := map[int]bool{}
	for i := 0; i < len(args); i += 2 {
		lo, err := parseSlotArg(args[i])
		if err != nil {
			return nil, err
		}
		hi, err := parseSlotArg(args[i+1])
		if err != nil {
			return nil, err
		}
		if lo > hi {
			return nil, &textError{"ERR start slot number " + strconv.Itoa(lo) + " is greater than end slot number " + strconv.Itoa(hi)}
		}
		for s := lo; s <= hi; s++ {
			if seen[s] {
				return nil, &textError{"ERR Slot " + strconv.Itoa(s) + " specified multiple times"}
			}
			seen[s] = true
			slots = append(slots, s)
		}
	}
	return slots, nil
}

// slotKeys calls fn once for every distinct live key of slot at the read
// instant, by scanning the whole keyspace (O(N) in the number of keys),
// then for every key of the slot in the moving set (keys MIGRATE is
// moving out are still this group's until the move completes). It stops
// when fn returns false.
func slotKeys(c *Conn, slot int, fn func(key []byte) bool) error {
	now, err := c.readNow()
	if err != nil {
		return err
	}
	store := c.srv.backend.Store()
	seen := map[string]bool{} // a scan may report a key twice
	var found [][]byte
	keep := func(key []byte) {
		if keySlot(key) == slot && !seen[string(key)] {
			seen[string(key)] = true
			found = append(found, append([]byte(nil), key...))
		}
	}
	emit := func() bool {
		for _, k := range found {
			if !fn(k) {
				return false
			}
		}
		found = found[:0]
		return true
	}
	for cur := uint64(0); ; {
		cur = store.Scan(cur, 1000, now, func(key []byte, _ engine.Kind) { keep(key) })
		if !emit() {
			return nil
		}
		if cur == 0 {
			break
		}
	}
	store.MovingKeys(func(key []byte, _ engine.State) bool { keep(key); return true })
	emit()
	return nil
}

// appendSlotMarks appends a shard's slot ranges, then its migrating
// ("[slot->-<target-id>]") and importing ("[slot-<-<source-id>]") slots, as
// Redis prints them in CLUSTER NODES.
func appendSlotMarks(b []byte, sh *cluster.Shard) []byte {
	for _, rg := range sh.Slots {
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(rg[0]), 10)
		if rg[1] != rg[0] {
			b = append(b, '-')
			b = strconv.AppendInt(b, int64(rg[1]), 10)
		}
	}
	mark := func(ms []cluster.SlotMark, arrow string) {
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

// appendNodeLine appends the CLUSTER NODES line of node i of shard sh.
func appendNodeLine(b []byte, sh *cluster.Shard, i int) []byte {
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
	flag, link := nodeFailFlag(n.Health)
	b = append(b, flag...)
	b = append(b, ' ')
	b = append(b, master...)
	b = append(b, " 0 0 "...)
	b = strconv.AppendUint(b, sh.Epoch, 10)
	b = append(b, ' ')
	b = append(b, link...)
	if i == 0 && sh.Leader {
		b = appendSlotMarks(b, sh)
	}
	return append(b, '\n')
}

// nodeFailFlag returns the flag a CLUSTER NODES line adds for a node of
// health h (",fail?" for a suspected node, Redis's PFAIL; ",fail" for a
// failed one, and for every node of a group that has not answered lately:
// redis-cli --cluster skips such nodes instead of connecting) and its link
// state, "disconnected" for either, else "connected".
func nodeFailFlag(h cluster.Health) (flag, link string) {
	switch h {
	case cluster.HealthSuspect:
		return ",fail?", "disconnected"
	case cluster.HealthFailed:
		return ",fail", "disconnected"
	}
	return "", "connected"
}

// shardHealth is a node's health in CLUSTER SHARDS, in Redis's words:
// "failed" for every node of a group without a known leader or that has
// not answered lately, and for a node its leader cannot reach (suspected
// or failed: unlike Redis, which waits for FAIL, a node the leader cannot
// reach is never reported online); "loading" for one that is catching up;
// else "online".
func shardHealth(sh *cluster.Shard, n *cluster.ViewNode) string {
	switch {
	case !sh.Healthy || !n.Health.Reachable():
		return "failed"
	case n.Health == cluster.HealthLoading:
		return "loading"
	}
	return "online"
}

// writeClusterSlots answers CLUSTER SLOTS: each served range with its
// group's nodes, each an array of ip, port, id and an empty
// networking-metadata map, as Redis 7 does.
func writeClusterSlots(c *Conn, r *cluster.Routing) {
	rs := r.SlotRanges()
	shards := r.Shards()
	c.WriteArray(len(rs))
	for _, rg := range rs {
		ns := shards[rg.Group].Nodes
		c.WriteArray(2 + len(ns))
		c.WriteInt(int64(rg.First))
		c.WriteInt(int64(rg.Last))
		for i := range ns {
			c.WriteArray(4)
			c.WriteBulkString(ns[i].Host)
			c.WriteInt(int64(ns[i].Port))
			c.WriteBulkString(ns[i].ID)
			c.WriteMap(0)
		}
	}
}

// writeClusterShards answers CLUSTER SHARDS: one entry per group.
func writeClusterShards(c *Conn, r *cluster.Routing) {
	shards := r.Shards()
	c.WriteArray(len(shards))
	for g := range shards {
		sh := &shards[g]
		c.WriteMap(2)
		c.WriteBulkString("slots")
		c.WriteArray(2 * len(sh.Slots))
		for _, rg := range sh.Slots {
			c.WriteInt(int64(rg[0]))
			c.WriteInt(int64(rg[1]))
		}
		c.WriteBulkString("nodes")
		c.WriteArray(len(sh.Nodes))
		for i := range sh.Nodes {
			n := &sh.Nodes[i]
			role := "replica"
			if n.Master {
				role = "master"
			}
			c.WriteMap(7)
			c.WriteBulkString("id")
			c.WriteBulkString(n.ID)
			c.WriteBulkString("port")
			c.WriteInt(int64(n.Port))
			c.WriteBulkString("ip")
			c.WriteBulkString(n.Host)
			c.WriteBulkString("endpoint")
			c.WriteBulkString(n.Host)
			c.WriteBulkString("role")
			c.WriteBulkString(role)
			c.WriteBulkString("replication-offset")
			c.WriteInt(int64(n.Offset))
			c.WriteBulkString("health")
			c.WriteBulkString(shardHealth(sh, n))
		}
	}
}

// clusterInfo returns the CLUSTER INFO text.
func clusterInfo(r *cluster.Routing) []byte {
	s := r.Summary()
	state := "fail"
	if s.OK == clusterSlots {
		state = "ok"
	}
	b := field(nil, "cluster_state", state)
	b = fieldInt(b, "cluster_slots_assigned", int64(s.Assigned))
	b = fieldInt(b, "cluster_slots_ok", int64(s.OK))
	b = fieldInt(b, "cluster_slots_pfail", 0)
	b = fieldInt(b, "cluster_slots_fail", int64(s.Assigned-s.OK))
	b = fieldInt(b, "cluster_known_nodes", int64(s.KnownNodes))
	b = fieldInt(b, "cluster_size", int64(s.Size))
	b = field(b, "cluster_current_epoch", strconv.FormatUint(s.CurrentEpoch, 10))
	b = field(b, "cluster_my_epoch", strconv.FormatUint(s.MyEpoch, 10))
	b = fieldInt(b, "cluster_stats_messages_sent", 0)
	b = fieldInt(b, "cluster_stats_messages_received", 0)
	return fieldInt(b, "total_cluster_links_buffer_limit_exceeded", 0)
}

// setSlotAction parses SETSLOT's action and node id (args after the slot).
func setSlotAction(args [][]byte) (cluster.SlotAction, string, error) {
	bad := &textError{"ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"}
	var a cluster.SlotAction
	switch strings.ToLower(string(args[0])) {
	case "importing":
		a = cluster.SlotImporting
	case "migrating":
		a = cluster.SlotMigrating
	case "node":
		a = cluster.SlotNode
	case "stable":
		if len(args) != 1 {
			return 0, "", bad
		}
		return cluster.SlotStable, "", nil
	default:
		return 0, "", bad
	}
	if len(args) != 2 {
		return 0, "", bad
	}
	return a, string(args[1]), nil
}

// meetAddr parses MEET's host, port and optional bus port into the RESP
// address to meet.
func meetAddr(args [][]byte) (string, error) {
	port, err := strconv.Atoi(string(args[1]))
	if err != nil || port < 0 || port > 65535 {
		return "", &textError{"ERR Invalid base port specified: " + string(clip(args[1]))}
	}
	if len(args) > 2 {
		if bus, err := strconv.Atoi(string(args[2])); err != nil || bus < 0 || bus > 65535 {
			return "", &textError{"ERR Invalid bus port specified: " + string(clip(args[2]))}
		}
	}
	return net.JoinHostPort(string(args[0]), strconv.Itoa(port)), nil
}

// parseSetSlot parses CLUSTER SETSLOT slot action [node-id].
func parseSetSlot(args [][]byte) (cluster.SlotChange, error) {
	slot, err := parseSlotArg(args[2])
	if err != nil {
		return cluster.SlotChange{}, err
	}
	action, id, err := setSlotAction(args[3:])
	if err != nil {
		return cluster.SlotChange{}, err
	}
	return cluster.SlotChange{Kind: cluster.SlotSet, Slot: slot, Action: action, NodeID: id}, nil
}

// unknownNode returns err, made an unknownNodeError naming id when it is
// cluster.ErrUnknownNode (Redis's reply names the id).
func unknownNode(err error, id string) error {
	if errors.Is(err, cluster.ErrUnknownNode) {
		return &unknownNodeError{id}
	}
	return err
}

func clusterCommand() *Command {
	sub := func(cmd *Command) *Command {
		cmd.Group = "cluster"
		cmd.Since = "0.1.0"
		cmd.Flags |= FlagStale | FlagLoading
		cmd.Errors = append([]string{"`ERR This instance has cluster support disabled` on a standalone server."}, cmd.Errors...)
		return cmd
	}
	slotErrs := []string{
		"`ERR Invalid or out of range slot` for a slot that is not an integer in [0, 16383].",
		"`ERR Slot <n> specified multiple times` when a slot is named twice.",
	}
	return &Command{
		Name: "cluster", Arity: -2, Flags: FlagStale | FlagLoading, Group: "cluster", Since: "0.1.0",
		Summary: "Describes and changes the Redis Cluster the replication groups form.", Complexity: "Depends on the subcommand",
		Notes: []string{"Each replication group is one Redis Cluster shard: its leader is the master, " +
			"its other voting members with a replicated RESP address are its replicas (non-voters catching up are not listed). " +
			"A node's id is the 40 lowercase hex digits of the SHA-1 of `<group>/<node-id>`, the same on every node and across restarts. " +
			"The cluster bus port reported is the node's raft port. A group that owns no slot and knows no other group answers as a cluster of " +
			"one shard owning slots 0–16383. While a group has no known leader, its slots are not listed: its members are " +
			"listed as masters without slots and `cluster_state` is `fail`.",
			"Slot ownership and migration state live in each group's raft log; groups learn about one another through `CLUSTER MEET` " +
				"and then ask each other for their members, leaders and slots (there is no gossip bus). The config epoch reported is the group's raft term.",
			"Once any group owns a slot or another group is known, every command with keys is routed as Redis Cluster routes it: a key of a slot another group owns answers " +
				"`-MOVED <slot> <host:port>` (that group's leader; its first member while it has none), a slot no group owns `-CLUSTERDOWN Hash slot not served` (`-CLUSTERDOWN Hash slot not served yet: …; retry in a moment` while a known group has not answered this node, just after CLUSTER MEET or a restart), and keys of several slots " +
				"`-CROSSSLOT Keys in request don't hash to the same slot` unless this group owns every one of those slots (so `CL.THROTTLEALL` over keys of different slots of one group is allowed). " +
				"During a slot's move, a key no longer here answers `-ASK <slot> <host:port>`, keys split between the two groups `-TRYAGAIN Multiple keys request during rehashing of slot`, " +
				"a key in flight `-TRYAGAIN Key is being migrated, retry`; the target group serves the slot's keys to commands sent after `ASKING`. Inside a group, followers still forward to the leader."},
		Subcommands: []*Command{
			sub(&Command{
				Name: "slots", Arity: 2, Flags: FlagFast, Summary: "Returns the slot ranges and the nodes serving them.", Complexity: "O(N) where N is the number of slot ranges",
				Reply: "Array with one entry per contiguous slot range of each group with a known leader, `[start, end, leader, replicas...]`, by start slot; each node an array of IP (bulk string), port (integer), node id (bulk string) " +
					"and an empty map of networking metadata, as Redis 7 answers. Ranges of a group without a known leader are left out.",
				Handler: clusterHandler(func(c *Conn, _ Cluster, r *cluster.Routing, _ [][]byte) error {
					writeClusterSlots(c, r)
					return nil
				}),
			}),
			sub(&Command{
				Name: "shards", Arity: 2, Flags: FlagFast, Summary: "Returns the shards, their slots and nodes.", Complexity: "O(N) where N is the number of groups and members",
				Reply: "Array of one map (a flat array in RESP2) per group with `slots` (array of integers: start and end of each range; empty while the group has no known leader) and `nodes`: " +
					"one map per member with `id`, `port`, `ip`, `endpoint`, `role` (`master` or `replica`), `replication-offset` (its applied index as its leader last heard it; 0: unknown) and `health` " +
					"as Redis 7 answers: `online`; `loading` while it catches up (no log yet, or further behind than the log kept after a snapshot); `failed` when its leader cannot reach it (`fail?` or `fail` in CLUSTER NODES), and for every member of a group with no known leader or that has not answered recently. " +
					"The verdicts are the group leader's (status requests once a second); a follower shows its leader's.",
				Handler: clusterHandler(func(c *Conn, _ Cluster, r *cluster.Routing, _ [][]byte) error {
					writeClusterShards(c, r)
					return nil
				}),
			}),
			sub(&Command{
				Name: "nodes", Arity: 2, Summary: "Returns the cluster configuration as this node sees it.", Complexity: "O(N) where N is the number of members",
				Reply: "Bulk string, one line per member of every group in Redis 7's format: `<id> <ip:port@cport> <flags> <master-id|-> 0 0 <config-epoch> <link-state> [slots...]`, " +
					"where cport is the node's raft port, flags are `master` or `slave` (prefixed `myself,` on this node), followed by `,fail?` (Redis's PFAIL) once the group's leader cannot reach the node and by `,fail` once it has not reached it for `cluster-node-timeout` (and for every node of another group that has not answered recently), either with link state `disconnected`, " +
					"the config epoch is the group's raft term, and the leader's line lists the group's slot ranges, then `[slot->-<target-id>]` for each slot migrating out and `[slot-<-<source-id>]` for each slot importing, as Redis prints them.",
				Handler: clusterHandler(func(c *Conn, _ Cluster, r *cluster.Routing, _ [][]byte) error {
					var b []byte
					shards := r.Shards()
					for g := range shards {
						for i := range shards[g].Nodes {
							b = appendNodeLine(b, &shards[g], i)
						}
					}
					c.WriteBulk(b)
					return nil
				}),
			}),
			sub(&Command{
				Name: "replicas", Arity: 3, Summary: "Lists the replicas of a master node.", Complexity: "O(N) where N is the number of members",
				Args:   []Arg{{Name: "node-id", Type: "string"}},
				Reply:  "Array of bulk strings: the `CLUSTER NODES` lines of the followers of the group whose leader is node-id.",
				Errors: []string{"`ERR Unknown node <node-id>` for an id no known group has.", "`ERR The specified node is not a master` for a node that is not its group's leader."},
				Handler: clusterHandler(func(c *Conn, _ Cluster, r *cluster.Routing, args [][]byte) error {
					return writeReplicas(c, r, string(args[2]))
				}),
			}),
			sub(&Command{
				Name: "slaves", Arity: 3, Summary: "Lists the replicas of a master node (an alias of `CLUSTER REPLICAS`).", Complexity: "O(N) where N is the number of members",
				Args:   []Arg{{Name: "node-id", Type: "string"}},
				Reply:  "As `CLUSTER REPLICAS`.",
				Errors: []string{"`ERR Unknown node <node-id>` for an id no known group has.", "`ERR The specified node is not a master` for a node that is not its group's leader."},
				Handler: clusterHandler(func(c *Conn, _ Cluster, r *cluster.Routing, args [][]byte) error {
					return writeReplicas(c, r, string(args[2]))
				}),
			}),
			sub(&Command{
				Name: "info", Arity: 2, Flags: FlagFast, Summary: "Returns the cluster's state.", Complexity: "O(1)",
				Reply: "Bulk string of `field:value` lines as Redis writes them: `cluster_state` (`ok` when every one of the 16384 slots is owned by a group with a known leader that answered recently; otherwise `fail`), " +
					"`cluster_slots_assigned` (slots some group owns), `cluster_slots_ok` (of those, owned by such a healthy group), `cluster_slots_pfail` (0), `cluster_slots_fail` (assigned but not ok), " +
					"`cluster_known_nodes` (members of every known group), `cluster_size` (groups owning at least one slot), " +
					"`cluster_current_epoch` (the highest raft term of the known groups) and `cluster_my_epoch` (this group's raft term), and zero message counters.",
				Handler: clusterHandler(func(c *Conn, _ Cluster, r *cluster.Routing, _ [][]byte) error {
					c.WriteBulk(clusterInfo(r))
					return nil
				}),
			}),
			sub(&Command{
				Name: "bumpepoch", Arity: 2, Flags: FlagAdmin, Summary: "Answers this group's config epoch, which is never bumped by hand.", Complexity: "O(1)",
				Reply: "Simple string `STILL <epoch>`: the config epoch is the group's raft term, which raft itself raises at every election, so there is nothing to bump " +
					"(Redis answers `BUMPED <epoch>` when it raised its epoch). `redis-cli --cluster fix` sends it inside the transaction that gives a slot an owner.",
				Handler: clusterHandler(func(c *Conn, _ Cluster, r *cluster.Routing, _ [][]byte) error {
					c.WriteSimple("STILL " + strconv.FormatUint(r.Groups[r.Self].Term, 10))
					return nil
				}),
			}),
			sub(&Command{
				Name: "myid", Arity: 2, Flags: FlagFast, Summary: "Returns this node's cluster node id.", Complexity: "O(1)",
				Reply: "Bulk string: 40 lowercase hex digits, the SHA-1 of `<group>/<node-id>`.",
				Handler: clusterHandler(func(c *Conn, _ Cluster, r *cluster.Routing, _ [][]byte) error {
					c.WriteBulkString(r.MyID())
					return nil
				}),
			}),
			sub(&Command{
				Name: "keyslot", Arity: 3, Flags: FlagFast, Summary: "Returns the hash slot of a key.", Complexity: "O(N) where N is the number of bytes in the key",
				Args:  []Arg{{Name: "key", Type: "string"}},
				Reply: "Integer in [0, 16383]: CRC16-XMODEM of the key, or of its hash tag (the bytes between the first `{` and the first `}` after it, when there is at least one), modulo 16384, as Redis computes it.",
				Handler: clusterHandler(func(c *Conn, _ Cluster, _ *cluster.Routing, args [][]byte) error {
					c.WriteInt(int64(keySlot(args[2])))
					return nil
				}),
			}),
			sub(&Command{
				Name: "countkeysinslot", Arity: 3, Flags: FlagReadonly, Summary: "Counts the live keys of a hash slot on this node.",
				Complexity: "O(N) where N is the number of keys: the whole keyspace is scanned",
				Args:       []Arg{{Name: "slot", Type: "integer"}},
				Reply:      "Integer: the number of keys of the slot live at the read instant, keys being moved out by `MIGRATE` included (keys created or deleted during the scan may or may not be counted).",
				Errors:     []string{"`ERR Invalid slot` for a slot outside [0, 16383]."},
				Handler: clusterHandler(func(c *Conn, _ Cluster, _ *cluster.Routing, args [][]byte) error {
					slot, err := parseSlot(args[2], "ERR Invalid slot")
					if err != nil {
						return err
					}
					n := int64(0)
					if err := slotKeys(c, slot, func([]byte) bool { n++; return true }); err != nil {
						return err
					}
					c.WriteInt(n)
					return nil
				}),
			}),
			sub(&Command{
				Name: "getkeysinslot", Arity: 4, Flags: FlagReadonly, Summary: "Returns up to count live keys of a hash slot on this node.",
				Complexity: "O(N) where N is the number of keys: the keyspace is scanned until count keys of the slot are found",
				Args:       []Arg{{Name: "slot", Type: "integer"}, {Name: "count", Type: "integer"}},
				Reply:      "Array of bulk strings: at most count keys of the slot, keys being moved out by `MIGRATE` included, in no particular order.",
				Errors:     []string{"`ERR Invalid slot or number of keys` for a slot outside [0, 16383] or a negative count."},
				Handler: clusterHandler(func(c *Conn, _ Cluster, _ *cluster.Routing, args [][]byte) error {
					const msg = "ERR Invalid slot or number of keys"
					slot, err := parseSlot(args[2], msg)
					if err != nil {
						return err
					}
					count, err := engine.ParseInt(args[3])
					if err != nil {
						return err
					}
					if count < 0 {
						return &textError{msg}
					}
					var keys [][]byte
					if count > 0 {
						err = slotKeys(c, slot, func(k []byte) bool {
							keys = append(keys, k)
							return int64(len(keys)) < count
						})
						if err != nil {
							return err
						}
					}
					c.WriteArray(len(keys))
					for _, k := range keys {
						c.WriteBulk(k)
					}
					return nil
				}),
			}),
			sub(&Command{
				Name: "abortmove", Arity: -3, MaxArgs: 4, Flags: FlagAdmin,
				Summary:    "Puts back the keys of a slot that a MIGRATE left in flight (cellserver's own subcommand).",
				Complexity: "O(N) where N is the number of keys in flight",
				Args:       []Arg{{Name: "slot", Type: "integer"}, {Name: "force", Type: "pure-token", Token: "FORCE", Optional: true}},
				Reply: "Integer: the number of keys of the slot put back into this group's keyspace, each with the state it had when `MIGRATE` took it out (0 when none is in flight). " +
					"Without `FORCE` it puts them back only when every one was sent to an address that is no member of any group this cluster knows " +
					"(a server that is not a cellserver, a dead or standalone one: clients of this cluster never reach it, so the key is served in one place only), " +
					"or to a member of a group that neither owns nor imports the slot (as this node's view of the groups shows it; a group not heard from within 2 s counts as one that may) and whose members, asked now on their raft port (the directory of groups), hold no key of it, in flight or not: " +
					"a `RESTORE` that never landed there cannot land any more, and no copy is served there (the state `redis-cli --cluster fix` leaves after a move interrupted mid-`MIGRATE`).",
				Errors: []string{"`ERR Invalid or out of range slot` for a slot that is not an integer in [0, 16383].",
					"`ERR <n> key(s) of slot <slot> are in flight to <address>, a member of group <name> (or to an unknown destination) …` without `FORCE` when a key was sent to a member of a known group: " +
						"that group may hold the key and serve it, so putting it back could let both admit for it. Run the `MIGRATE` again (a target that already has the key answers `BUSYKEY`, which completes the move) or, once sure the target does not have the key, `CLUSTER ABORTMOVE <slot> FORCE`.",
					"`TRYAGAIN another MIGRATE or CLUSTER ABORTMOVE of this group is running (<holder>): retry once it is done` when a `MIGRATE` on any node of the group still holds the group's move lease after 5 s; nothing is put back."},
				Handler: clusterHandler(func(c *Conn, cl Cluster, r *cluster.Routing, args [][]byte) error {
					slot, err := parseSlotArg(args[2])
					if err != nil {
						return err
					}
					force := len(args) == 4
					if force && !strings.EqualFold(string(args[3]), "force") {
						return engine.ErrSyntax
					}
					return c.abortMove(cl, r, slot, force)
				}),
			}),
			sub(slotsCommand("addslots", "Assigns slots to this node's group.", false, slotErrs,
				func(c *Conn, cl Cluster, slots []int) error { return cl.AddSlots(c.srv.ctx, slots) })),
			sub(slotsCommand("addslotsrange", "Assigns ranges of slots to this node's group.", true, slotErrs,
				func(c *Conn, cl Cluster, slots []int) error { return cl.AddSlots(c.srv.ctx, slots) })),
			sub(slotsCommand("delslots", "Makes slots of this node's group unassigned.", false, slotErrs,
				func(c *Conn, cl Cluster, slots []int) error { return cl.DelSlots(c.srv.ctx, slots) })),
			sub(slotsCommand("delslotsrange", "Makes ranges of slots of this node's group unassigned.", true, slotErrs,
				func(c *Conn, cl Cluster, slots []int) error { return cl.DelSlots(c.srv.ctx, slots) })),
			sub(&Command{
				Name: "failover", Arity: -2, MaxArgs: 3, Flags: FlagAdmin, Summary: "Makes this follower its group's leader.", Complexity: "O(1)",
				Args: []Arg{{Name: "options", Type: "oneof", Optional: true, Args: []Arg{
					{Name: "force", Type: "pure-token", Token: "FORCE"}, {Name: "takeover", Type: "pure-token", Token: "TAKEOVER"}}}},
				Reply: "Simple string `OK` once this node leads its group and serves: the leader hands leadership over (raft's leadership transfer: it stops taking writes, brings this node's log up to date and has it start an election at once). " +
					"Writes in flight during the hand-over wait for the new leader, as in any election; nothing is lost. Use it to move leadership off a node before maintenance.",
				Errors: []string{"`ERR You should send CLUSTER FAILOVER to a replica` on the leader.",
					"`ERR FORCE and TAKEOVER are not needed: a group whose leader is down elects a new one by itself` for either option (Redis uses them to fail over without the master; a Raft group does that on its own).",
					"`ERR this node is not a voter yet …` on a node that joined and is not yet promoted.",
					"`CLUSTERDOWN …` when no leader answers, or the hand-over did not complete within twice the no-leader timeout (the group then keeps or elects a leader as usual)."},
				Handler: clusterHandler(func(c *Conn, cl Cluster, _ *cluster.Routing, args [][]byte) error {
					if len(args) == 3 {
						if o := strings.ToLower(string(args[2])); o != "force" && o != "takeover" {
							return engine.ErrSyntax
						}
						return errFailoverOption
					}
					if err := cl.Failover(c.srv.ctx); err != nil {
						return err
					}
					c.WriteOK()
					return nil
				}),
			}),
			sub(&Command{
				Name: "meet", Arity: -4, MaxArgs: 5, Flags: FlagAdmin, Summary: "Introduces another replication group to this one.", Complexity: "O(1)",
				Args: []Arg{{Name: "ip", Type: "string"}, {Name: "port", Type: "integer", Doc: "the RESP port of any node of the other group"},
					{Name: "cluster-bus-port", Type: "integer", Optional: true, Doc: "accepted and ignored: groups talk over their RESP and raft ports"}},
				Reply: "Simple string `OK` once this group has recorded the other group (and the other group this one): from then on every node of both groups knows every group, its members, leader and slots.",
				Errors: []string{"`ERR Invalid base port specified: <port>` or `ERR Invalid bus port specified: <port>` for a port that is not an integer in [0, 65535].",
					"`ERR that node belongs to this group` when the address is a node of this very group.",
					"`CLUSTERDOWN …` when this group has no leader within the no-leader timeout, and an error naming the cause when the other node cannot be reached."},
				Handler: clusterHandler(func(c *Conn, cl Cluster, _ *cluster.Routing, args [][]byte) error {
					addr, err := meetAddr(args[2:])
					if err != nil {
						return err
					}
					if err := cl.Meet(c.srv.ctx, addr); err != nil {
						return err
					}
					c.WriteOK()
					return nil
				}),
			}),
			sub(&Command{
				Name: "setslot", Arity: -4, MaxArgs: 5, Flags: FlagAdmin, Summary: "Changes a slot's migration state or owner (resharding).", Complexity: "O(1)",
				Args: []Arg{{Name: "slot", Type: "integer"}, {Name: "subcommand", Type: "oneof", Args: []Arg{
					{Name: "importing", Type: "string", Token: "IMPORTING", Doc: "the node id of a member of the group the slot comes from"},
					{Name: "migrating", Type: "string", Token: "MIGRATING", Doc: "the node id of a member of the group the slot goes to"},
					{Name: "node", Type: "string", Token: "NODE", Doc: "the node id of a member of the group that owns the slot from now on"},
					{Name: "stable", Type: "pure-token", Token: "STABLE"}}}},
				Reply: "Simple string `OK` once the change is committed in this group's log. As in Redis: `MIGRATING` on the owning group makes commands on keys of the slot that are not there answer `-ASK`; " +
					"`IMPORTING` on the target group makes it accept commands on the slot sent after `ASKING`; `NODE` ends the move (on the target: it owns the slot; on the source: the slot is the target's); `STABLE` clears migrating and importing.",
				Errors: []string{"`ERR Invalid or out of range slot` for a slot that is not an integer in [0, 16383].",
					"`ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP` for another action, or a node id missing or given to `STABLE`.",
					"`ERR I don't know about node <node-id>` for an id no known group has.",
					"`ERR …` in Redis's wording when the change does not apply (for example `MIGRATING` of a slot this group does not own: `ERR I'm not the owner of hash slot <slot>`).",
					"`ERR Can't assign hashslot <slot> to a different node while I still hold keys for this hash slot.` for `NODE` naming another group while keys of the slot (or keys in flight) are still here (found by a scan of the keyspace); nothing changes."},
				slotChange: parseSetSlot,
				Handler: clusterHandler(func(c *Conn, cl Cluster, _ *cluster.Routing, args [][]byte) error {
					sc, err := parseSetSlot(args)
					if err != nil {
						return err
					}
					slot, action, id := sc.Slot, sc.Action, sc.NodeID
					if err := cl.SetSlot(c.srv.ctx, slot, action, id); err != nil {
						return unknownNode(err, id)
					}
					c.WriteOK()
					return nil
				}),
			}),
		},
	}
}

// slotsCommand builds ADDSLOTS, DELSLOTS (ranged: ADDSLOTSRANGE,
// DELSLOTSRANGE), which parse their slots and hand them to apply.
func slotsCommand(name, summary string, ranged bool, errs []string, apply func(c *Conn, cl Cluster, slots []int) error) *Command {
	args := []Arg{{Name: "slot", Type: "integer", Multiple: true}}
	parse := func(a [][]byte) ([]int, error) { return parseSlotList(a) }
	if ranged {
		args = []Arg{{Name: "range", Type: "block", Multiple: true, Args: []Arg{{Name: "start-slot", Type: "integer"}, {Name: "end-slot", Type: "integer"}}}}
		parse = parseSlotRanges
		errs = append(slices.Clone(errs), "`ERR start slot number <start> is greater than end slot number <end>` for a reversed range.")
	}
	if strings.HasPrefix(name, "add") {
		errs = append(slices.Clone(errs), "`ERR Slot <n> is already busy` when a known group owns the slot; no slot is assigned.",
			"`ERR another group has not answered lately, so its slots are unknown: retry in a moment` while a known group's view is older than 2 s (never assign a slot whose owner cannot be checked); no slot is assigned.")
	} else {
		errs = append(slices.Clone(errs), "`ERR Slot <n> is already unassigned` when this group does not own the slot; no slot is changed.")
	}
	errs = append(errs, "`CLUSTERDOWN …` when this group has no leader within the no-leader timeout.")
	arity := -3
	if ranged {
		arity = -4
	}
	kind := cluster.SlotDel
	notes := []string{"A slot another group owns is left alone and counts as done (`OK`): as in Redis, where `DELSLOTS` on a node that does not serve the slot succeeds, " +
		"which `redis-cli --cluster fix` relies on; another group's slots are not this group's to unassign."}
	if strings.HasPrefix(name, "add") {
		kind = cluster.SlotAdd
		notes = nil
	}
	return &Command{
		slotChange: func(a [][]byte) (cluster.SlotChange, error) {
			slots, err := parse(a[2:])
			return cluster.SlotChange{Kind: kind, Slots: slots}, err
		},
		Name: name, Arity: arity, Flags: FlagAdmin, Summary: summary, Complexity: "O(N) where N is the number of slots",
		Args:   args,
		Reply:  "Simple string `OK` once the change is committed in this group's log; the other groups see it at their next look at this one (within 2 s).",
		Errors: errs,
		Notes:  notes,
		Handler: clusterHandler(func(c *Conn, cl Cluster, _ *cluster.Routing, a [][]byte) error {
			slots, err := parse(a[2:])
			if err != nil {
				return err
			}
			if err := apply(c, cl, slots); err != nil {
				return err
			}
			c.WriteOK()
			return nil
		}),
	}
}

// writeReplicas answers CLUSTER REPLICAS id: the followers of id's group,
// when id is its leader.
func writeReplicas(c *Conn, r *cluster.Routing, id string) error {
	g := r.NodeGroup(id)
	if g < 0 {
		return &textError{"ERR Unknown node " + id}
	}
	sh := r.Shards()[g]
	if !sh.Leader || sh.Nodes[0].ID != id {
		return &textError{"ERR The specified node is not a master"}
	}
	c.WriteArray(len(sh.Nodes) - 1)
	for i := 1; i < len(sh.Nodes); i++ {
		line := appendNodeLine(nil, &sh, i)
		c.WriteBulk(line[:len(line)-1])
	}
	return nil
}

// clusterConnCommands are READONLY, READWRITE and ASKING, then DUMP,
// RESTORE and MIGRATE (cmd_migrate.go), which resharding uses.
// READONLY and READWRITE answer OK and change nothing: followers serve
// reads as --raft-local-reads says. ASKING lets the next command run on a
// slot this group is importing.
func clusterConnCommands() []*Command {
	mk := func(name, summary, reply string, h func(c *Conn)) *Command {
		return &Command{
			Name: name, Arity: 1, Flags: FlagFast | FlagStale | FlagLoading, Group: "cluster", Since: "0.1.0",
			Summary: summary, Complexity: "O(1)", Reply: reply,
			Errors: []string{"`ERR This instance has cluster support disabled` on a standalone server."},
			Handler: func(c *Conn, _ [][]byte) error {
				if c.srv.cfg.Cluster == nil {
					return errClusterDisabled
				}
				h(c)
				c.WriteOK()
				return nil
			},
		}
	}
	const same = "Simple string `OK`. The connection is unchanged: followers serve reads as --raft-local-reads says, and writes are forwarded to the group's leader."
	return []*Command{
		mk("readonly", "Accepts reads on this connection (a no-op: followers serve reads as configured).", same, func(*Conn) {}),
		mk("readwrite", "Ends READONLY on this connection (a no-op).", same, func(*Conn) {}),
		mk("asking", "Lets the next command run on a slot this group is importing.",
			"Simple string `OK`. The next command on this connection (only the next, as in Redis) runs on a key of a slot this group is importing (`CLUSTER SETSLOT … IMPORTING`) instead of answering `-MOVED`.",
			func(c *Conn) { c.asking = true }),
	}
}

// abortMove runs CLUSTER ABORTMOVE (cluster.Abort) holding the group's
// move lease, so that it never races a MIGRATE of any node of the group:
// the keys of slot in flight out of this group go back into its keyspace
// when each was sent where it cannot be served (other groups asked through
// the node's directory), or when force.
func (c *Conn) abortMove(cl Cluster, r *cluster.Routing, slot int, force bool) error {
	ab := &cluster.Abort{Slot: slot, Force: force, Keyspace: abortKeyspace{c}, MoveDest: cl.MoveDest,
		Routing: func() *cluster.Routing {
			if now := cl.Routing(); now != nil {
				return now // as it is once the lease is held
			}
			return r
		}}
	ab.Ask, _ = cl.(cluster.SlotKeysAsker)
	var n int64
	if err := c.runMove(5*time.Second, func() error {
		var err error
		n, err = ab.Run(c.srv.ctx)
		return err
	}); err != nil {
		return err
	}
	c.WriteInt(n)
	return nil
}

// abortKeyspace is the group's keyspace as a cluster.Abort sees it,
// through the connection running CLUSTER ABORTMOVE.
type abortKeyspace struct{ c *Conn }

func (k abortKeyspace) ReadNow() error {
	_, err := k.c.readNow()
	return err
}

func (k abortKeyspace) MovingKeys(fn func(key []byte, st engine.State) bool) {
	k.c.srv.backend.Store().MovingKeys(fn)
}

func (k abortKeyspace) PutBack(keys [][]byte) (int64, error) {
	ops := []shards.Op{{Code: shards.OpMoveAbort, Keys: keys}}
	res := make([]shards.Result, 1)
	err := k.c.srv.backend.Write(k.c.srv.ctx, ops, res)
	k.c.now = 0
	if err == nil {
		err = res[0].Err
	}
	return res[0].N, err
}
