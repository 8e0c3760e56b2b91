package resp

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"

	"github.com/cellserver/cellserver/engine"
)

// The Redis Cluster protocol over one replication group: the group is a
// single shard owning all 16384 slots, its leader the master and its other
// voters the replicas, so that cluster-aware clients find the leader by
// themselves. A standalone server answers every CLUSTER subcommand, READONLY,
// READWRITE and ASKING as a Redis server without cluster support does.

// errClusterDisabled is Redis's reply on a server without cluster support.
var errClusterDisabled = &textError{"ERR This instance has cluster support disabled"}

// clusterNodeID returns the 40 lowercase hex digits CLUSTER reports as the
// node id of a member: the SHA-1 of its NodeID, so it is stable across
// restarts and the same on every node.
func clusterNodeID(nodeID string) string {
	h := sha1.Sum([]byte(nodeID))
	return hex.EncodeToString(h[:])
}

// clusterTopology returns the group's topology, or errClusterDisabled on a
// standalone server.
func clusterTopology(c *Conn) (Topology, error) {
	cl := c.srv.cfg.Cluster
	if cl == nil {
		return Topology{}, errClusterDisabled
	}
	return cl.Topology(), nil
}

// clusterHandler wraps a CLUSTER subcommand's handler: on a standalone
// server it answers errClusterDisabled instead.
func clusterHandler(h func(c *Conn, t Topology, args [][]byte) error) func(c *Conn, args [][]byte) error {
	return func(c *Conn, args [][]byte) error {
		t, err := clusterTopology(c)
		if err != nil {
			return err
		}
		return h(c, t, args)
	}
}

// hasLeader reports whether t names a leader (then Nodes[0]).
func (t *Topology) hasLeader() bool { return len(t.Nodes) > 0 && t.Nodes[0].Leader }

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

// slotKeys calls fn once for every distinct live key of slot at the read
// instant, by scanning the whole keyspace: O(N) in the number of keys.
// It stops when fn returns false.
func slotKeys(c *Conn, slot int, fn func(key []byte) bool) error {
	now, err := c.readNow()
	if err != nil {
		return err
	}
	store := c.srv.backend.Store()
	seen := map[string]bool{} // a scan may report a key twice
	var found [][]byte
	stop := false
	for cur := uint64(0); !stop; {
		found = found[:0]
		cur = store.Scan(cur, 1000, now, func(key []byte, _ engine.Kind) {
			if keySlot(key) == slot && !seen[string(key)] {
				seen[string(key)] = true
				found = append(found, append([]byte(nil), key...))
			}
		})
		for _, k := range found {
			if !fn(k) {
				stop = true
				break
			}
		}
		if cur == 0 {
			break
		}
	}
	return nil
}

// appendClusterNodeLine appends nd's CLUSTER NODES line.
func appendClusterNodeLine(b []byte, t *Topology, nd *TopologyNode) []byte {
	b = append(b, clusterNodeID(nd.ID)...)
	b = append(b, ' ')
	b = append(b, nd.Host...)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(nd.Port), 10)
	b = append(b, '@')
	b = strconv.AppendInt(b, int64(nd.BusPort), 10)
	b = append(b, ' ')
	if nd.ID == t.SelfID {
		b = append(b, "myself,"...)
	}
	master := "-"
	if nd.Leader || !t.hasLeader() {
		b = append(b, "master"...)
	} else {
		b = append(b, "slave"...)
		master = clusterNodeID(t.Nodes[0].ID)
	}
	b = append(b, ' ')
	b = append(b, master...)
	b = append(b, " 0 0 "...)
	b = strconv.AppendUint(b, t.Term, 10)
	b = append(b, " connected"...)
	if nd.Leader {
		b = append(b, " 0-16383"...)
	}
	return append(b, '\n')
}

// writeSlotsNode writes one node of a CLUSTER SLOTS range: ip, port, id and
// an empty networking-metadata map, as Redis 7 does.
func writeSlotsNode(c *Conn, nd *TopologyNode) {
	c.WriteArray(4)
	c.WriteBulkString(nd.Host)
	c.WriteInt(int64(nd.Port))
	c.WriteBulkString(clusterNodeID(nd.ID))
	c.WriteMap(0)
}

