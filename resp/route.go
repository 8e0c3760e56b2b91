package resp

import (
	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/shards"
)

// Cluster routing: before a command with keys runs on a node of a sharded
// cluster, cluster.Check (the slot rule the group's state machine also
// applies at apply time) decides whether this node's group serves it;
// cluster words where the client goes instead (Routing.Refusal,
// OpRefusal), errors.go words that for the wire. Standalone servers and
// unsharded groups pay one nil check per command. See DESIGN.md.

// commandKeys appends to dst the keys of a call of cmd: by its
// MovableKeys when it has one, otherwise by its key positions.
func commandKeys(dst [][]byte, cmd *Command, args [][]byte) [][]byte {
	if cmd.MovableKeys != nil {
		return cmd.MovableKeys(dst, args)
	}
	return cmd.Command.Keys(dst, args)
}

// check runs cluster.Check on q under r, reading this node's keyspace at
// the read instant (fetched only when a key's presence matters), and
// words the verdict: whether the command runs as an ASKING one, or the
// error to answer.
func (c *Conn) check(r *cluster.Routing, q *cluster.Query) (bool, error) {
	c.wkeys = wireKeys{c: c}
	v := cluster.Check(r, &c.wkeys, q)
	if err := c.wkeys.err; err != nil {
		return false, err
	}
	if v.Kind == cluster.InFlight {
		return false, shards.ErrMoving
	}
	return v.Kind == cluster.ServeAsking, r.Refusal(v)
}

// wireKeys is cluster.Keys over this node's keyspace at the connection's
// read instant and the group's tombstones.
type wireKeys struct {
	c   *Conn
	err error // of the read instant: the verdict is void
}

func (k *wireKeys) Here(key []byte) bool {
	now, err := k.c.readNow()
	if err != nil {
		k.err = err
		return true
	}
	return k.c.srv.backend.Store().Exists([][]byte{key}, now) > 0
}

func (k *wireKeys) InFlight(key []byte) bool {
	_, ok := k.c.srv.backend.Store().Moving(key)
	return ok
}

func (k *wireKeys) Moved(key []byte) bool { return k.c.srv.cfg.Cluster.Tombstone(key) }

// redirect words an op's failure from the state machine for a client
// (cluster.Routing.OpRefusal): MOVED and ASK redirections, TRYAGAIN.
func (c *Conn) redirect(err error, keys [][]byte) error {
	if cl := c.srv.cfg.Cluster; cl != nil {
		return cl.Routing().OpRefusal(err, keys)
	}
	return err
}

// routeCommand runs the routing check of a command about to run; op is
// the write's op (nil for a handler), marked Asking when the command runs
// as an ASKING one. A standalone server pays one nil check (this function
// inlines); a group whose routing is unsharded serves every key.
func (c *Conn) routeCommand(cmd *Command, args [][]byte, asking bool, op *shards.Op) error {
	if c.srv.cfg.Cluster == nil {
		return nil
	}
	return c.routeCluster(cmd, args, asking, op)
}

// routeCluster is routeCommand in cluster mode: cluster.Check on the
// command's keys in Read mode for a handler that reads the keyspace
// (decided here, keys included), in Route mode for the others (the group's
// log decides the keys of its own slots).
func (c *Conn) routeCluster(cmd *Command, args [][]byte, asking bool, op *shards.Op) error {
	r := c.srv.cfg.Cluster.Routing()
	if r == nil || !r.Sharded {
		return nil
	}
	c.keys = commandKeys(c.keys[:0], cmd, args)
	defer clear(c.keys)
	ok, err := false, error(nil)
	if len(c.keys) > 0 {
		q := cluster.Query{Keys: c.keys, Mode: cluster.Route, Asking: asking, Open: cmd.OpenSlot}
		if op == nil && cmd.Flags&FlagReadonly != 0 {
			q.Mode = cluster.Read
		}
		ok, err = c.check(r, &q)
	}
	if op != nil {
		op.Asking = ok
	}
	return err
}
