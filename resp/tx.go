package resp

import (
	"errors"
	"time"

	"github.com/cellserver/cellserver/cluster"
)

// Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH. See DESIGN.md
// ("Transactions") for how a transaction's writes are made atomic and where
// its reads see them.

// Errors of transactions, worded in appendErrorText.
var (
	errNestedMulti  = errors.New("MULTI calls can not be nested")
	errExecNoMulti  = errors.New("EXEC without MULTI")
	errDiscardNo    = errors.New("DISCARD without MULTI")
	errExecAbort    = errors.New("transaction discarded because of previous errors")
	errWatchInMulti = errors.New("WATCH inside MULTI is not allowed")
	errWatch        = errors.New("WATCH is not supported")
	errNoMulti      = errors.New("command not allowed inside a transaction")
	// errTxReadBetween: a write queued after a read that follows a write.
	errTxReadBetween = errors.New("transaction reads the keyspace between two writes")
)

// Defaults of transaction-max-commands and transaction-max-bytes. A
// transaction's writes are one raft log entry that every member writes,
// sends and applies as one step while other clients' writes wait behind
// it; at these bounds the largest transaction commits in a few hundred
// milliseconds on a 3-node group (docs/performance.md, "The largest
// transaction"), and normal transactions (tens of commands) never meet
// them.
const (
	DefaultTxMaxCommands = 10000
	DefaultTxMaxBytes    = 1 << 20
)

// txLimitError refuses a command queued past one of a transaction's
// bounds: the setting that bounds it and its value (limit, in unit).
type txLimitError struct {
	setting string // transaction-max-commands, transaction-max-bytes or client-query-buffer-limit
	limit   int64
	unit    string // "commands" or "bytes"
}

func (e *txLimitError) Error() string { return "transaction past " + e.setting }

// txReplyError refuses EXEC when the transaction's reply would pass the
// client's output buffer hard limit: estimate bytes against hard.
type txReplyError struct{ estimate, hard int64 }

func (e *txReplyError) Error() string { return "transaction reply over client-output-buffer-limit" }

// txState is a connection's transaction, from MULTI to EXEC or DISCARD.
type txState struct {
	on bool
	// failed: a command was refused while queuing (unknown, arity, not
	// allowed, redirected, too large); EXEC answers EXECABORT.
	failed bool
	// over: a command passed a bound (txLimitError); the queue was let
	// go of and later commands are answered QUEUED without being kept,
	// since the transaction can only abort.
	over bool
	cmds []queued
	// bytes is what the queue accounts for in memory, against
	// client-query-buffer-limit; argBytes its arguments' bytes (about
	// the size of its log entry), against transaction-max-bytes.
	bytes, argBytes int64
	// wrote: a keyspace write is queued; readAfter: then a command that
	// reads the keyspace (or writes it outside the atomic write).
	wrote, readAfter bool
	// asking: the last queued command is ASKING.
	asking bool
}

// queued is one command of a transaction. Its arguments are copies (the
// read buffer is reused by the next batch), in one allocation.
type queued struct {
	cmd    *Command
	args   [][]byte
	asking bool // queued right after ASKING
}

// queuedOverhead is what one queued command accounts for beyond its
// argument bytes (its slice headers and bookkeeping), so that a flood of
// empty commands is bounded too.
const queuedOverhead = 64

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
func txAccess(cmd *Command) (write, access bool) {
	if cmd.Prepare != nil {
		return true, false
	}
	return false, cmd.Flags&(FlagReadonly|FlagWrite) != 0
}

// resetTx ends the transaction and lets go of its queue.
func (tx *txState) resetTx(c *Conn) {
	clear(tx.cmds)
	cmds := tx.cmds[:0]
	if cap(cmds) > 1024 {
		cmds = nil
	}
	*tx = txState{cmds: cmds}
	tx.publishTx(c)
}

// publishTx mirrors the transaction's size for CLIENT LIST, and counts
// it in the client's memory (maxmemory-clients, clientmem.go).
func (tx *txState) publishTx(c *Conn) {
	defer c.cmem.trackMem(c)
	if !tx.on {
		c.multi.Store(-1)
		c.multiMem.Store(0)
		return
	}
	c.multi.Store(int64(len(tx.cmds)))
	c.multiMem.Store(tx.bytes)
}