func clusterCommand() *Command {
	sub := func(cmd *Command) *Command {
		cmd.Group = "cluster"
		cmd.Since = "0.1.0"
		cmd.Flags |= FlagStale | FlagLoading
		cmd.Errors = append([]string{"`ERR This instance has cluster support disabled` on a standalone server."}, cmd.Errors...)
		return cmd
	}
	return &Command{
		Name: "cluster", Arity: -2, Flags: FlagStale | FlagLoading, Group: "cluster", Since: "0.1.0",
		Summary: "Describes the Redis Cluster view of the replication group: one shard owning every slot.", Complexity: "Depends on the subcommand",
		Notes: []string{"A replication group answers as a Redis Cluster of one shard owning slots 0–16383: its leader is the master, " +
			"its other voting members with a replicated RESP address are its replicas (non-voters catching up are not listed). " +
			"A node's id is the 40 lowercase hex digits of the SHA-1 of its `--node-id`, the same on every node and across restarts. " +
			"The cluster bus port reported is the node's raft port. While no leader is known, no slot is served: every member is " +
			"listed as a master without slots and `cluster_state` is `fail`."},
		Subcommands: []*Command{
			sub(&Command{
				Name: "slots", Arity: 2, Flags: FlagFast, Summary: "Returns the slot ranges and the nodes serving them.", Complexity: "O(members)",
				Reply: "Array with one range, `[0, 16383, leader, replicas...]`, each node an array of IP (bulk string), port (integer), node id (bulk string) " +
					"and an empty map of networking metadata, as Redis 7 answers; an empty array while no leader is known.",
				Handler: clusterHandler(func(c *Conn, t Topology, _ [][]byte) error {
					if !t.hasLeader() {
						c.WriteArray(0)
						return nil
					}
					c.WriteArray(1)
					c.WriteArray(2 + len(t.Nodes))
					c.WriteInt(0)
					c.WriteInt(clusterSlots - 1)
					for i := range t.Nodes {
						writeSlotsNode(c, &t.Nodes[i])
					}
					return nil
				}),
			}),
			sub(&Command{
				Name: "shards", Arity: 2, Flags: FlagFast, Summary: "Returns the shards, their slots and nodes.", Complexity: "O(members)",
				Reply: "Array of one map (a flat array in RESP2) with `slots` (array of integers: `0`, `16383`; empty while no leader is known) and `nodes`: " +
					"one map per node with `id`, `port`, `ip`, `endpoint`, `role` (`master` or `replica`), `replication-offset` (0) and `health` (`online`), as Redis 7 answers.",
				Handler: clusterHandler(func(c *Conn, t Topology, _ [][]byte) error {
					c.WriteArray(1)
					c.WriteMap(2)
					c.WriteBulkString("slots")
					if t.hasLeader() {
						c.WriteArray(2)
						c.WriteInt(0)
						c.WriteInt(clusterSlots - 1)
					} else {
						c.WriteArray(0)
					}
					c.WriteBulkString("nodes")
					c.WriteArray(len(t.Nodes))
					for _, nd := range t.Nodes {
						role := "replica"
						if nd.Leader || !t.hasLeader() {
							role = "master"
						}
						c.WriteMap(7)
						c.WriteBulkString("id")
						c.WriteBulkString(clusterNodeID(nd.ID))
						c.WriteBulkString("port")
						c.WriteInt(int64(nd.Port))
						c.WriteBulkString("ip")
						c.WriteBulkString(nd.Host)
						c.WriteBulkString("endpoint")
						c.WriteBulkString(nd.Host)
						c.WriteBulkString("role")
						c.WriteBulkString(role)
						c.WriteBulkString("replication-offset")
						c.WriteInt(0)
						c.WriteBulkString("health")
						c.WriteBulkString("online")
					}
					return nil
				}),
			}),
			sub(&Command{
				Name: "nodes", Arity: 2, Summary: "Returns the cluster configuration as this node sees it.", Complexity: "O(members)",
				Reply: "Bulk string, one line per node in Redis 7's format: `<id> <ip:port@cport> <flags> <master-id|-> 0 0 <config-epoch> connected [0-16383]`, " +
					"where cport is the node's raft port, flags are `master` or `slave` (prefixed `myself,` on this node), the config epoch is the raft term, and the leader's line ends with `0-16383`.",
				Handler: clusterHandler(func(c *Conn, t Topology, _ [][]byte) error {
					var b []byte
					for i := range t.Nodes {
						b = appendClusterNodeLine(b, &t, &t.Nodes[i])
					}
					c.WriteBulk(b)
					return nil
				}),
			}),
			sub(&Command{
				Name: "info", Arity: 2, Flags: FlagFast, Summary: "Returns the cluster's state.", Complexity: "O(1)",
				Reply: "Bulk string of `field:value` lines as Redis writes them: `cluster_state` (`ok` while a leader is known, and so all 16384 slots are served; otherwise `fail`), " +
					"`cluster_slots_assigned`, `cluster_slots_ok`, `cluster_slots_pfail`, `cluster_slots_fail`, `cluster_known_nodes`, `cluster_size` (1: one shard), " +
					"`cluster_current_epoch` and `cluster_my_epoch` (the raft term), and zero message counters.",
				Handler: clusterHandler(func(c *Conn, t Topology, _ [][]byte) error {
					state, slots, size := "fail", int64(0), int64(0)
					if t.hasLeader() {
						state, slots, size = "ok", clusterSlots, 1
					}
					term := strconv.FormatUint(t.Term, 10)
					b := field(nil, "cluster_state", state)
					b = fieldInt(b, "cluster_slots_assigned", slots)
					b = fieldInt(b, "cluster_slots_ok", slots)
					b = fieldInt(b, "cluster_slots_pfail", 0)
					b = fieldInt(b, "cluster_slots_fail", 0)
					b = fieldInt(b, "cluster_known_nodes", int64(len(t.Nodes)))
					b = fieldInt(b, "cluster_size", size)
					b = field(b, "cluster_current_epoch", term)
					b = field(b, "cluster_my_epoch", term)
					b = fieldInt(b, "cluster_stats_messages_sent", 0)
					b = fieldInt(b, "cluster_stats_messages_received", 0)
					b = fieldInt(b, "total_cluster_links_buffer_limit_exceeded", 0)
					c.WriteBulk(b)
					return nil
				}),
			}),
			sub(&Command{
				Name: "myid", Arity: 2, Flags: FlagFast, Summary: "Returns this node's cluster node id.", Complexity: "O(1)",
				Reply: "Bulk string: 40 lowercase hex digits, the SHA-1 of the node's `--node-id`.",
				Handler: clusterHandler(func(c *Conn, t Topology, _ [][]byte) error {
					c.WriteBulkString(clusterNodeID(t.SelfID))
					return nil
				}),
			}),
			sub(&Command{
				Name: "keyslot", Arity: 3, Flags: FlagFast, Summary: "Returns the hash slot of a key.", Complexity: "O(N) where N is the number of bytes in the key",
				Args:  []Arg{{Name: "key", Type: "string"}},
				Reply: "Integer in [0, 16383]: CRC16-XMODEM of the key, or of its hash tag (the bytes between the first `{` and the first `}` after it, when there is at least one), modulo 16384, as Redis computes it.",
				Handler: clusterHandler(func(c *Conn, _ Topology, args [][]byte) error {
					c.WriteInt(int64(keySlot(args[2])))
					return nil
				}),
			}),
			sub(&Command{
				Name: "countkeysinslot", Arity: 3, Flags: FlagReadonly, Summary: "Counts the live keys of a hash slot.",
				Complexity: "O(N) where N is the number of keys: the whole keyspace is scanned",
				Args:       []Arg{{Name: "slot", Type: "integer"}},
				Reply:      "Integer: the number of keys of the slot live at the read instant (keys created or deleted during the scan may or may not be counted).",
				Errors:     []string{"`ERR Invalid slot` for a slot outside [0, 16383]."},
				Handler: clusterHandler(func(c *Conn, _ Topology, args [][]byte) error {
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
				Name: "getkeysinslot", Arity: 4, Flags: FlagReadonly, Summary: "Returns up to count live keys of a hash slot.",
				Complexity: "O(N) where N is the number of keys: the keyspace is scanned until count keys of the slot are found",
				Args:       []Arg{{Name: "slot", Type: "integer"}, {Name: "count", Type: "integer"}},
				Reply:      "Array of bulk strings: at most count keys of the slot, in no particular order.",
				Errors:     []string{"`ERR Invalid slot or number of keys` for a slot outside [0, 16383] or a negative count."},
				Handler: clusterHandler(func(c *Conn, _ Topology, args [][]byte) error {
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
		},
	}
}

// clusterConnCommands are READONLY, READWRITE and ASKING: in a replication
// group they answer OK and change nothing (reads on followers are served
// as --raft-local-reads says; every node serves every slot).
func clusterConnCommands() []*Command {
	ok := func(c *Conn, _ [][]byte) error {
		if c.srv.cfg.Cluster == nil {
			return errClusterDisabled
		}
		c.WriteOK()
		return nil
	}
	mk := func(name, summary string) *Command {
		return &Command{
			Name: name, Arity: 1, Flags: FlagFast | FlagStale | FlagLoading, Group: "cluster", Since: "0.1.0",
			Summary: summary, Complexity: "O(1)", Handler: ok,
			Reply:  "Simple string `OK`. The connection is unchanged: every node of the group serves every slot, and followers serve reads as --raft-local-reads says.",
			Errors: []string{"`ERR This instance has cluster support disabled` on a standalone server."},
		}
	}
	return []*Command{
		mk("readonly", "Accepts reads of replica slots on this connection (a no-op: one shard)."),
		mk("readwrite", "Ends READONLY on this connection (a no-op: one shard)."),
		mk("asking", "Accepts the next command for an importing slot (a no-op: no slot migrates)."),
	}
}
