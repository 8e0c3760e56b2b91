package resp

import (
	"errors"

	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/shards"
)

// Cluster routing: before a command with keys runs on a node of a sharded
// cluster, the slots of its keys decide whether this node's group serves
// it (Redis Cluster's redirections). The check runs only when the server
// has a Cluster and its Routing is sharded; standalone servers and
// unsharded groups pay one nil check per command.
//
// The wire layer decides from Routing what it can know before the command
// runs: the owner of each slot, CROSSSLOT, and ASKING for an importing
// slot. Writes of a slot migrating out are decided by the group's state
// machine at apply time (a key still here runs; none here: ErrAsk; some
// here: ErrTryAgain), so every replica decides alike; the results come back
// in shards.Result.Err and are worded by redirect.

// commandKeys appends to dst the keys of a call of cmd: by its
// MovableKeys when it has one, otherwise by its key positions (FirstKey,
// LastKey, KeyStep).
func commandKeys(dst [][]byte, cmd *Command, args [][]byte) [][]byte {
	if cmd.MovableKeys != nil {
		return cmd.MovableKeys(dst, args)
	}
	if cmd.FirstKey <= 0 {
		return dst
	}
	last := cmd.LastKey
	if last < 0 {
		last += len(args)
	}
	step := max(cmd.KeyStep, 1)
	for i := cmd.FirstKey; i <= last && i < len(args); i += step {
		dst = append(dst, args[i])
	}
	return dst
}

// route checks that this node's group serves the keys of a call of cmd
// under routing r (sharded). asking is whether the connection sent ASKING
// just before. It returns whether the command runs as an ASKING one (its
// slot is being imported here), or the redirection or refusal to answer.
// read is true for commands that read the keyspace in their handler: on a
// slot migrating out, a key not here is answered with ASK (TRYAGAIN when
// some keys are here and some not, or a key is in flight).
func (c *Conn) route(r *replication.Routing, cmd *Command, args [][]byte, asking, read bool) (bool, error) {
	c.keys = commandKeys(c.keys[:0], cmd, args)
	defer clear(c.keys)
	if len(c.keys) == 0 {
		return false, nil
	}
	slot, cross, mine := -1, false, true
	for _, k := range c.keys {
		s := keySlot(k)
		if slot < 0 {
			slot = s
		} else if s != slot {
			cross = true
		}
		if r.Owner(s) != r.Self {
			mine = false
		}
	}
	switch {
	case cmd.OpenSlot && !cross && (r.ImportingFrom(slot) >= 0 || r.MigratingTo(slot) >= 0):
		return false, nil
	case mine && read:
		return false, c.readMigrating(r, c.keys, cross)
	case mine:
		return false, nil
	case cross:
		return false, errCrossSlot
	case asking && (r.ImportingFrom(slot) >= 0 || cmd.Prepare != nil):
		// A write op after ASKING goes on to the group's log even when this
		// node does not know the slot is imported (a follower that has
		// not applied IMPORTING yet): the state machine decides, from the
		// group's state, at apply time (ErrMoved when it is not).
		return true, nil
	}
	return false, moved(r, slot)
}

// moved returns the MOVED redirection of slot to its owner's leader (its
// first member while no leader is known); errSlotNotServed when no group
// owns it, or errSlotNotKnown while a known group has not answered yet
// and may own it.
func moved(r *replication.Routing, slot int) error {
	addr := r.RedirectAddr(r.Owner(slot))
	if addr != "" {
		return &redirectError{slot: slot, addr: addr}
	}
	for g := range r.Groups {
		if g != r.Self && len(r.Groups[g].Members) == 0 {
			return errSlotNotKnown
		}
	}
	return errSlotNotServed
}

// readMigrating decides a read of keys, all of slots this group owns, when
// some of them migrate out: keys all absent here go to the target (ASK,
// for a single slot), keys split between here and there, or in flight,
// must wait (TRYAGAIN).
func (c *Conn) readMigrating(r *replication.Routing, keys [][]byte, cross bool) error {
	slot := -1
	for _, k := range keys {
		if s := keySlot(k); r.MigratingTo(s) >= 0 {
			slot = s
			break
		}
	}
	if slot < 0 {
		return nil
	}
	now, err := c.readNow()
	if err != nil {
		return err
	}
	store := c.srv.backend.Store()
	present := store.Exists(keys, now)
	for _, k := range keys {
		if _, ok := store.Moving(k); ok {
			return shards.ErrMoving
		}
	}
	switch {
	case present == int64(len(keys)):
		return nil
	case present > 0 || cross:
		return replication.ErrTryAgain
	}
	addr := r.RedirectAddr(r.MigratingTo(slot))
	if addr == "" {
		return replication.ErrTryAgain
	}
	return &redirectError{ask: true, slot: slot, addr: addr}
}

// redirect words an op's failure from the state machine: ErrMoved and
// ErrAsk become MOVED and ASK redirections naming the slot of the first
// key concerned and the group Routing says serves it; other errors are
// returned as they are.
func (c *Conn) redirect(err error, keys [][]byte) error {
	cl := c.srv.cfg.Cluster
	if cl == nil || len(keys) == 0 {
		return err
	}
	ask := errors.Is(err, replication.ErrAsk)
	if !ask && !errors.Is(err, replication.ErrMoved) {
		return err
	}
	r := cl.Routing()
	if r == nil {
		return errSlotNotServed
	}
	slot := keySlot(keys[0])
	for _, k := range keys {
		s := keySlot(k)
		if (ask && r.MigratingTo(s) >= 0) || (!ask && r.Owner(s) != r.Self) {
			slot = s
			break
		}
	}
	if !ask {
		if r.Owner(slot) == r.Self {
			// The group gave the slot away and this routing table does
			// not show it yet: the client retries shortly.
			return replication.ErrTryAgain
		}
		return moved(r, slot)
	}
	addr := r.RedirectAddr(r.MigratingTo(slot))
	if addr == "" {
		return replication.ErrTryAgain
	}
	return &redirectError{ask: true, slot: slot, addr: addr}
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

// routeCluster is routeCommand in cluster mode. Handlers that read the
// keyspace get the migrating-slot check (see route).
func (c *Conn) routeCluster(cmd *Command, args [][]byte, asking bool, op *shards.Op) error {
	r := c.srv.cfg.Cluster.Routing()
	if r == nil || !r.Sharded {
		return nil
	}
	read := op == nil && cmd.Flags&FlagReadonly != 0
	ok, err := c.route(r, cmd, args, asking, read)
	if op != nil {
		op.Asking = ok
	}
	return err
}