// queue answers a command sent inside MULTI: QUEUED, or the refusal that
// makes EXEC answer EXECABORT (Redis's queue-time errors).
func (tx *txState) queue(c *Conn, cmd *Command, args [][]byte) {
	asking := tx.asking
	tx.asking = false
	refuse := func(err error) {
		tx.failed = true
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
	if err := queueRoute(c, cmd, args, asking); err != nil {
		refuse(err)
		return
	}
	if tx.over {
		c.WriteSimple("QUEUED")
		return
	}
	size, argBytes := queuedSize(args)
	if err := tx.txBound(c, size, argBytes); err != nil {
		// Let go of the queue now: the transaction can only abort.
		clear(tx.cmds)
		tx.cmds = nil
		tx.bytes = 0
		tx.over = true
		tx.publishTx(c)
		refuse(err)
		return
	}
	write, access := txAccess(cmd)
	switch {
	case write && tx.readAfter:
		refuse(errTxReadBetween)
		return
	case write:
		tx.wrote = true
	case access && tx.wrote:
		tx.readAfter = true
	}
	n := 0
	for _, a := range args {
		n += len(a)
	}
	buf := make([]byte, 0, n)
	cp := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		cp[i] = buf[len(buf)-len(a) : len(buf) : len(buf)]
	}
	tx.bytes += size
	tx.argBytes += argBytes
	tx.cmds = append(tx.cmds, queued{cmd: cmd, args: cp, asking: asking})
	tx.asking = cmd.fullName == "asking"
	tx.publishTx(c)
	c.WriteSimple("QUEUED")
}

// queuedSize returns what one queued command with args accounts for in
// memory (its argument bytes, a slice header each and queuedOverhead) and
// its argument bytes alone.
func queuedSize(args [][]byte) (size, argBytes int64) {
	for _, a := range args {
		argBytes += int64(len(a))
	}
	return queuedOverhead + argBytes + 24*int64(len(args)), argBytes
}

// txBound reports whether one more queued command (size bytes in memory,
// argBytes of arguments) passes transaction-max-commands,
// transaction-max-bytes or client-query-buffer-limit, naming the setting.
func (tx *txState) txBound(c *Conn, size, argBytes int64) error {
	if n := c.srv.txMaxCmds.Load(); int64(len(tx.cmds)) >= n {
		return &txLimitError{setting: "transaction-max-commands", limit: n, unit: "commands"}
	}
	if n := c.srv.txMaxBytes.Load(); tx.argBytes+argBytes > n {
		return &txLimitError{setting: "transaction-max-bytes", limit: n, unit: "bytes"}
	}
	if n := c.srv.queryLimit.Load(); tx.bytes+size > n {
		return &txLimitError{setting: "client-query-buffer-limit", limit: n, unit: "bytes"}
	}
	return nil
}

// Reply sizes for the check at EXEC (checkExecReply).
const (
	// decisionReplyMax bounds the reply of one key of a batchable write:
	// a limiter decision is an array of at most six integers ("*6\r\n"
	// and six ":<int64>\r\n", 4 + 6×23 = 142 bytes); DEL's integer and
	// RESTORE's OK are shorter, and so are the usual error lines.
	decisionReplyMax = 142
	// replyLineMax is counted for each other queued command beyond its
	// arguments' bytes (a status, an integer or a short error line).
	replyLineMax = 32
)

// execReplyEstimate estimates, before anything runs, the bytes of the
// EXEC reply of queue q: for each batchable write, decisionReplyMax per
// key (the whole decision reply, whatever the numbers); for any other
// command its arguments' bytes (ECHO's reply is its argument; most are
// shorter). Commands whose reply does not follow from their arguments
// (KEYS, INFO, CLIENT LIST) are checked against the limit as their reply
// is built, as outside a transaction.
func execReplyEstimate(c *Conn, q []queued) int64 {
	n := int64(16) // the array header
	for i := range q {
		e := &q[i]
		if e.cmd.Prepare != nil {
			c.keys = commandKeys(c.keys[:0], e.cmd, e.args)
			n += int64(max(len(c.keys), 1)) * decisionReplyMax
			clear(c.keys)
			continue
		}
		n += replyLineMax
		for _, a := range e.args {
			n += int64(len(a))
		}
	}
	return n
}

// checkExecReply refuses a transaction whose reply would pass the
// client's output buffer hard limit, with what is already pending for
// it, before any of it runs: once its writes are applied, a client closed
// for the size of their reply could not tell that they were.
func (tx *txState) checkExecReply(c *Conn, q []queued) error {
	hard := c.srv.outLimits.Load().Normal.Hard
	if hard <= 0 {
		return nil
	}
	est := execReplyEstimate(c, q)
	pending := int64(len(c.out))
	if c.lp.gc != nil {
		pending += int64(c.lp.gc.OutboundBuffered())
	}
	if est+pending > hard {
		return &txReplyError{estimate: est, hard: hard}
	}
	return nil
}

