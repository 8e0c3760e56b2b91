package resp

import (
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/txqueue"
)

// Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH. See DESIGN.md
// ("Transactions") for how a transaction's writes are made atomic and where
// its reads see them.

// Defaults of transaction-max-commands and transaction-max-bytes
// (txqueue's, where they are explained).
const (
	DefaultTxMaxCommands = txqueue.DefaultMaxCommands
	DefaultTxMaxBytes    = txqueue.DefaultMaxBytes
)

// txState is a connection's transaction, from MULTI to EXEC or DISCARD:
// its queue, and whether the last queued command is ASKING.
type txState struct {
	txqueue.Queue[*Command]
	asking bool
}

// queued is one command of a transaction.
type queued = txqueue.Entry[*Command]

// runsInMulti reports whether cmd runs at once inside MULTI instead of
// being queued (as Redis: EXEC, DISCARD, MULTI, WATCH, QUIT).
func runsInMulti(cmd *Command) bool {
	switch cmd.fullName {
	case "exec", "discard", "multi", "watch", "quit":
		return true
	}
	return false
}

// txAccess classifies a queued command for the order rule: a batchable
// write goes into the transaction's one atomic write; a command with keys
// or that reads or writes the keyspace otherwise runs on its own, in order.
func txAccess(cmd *Command) txqueue.Access {
	switch {
	case cmd.Prepare != nil:
		return txqueue.Write
	case cmd.Flags&(FlagReadonly|FlagWrite) != 0:
		return txqueue.Keyspace
	}
	return txqueue.None
}

// resetTx ends the transaction and lets go of its queue.
func (tx *txState) resetTx(c *Conn) {
	tx.Reset()
	tx.asking = false
	tx.publishTx(c)
}

// publishTx mirrors the transaction's size for CLIENT LIST, and counts
// it in the client's memory (maxmemory-clients, clientmem.go).
func (tx *txState) publishTx(c *Conn) {
	defer c.cmem.trackMem(c)
	if !tx.On {
		c.multi.Store(-1)
		c.multiMem.Store(0)
		return
	}
	c.multi.Store(int64(len(tx.Entries)))
	c.multiMem.Store(tx.Bytes)
}

// queue answers a command sent inside MULTI: QUEUED, or the refusal that
// makes EXEC answer EXECABORT (Redis's queue-time errors).
func (tx *txState) queue(c *Conn, cmd *Command, args [][]byte) {
	asking := tx.asking
	tx.asking = false
	refuse := func(err error) {
		tx.Failed = true
		c.reject(cmd, err)
	}
	if cmd.Flags&FlagNoMulti != 0 {
		refuse(errNoMulti)
		return
	}
	if hasWait(cmd, args) {
		refuse(errWaitInMulti)
		return
	}
	if err := txRoute(c, cluster.Queue, false, queued{Cmd: cmd, Args: args, Asking: asking}); err != nil {
		refuse(err)
		return
	}
	srv := c.srv
	err := tx.Add(cmd, args, asking, txAccess(cmd), txqueue.Bounds{
		Commands: srv.txMaxCmds.Load(), ArgBytes: srv.txMaxBytes.Load(), Memory: srv.queryLimit.Load()})
	tx.asking = err == nil && !tx.Over && cmd.fullName == "asking"
	tx.publishTx(c)
	if err != nil {
		refuse(err)
		return
	}
	c.WriteSimple("QUEUED")
}

// checkExecReply refuses a transaction whose reply would pass the
// client's output buffer hard limit, with what is already pending for
// it, before any of it runs (txqueue.CheckReply).
func (tx *txState) checkExecReply(c *Conn) error {
	hard := c.srv.outLimits.Load().Normal.Hard
	if hard <= 0 {
		return nil
	}
	est := tx.ReplyEstimate(func(e *queued) int {
		if e.Cmd.Prepare == nil {
			return -1
		}
		c.keys = commandKeys(c.keys[:0], e.Cmd, e.Args)
		defer clear(c.keys)
		return len(c.keys)
	})
	pending := int64(len(c.out))
	if c.lp.gc != nil {
		pending += int64(c.lp.gc.OutboundBuffered())
	}
	return txqueue.CheckReply(est, pending, hard)
}

// txRoute is a transaction's cluster check (cluster.Check, one slot) on
// the keys of q: in Queue mode for one command being queued, as Redis
// Cluster checks each (CROSSSLOT, or MOVED for a slot this group does not
// serve; a migrating slot is decided at EXEC); in Read mode for the whole
// transaction at EXEC (Redis Cluster answers EXEC itself with CROSSSLOT,
// MOVED, ASK or TRYAGAIN and discards the transaction). A MIGRATE between
// EXEC's check and the write is still caught, per op, by the group's
// state machine.
func txRoute(c *Conn, mode cluster.Mode, asking bool, q ...queued) error {
	cl := c.srv.cfg.Cluster
	if cl == nil {
		return nil
	}
	r := cl.Routing()
	if r == nil || !r.Sharded {
		return nil
	}
	c.keys = c.keys[:0]
	defer clear(c.keys)
	for i := range q {
		c.keys = commandKeys(c.keys, q[i].Cmd, q[i].Args)
		asking = asking || q[i].Asking
	}
	_, err := c.check(r, &cluster.Query{Keys: c.keys, Mode: mode, Asking: asking, OneSlot: true})
	return err
}

