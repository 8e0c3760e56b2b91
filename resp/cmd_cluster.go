package resp

import (
	"strconv"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/internal/reply"
)

// The Redis Cluster protocol over replication groups (DESIGN.md): every
// view is cluster's data, computed from one cluster.Routing, which these
// handlers frame. A standalone server answers every CLUSTER subcommand,
// READONLY, READWRITE and ASKING as a Redis server without cluster
// support does.

// clusterHandler wraps a CLUSTER subcommand's handler: it gets the node's
// Cluster and routing table (before the node has one, an unsharded one of
// a single group without members, which serves no slot); on a standalone
// server it answers errClusterDisabled instead.
func clusterHandler(h func(c *Conn, cl Cluster, r *cluster.Routing, args [][]byte) error) func(c *Conn, args [][]byte) error {
	return func(c *Conn, args [][]byte) error {
		cl := c.srv.cfg.Cluster
		if cl == nil {
			return errClusterDisabled
		}
		r := cl.Routing()
		if r == nil {
			r = cluster.NewRouting(0, "", []cluster.GroupView{{}})
		}
		return h(c, cl, r, args)
	}
}

// slotKeys calls fn for every key of slot at the read instant
// (cluster.SlotKeys) until it returns false.
func slotKeys(c *Conn, slot int, fn func(key []byte) bool) error {
	now, err := c.readNow()
	if err != nil {
		return err
	}
	cluster.SlotKeys(c.srv.backend.Store(), slot, now, fn)
	return nil
}

// clusterView answers a CLUSTER subcommand that shows the routing table
// (SLOTS, SHARDS, NODES, INFO, MYID, BUMPEPOCH) with view's reply.
func clusterView(view func(r *cluster.Routing) reply.Node) func(c *Conn, args [][]byte) error {
	return clusterHandler(func(c *Conn, _ Cluster, r *cluster.Routing, _ [][]byte) error {
		c.WriteNode(view(r))
		return nil
	})
}

func clusterNodesView(r *cluster.Routing) reply.Node { return reply.Bulk(string(r.Nodes())) }

func clusterInfoView(r *cluster.Routing) reply.Node {
	return reply.Bulk(string(appendFields(nil, r.Summary().InfoFields())))
}

func clusterBumpepochView(r *cluster.Routing) reply.Node {
	return reply.Simple("STILL " + strconv.FormatUint(r.Groups[r.Self].Term, 10))
}

func clusterMyidView(r *cluster.Routing) reply.Node { return reply.Bulk(r.MyID()) }

// parseSetSlot parses CLUSTER SETSLOT slot action [node-id].
func parseSetSlot(args [][]byte) (cluster.SlotChange, error) { return cluster.ParseSetSlot(args[2:]) }

// clusterReplicasCmd answers CLUSTER REPLICAS id: the followers of id's
// group, when id is its leader.
func clusterReplicasCmd(c *Conn, _ Cluster, r *cluster.Routing, args [][]byte) error {
	lines, err := r.Replicas(string(args[2]))
	if err != nil {
		return err
	}
	c.WriteArray(len(lines))
	for _, l := range lines {
		c.WriteBulk(l)
	}
	return nil
}

func clusterKeyslotCmd(c *Conn, _ Cluster, _ *cluster.Routing, args [][]byte) error {
	c.WriteInt(int64(hashslot.Of(args[2])))
	return nil
}

func clusterCountkeysinslotCmd(c *Conn, _ Cluster, _ *cluster.Routing, args [][]byte) error {
	slot, _, err := cluster.ParseKeysInSlot(args[2:])
	if err != nil {
		return err
	}
	n := int64(0)
	if err := slotKeys(c, slot, func([]byte) bool { n++; return true }); err != nil {
		return err
	}
	c.WriteInt(n)
	return nil
}