// queueRoute is the cluster check of a command being queued, on its own
// keys (as Redis Cluster checks each queued command): CROSSSLOT, or MOVED
// for a slot this group does not serve (cluster.Check in Queue mode).
// Migrating slots are decided at EXEC.
func queueRoute(c *Conn, cmd *Command, args [][]byte, asking bool) error {
	cl := c.srv.cfg.Cluster
	if cl == nil {
		return nil
	}
	r := cl.Routing()
	if r == nil || !r.Sharded {
		return nil
	}
	c.keys = commandKeys(c.keys[:0], cmd, args)
	defer clear(c.keys)
	_, err := c.check(r, &cluster.Query{Keys: c.keys, Mode: cluster.Queue, Asking: asking, OneSlot: true})
	return err
}

// execRoute is the cluster check of a whole transaction at EXEC: every key
// of every queued command in one slot that this group serves (Redis
// Cluster answers EXEC itself with CROSSSLOT, MOVED, ASK or TRYAGAIN, and
// discards the transaction), decided by cluster.Check in Read mode. A
// MIGRATE between this check and the write is still caught, per op, by
// the group's state machine.
func execRoute(c *Conn, q []queued, asking bool) error {
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
		c.keys = commandKeys(c.keys, q[i].cmd, q[i].args)
		asking = asking || q[i].asking
	}
	_, err := c.check(r, &cluster.Query{Keys: c.keys, Mode: cluster.Read, Asking: asking, OneSlot: true})
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
	q := tx.cmds
	defer tx.resetTx(c)
	if tx.failed {
		return errExecAbort
	}
	if err := execRoute(c, q, asking); err != nil {
		return err
	}
	if err := tx.checkExecReply(c, q); err != nil {
		return err
	}
	if asking {
		// ASKING right before EXEC covers the whole transaction.
		for i := range q {
			q[i].asking = true
		}
	}
	exec := c.cur
	c.WriteArray(len(q))
	firstWrite, firstSlots := -1, -1
	for i := range q {
		if q[i].cmd.Prepare != nil && firstWrite < 0 {
			firstWrite = i
		}
		if q[i].cmd.slotChange != nil && firstSlots < 0 && c.srv.cfg.Cluster != nil {
			firstSlots = i
		}
	}
	// The writes' slots, indexed by position in q (op -1: not a write).
	c.wb.slots = c.wb.slots[:0]
	var werr error
	nops, w := 0, 0
	slotReplies := map[int]error(nil)
	t0 := time.Now()
	for i := range q {
		e := &q[i]
		if i == firstWrite {
			for k := range q {
				if q[k].cmd.Prepare != nil {
					c.wb.slots = append(c.wb.slots, slot{pos: k, cmd: q[k].cmd, args: q[k].args, asking: q[k].asking})
				}
			}
			nops, werr = c.wb.submitWrites(c, c.wb.slots, true)
		}
		if i == firstSlots {
			slotReplies = execSlots(c, q)
		}
		switch {
		case e.cmd.Prepare != nil:
			// The writes are in c.wb.slots in queue order.
			for w < len(c.wb.slots) && c.wb.slots[w].pos < i {
				w++
			}
			c.wb.finishWrite(c, &c.wb.slots[w], werr)
		case slotReplies != nil && e.cmd.slotChange != nil:
			c.setCurrent(e.cmd)
			if err := slotReplies[i]; err != nil {
				c.fail(e.cmd, err)
			} else {
				c.WriteOK()
			}
		default:
			c.setCurrent(e.cmd)
			err := c.routeCommand(e.cmd, e.args, e.asking, nil)
			if err == nil {
				err = e.cmd.Handler(c, e.args)
			}
			if err != nil {
				c.fail(e.cmd, err)
			}
			c.asking = false // a queued ASKING applies through e.asking only
		}
		t0 = c.acct.account(c, e.cmd, e.args, t0)
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
		if q[i].cmd.slotChange == nil {
			continue
		}
		sc, err := q[i].cmd.slotChange(q[i].args)
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
		case errs[k] != nil:
			e := errs[k]
			if changes[k].Kind == cluster.SlotSet {
				e = unknownNode(e, changes[k].NodeID)
			}
			out[i] = e
		}
	}
	return out
}

func multiHandler(c *Conn, _ [][]byte) error {
	if c.tx.on {
		return errNestedMulti
	}
	c.tx.resetTx(c)
	c.tx.on = true
	c.tx.publishTx(c)
	c.WriteOK()
	return nil
}

func execHandler(c *Conn, _ [][]byte) error {
	if !c.tx.on {
		return errExecNoMulti
	}
	return c.tx.execTx(c, c.cmdAsking)
}

func discardHandler(c *Conn, _ [][]byte) error {
	if !c.tx.on {
		return errDiscardNo
	}
	c.tx.resetTx(c)
	c.WriteOK()
	return nil
}

func watchHandler(c *Conn, _ [][]byte) error {
	if c.tx.on {
		return errWatchInMulti
	}
	return errWatch
}

func unwatchHandler(c *Conn, _ [][]byte) error {
	c.WriteOK()
	return nil
}