// execTx runs the queued commands of the transaction and answers their
// replies as one array. The batchable writes (limiter commands, DEL,
// RESTORE, FLUSHALL) go to the backend in one WriteAtomic call, made when
// the first of them is reached; the queue rule (queue) has put every
// command that reads the keyspace either before that point or after the
// last write, so each sees the writes queued before it and none after.
// Queued cluster slot changes are likewise one call (execSlots).
func (tx *txState) execTx(c *Conn, asking bool) error {
	q := tx.Entries
	defer tx.resetTx(c)
	if tx.Failed {
		return errExecAbort
	}
	if err := txRoute(c, cluster.Read, asking, q...); err != nil {
		return err
	}
	if err := tx.checkExecReply(c); err != nil {
		return err
	}
	if asking {
		// ASKING right before EXEC covers the whole transaction.
		for i := range q {
			q[i].Asking = true
		}
	}
	exec := c.cur
	c.WriteArray(len(q))
	c.wb.slots = c.wb.slots[:0] // the writes, in queue order
	var werr error
	var slotReplies map[int]error
	nops, w := 0, 0
	t0 := time.Now()
	for i := range q {
		e := &q[i]
		switch {
		case e.Cmd.Prepare != nil:
			if w == 0 {
				// The first write submits them all, as one atomic call.
				for k := i; k < len(q); k++ {
					if q[k].Cmd.Prepare != nil {
						c.wb.slots = append(c.wb.slots, slot{pos: k, cmd: q[k].Cmd, args: q[k].Args, asking: q[k].Asking})
					}
				}
				nops, werr = c.wb.submitWrites(c, c.wb.slots, true)
			}
			c.wb.finishWrite(c, &c.wb.slots[w], werr)
			w++
		case e.Cmd.slotChange != nil && c.srv.cfg.Cluster != nil:
			if slotReplies == nil {
				slotReplies = execSlots(c, q)
			}
			c.setCurrent(e.Cmd)
			if err := slotReplies[i]; err != nil {
				c.fail(e.Cmd, err)
			} else {
				c.WriteOK()
			}
		default:
			c.setCurrent(e.Cmd)
			err := c.routeCommand(e.Cmd, e.Args, e.Asking, nil)
			if err == nil {
				err = e.Cmd.Handler(c, e.Args)
			}
			if err != nil {
				c.fail(e.Cmd, err)
			}
			c.asking = false // a queued ASKING applies through e.Asking only
		}
		t0 = c.acct.account(c, e.Cmd, e.Args, t0)
	}
	c.wb.releaseOps(c, nops)
	c.wb.slots = c.wb.slots[:0]
	c.setCurrent(exec)
	return nil
}

// execSlots makes the slot changes queued in q as one Cluster.ChangeSlots
// call, and returns each one's answer by its position in q (nil: done).
func execSlots(c *Conn, q []queued) map[int]error {
	out := map[int]error{}
	var changes []cluster.SlotChange
	var pos []int
	for i := range q {
		if q[i].Cmd.slotChange == nil {
			continue
		}
		sc, err := q[i].Cmd.slotChange(q[i].Args)
		if err != nil {
			out[i] = err
			continue
		}
		changes = append(changes, sc)
		pos = append(pos, i)
	}
	if len(changes) == 0 {
		return out
	}
	errs, err := c.srv.cfg.Cluster.ChangeSlots(c.srv.ctx, changes)
	for k, i := range pos {
		switch {
		case err != nil:
			out[i] = err
		case changes[k].Kind == cluster.SlotSet:
			out[i] = unknownNode(errs[k], changes[k].NodeID)
		default:
			out[i] = errs[k]
		}
	}
	return out
}

func multiHandler(c *Conn, _ [][]byte) error {
	if c.tx.On {
		return errNestedMulti
	}
	c.tx.resetTx(c)
	c.tx.On = true
	c.tx.publishTx(c)
	c.WriteOK()
	return nil
}

func execHandler(c *Conn, _ [][]byte) error {
	if !c.tx.On {
		return errExecNoMulti
	}
	return c.tx.execTx(c, c.cmdAsking)
}

func discardHandler(c *Conn, _ [][]byte) error {
	if !c.tx.On {
		return errDiscardNo
	}
	c.tx.resetTx(c)
	c.WriteOK()
	return nil
}

func watchHandler(c *Conn, _ [][]byte) error {
	if c.tx.On {
		return errWatchInMulti
	}
	return errWatch
}

func unwatchHandler(c *Conn, _ [][]byte) error {
	c.WriteOK()
	return nil
}