func clusterGetkeysinslotCmd(c *Conn, _ Cluster, _ *cluster.Routing, args [][]byte) error {
	slot, count, err := cluster.ParseKeysInSlot(args[2:])
	if err != nil {
		return err
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
}

func clusterFailoverCmd(c *Conn, cl Cluster, _ *cluster.Routing, args [][]byte) error {
	if err := cluster.ParseFailover(args[2:]); err != nil {
		return err
	}
	return okOr(c, cl.Failover(c.srv.ctx))
}

func clusterMeetCmd(c *Conn, cl Cluster, _ *cluster.Routing, args [][]byte) error {
	addr, err := cluster.ParseMeet(args[2:])
	if err != nil {
		return err
	}
	return okOr(c, cl.Meet(c.srv.ctx, addr))
}

func clusterSetslotCmd(c *Conn, cl Cluster, _ *cluster.Routing, args [][]byte) error {
	sc, err := parseSetSlot(args)
	if err != nil {
		return err
	}
	return okOr(c, unknownNode(cl.SetSlot(c.srv.ctx, sc.Slot, sc.Action, sc.NodeID), sc.NodeID))
}

// slotsBinding binds ADDSLOTS and DELSLOTS (ranged: ADDSLOTSRANGE,
// DELSLOTSRANGE), which parse their slots and hand them to the group; in a
// transaction they are one slot change each (slotChange).
func slotsBinding(kind cluster.SlotChangeKind, ranged bool) binding {
	parse := cluster.ParseSlotList
	if ranged {
		parse = cluster.ParseSlotRanges
	}
	return binding{
		slotChange: func(a [][]byte) (cluster.SlotChange, error) {
			slots, err := parse(a[2:])
			return cluster.SlotChange{Kind: kind, Slots: slots}, err
		},
		Handler: clusterHandler(func(c *Conn, cl Cluster, _ *cluster.Routing, a [][]byte) error {
			slots, err := parse(a[2:])
			if err != nil {
				return err
			}
			apply := cl.DelSlots
			if kind == cluster.SlotAdd {
				apply = cl.AddSlots
			}
			return okOr(c, apply(c.srv.ctx, slots))
		}),
	}
}

// READONLY and READWRITE answer OK and change nothing: followers serve
// reads as --raft-local-reads says. ASKING lets the next command run on a
// slot this group is importing.
func readonlyHandler(c *Conn, _ [][]byte) error { return clusterConnHandler(c, func(*Conn) {}) }

func askingHandler(c *Conn, _ [][]byte) error {
	return clusterConnHandler(c, func(c *Conn) { c.asking = true })
}

func clusterConnHandler(c *Conn, h func(c *Conn)) error {
	if c.srv.cfg.Cluster == nil {
		return errClusterDisabled
	}
	h(c)
	c.WriteOK()
	return nil
}

// clusterAbortmoveCmd runs CLUSTER ABORTMOVE (cluster.Abort) holding the
// group's move lease, so that it never races a MIGRATE of any node of the
// group: the keys of slot in flight out of this group go back into its
// keyspace when each was sent where it cannot be served (other groups
// asked through the node's directory), or when FORCE.
func clusterAbortmoveCmd(c *Conn, cl Cluster, r *cluster.Routing, args [][]byte) error {
	slot, force, err := cluster.ParseAbortMove(args[2:])
	if err != nil {
		return err
	}
	ab := &cluster.Abort{Slot: slot, Force: force, Keyspace: connKeyspace{c}, MoveDest: cl.MoveDest,
		Routing: func() *cluster.Routing {
			if now := cl.Routing(); now != nil {
				return now // as it is once the lease is held
			}
			return r
		}}
	ab.Ask, _ = cl.(cluster.SlotKeysAsker)
	var n int64
	if err := c.srv.mover.RunFor(c.srv.ctx, 5*time.Second, func() error {
		var err error
		n, err = ab.Run(c.srv.ctx)
		return err
	}); err != nil {
		return err
	}
	c.WriteInt(n)
	return nil
}
