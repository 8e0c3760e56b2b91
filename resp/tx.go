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
func (c *Conn) resetTx() {
	clear(c.tx.cmds)
	cmds := c.tx.cmds[:0]
	if cap(cmds) > 1024 {
		cmds = nil
	}
	c.tx = txState{cmds: cmds}
	c.publishTx()
}

// publishTx mirrors the transaction's size for CLIENT LIST, and counts
// it in the client's memory (maxmemory-clients, clientmem.go).
func (c *Conn) publishTx() {
	defer c.trackMem()
	if !c.tx.on {
		c.multi.Store(-1)
		c.multiMem.Store(0)
		return
	}
	c.multi.Store(int64(len(c.tx.cmds)))
	c.multiMem.Store(c.tx.bytes)
}

// queue answers a command sent inside MULTI: QUEUED, or the refusal that
// makes EXEC answer EXECABORT (Redis's queue-time errors).
func (c *Conn) queue(cmd *Command, args [][]byte) {
	asking := c.tx.asking
	c.tx.asking = false
	refuse := func(err error) {
		c.tx.failed = true
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
	if err := c.queueRoute(cmd, args, asking); err != nil {
		refuse(err)
		return
	}
	if c.tx.over {
		c.WriteSimple("QUEUED")
		return
	}
	size, argBytes := queuedSize(args)
	if err := c.txBound(size, argBytes); err != nil {
		// Let go of the queue now: the transaction can only abort.
		clear(c.tx.cmds)
		c.tx.cmds = nil
		c.tx.bytes = 0
		c.tx.over = true
		c.publishTx()
		refuse(err)
		return
	}
	write, access := txAccess(cmd)
	switch {
	case write && c.tx.readAfter:
		refuse(errTxReadBetween)
		return
	case write:
		c.tx.wrote = true
	case access && c.tx.wrote:
		c.tx.readAfter = true
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
	c.tx.bytes += size
	c.tx.argBytes += argBytes
	c.tx.cmds = append(c.tx.cmds, queued{cmd: cmd, args: cp, asking: asking})
	c.tx.asking = cmd.fullName == "asking"
	c.publishTx()
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
func (c *Conn) txBound(size, argBytes int64) error {
	if n := c.srv.txMaxCmds.Load(); int64(len(c.tx.cmds)) >= n {
		return &txLimitError{setting: "transaction-max-commands", limit: n, unit: "commands"}
	}
	if n := c.srv.txMaxBytes.Load(); c.tx.argBytes+argBytes > n {
		return &txLimitError{setting: "transaction-max-bytes", limit: n, unit: "bytes"}
	}
	if n := c.srv.queryLimit.Load(); c.tx.bytes+size > n {
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
func (c *Conn) execReplyEstimate(q []queued) int64 {
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
func (c *Conn) checkExecReply(q []queued) error {
	hard := c.srv.outLimits.Load().Normal.Hard
	if hard <= 0 {
		return nil
	}
	est := c.execReplyEstimate(q)
	pending := int64(len(c.out))
	if c.gc != nil {
		pending += int64(c.gc.OutboundBuffered())
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
func (c *Conn) queueRoute(cmd *Command, args [][]byte, asking bool) error {
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
func (c *Conn) execRoute(q []queued, asking bool) error {
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
func (c *Conn) execTx(asking bool) error {
	q := c.tx.cmds
	defer c.resetTx()
	if c.tx.failed {
		return errExecAbort
	}
	if err := c.execRoute(q, asking); err != nil {
		return err
	}
	if err := c.checkExecReply(q); err != nil {
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
	c.slots = c.slots[:0]
	var werr error
	nops, w := 0, 0
	slotReplies := map[int]error(nil)
	t0 := time.Now()
	for i := range q {
		e := &q[i]
		if i == firstWrite {
			for k := range q {
				if q[k].cmd.Prepare != nil {
					c.slots = append(c.slots, slot{pos: k, cmd: q[k].cmd, args: q[k].args, asking: q[k].asking})
				}
			}
			nops, werr = c.submitWrites(c.slots, true)
		}
		if i == firstSlots {
			slotReplies = c.execSlots(q)
		}
		switch {
		case e.cmd.Prepare != nil:
			// The writes are in c.slots in queue order.
			for w < len(c.slots) && c.slots[w].pos < i {
				w++
			}
			c.finishWrite(&c.slots[w], werr)
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
		t0 = c.account(e.cmd, e.args, t0)
	}
	c.releaseOps(nops)
	c.slots = c.slots[:0]
	c.setCurrent(exec)
	return nil
}

// execSlots makes the slot changes queued in q as one Cluster.ChangeSlots
// call, and returns each one's answer by its position in q (nil: done).
func (c *Conn) execSlots(q []queued) map[int]error {
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

// transactionCommands are MULTI, EXEC, DISCARD, WATCH and UNWATCH.
func transactionCommands() []*Command {
	const flags = FlagNoScript | FlagLoading | FlagStale | FlagFast
	return []*Command{
		{
			Name: "multi", Arity: 1, Flags: flags, Group: "transactions", Since: "0.1.0",
			Summary: "Starts a transaction.", Complexity: "O(1)",
			Reply: "Simple string `OK`. Until `EXEC` or `DISCARD`, every command but `EXEC`, `DISCARD`, `MULTI`, `WATCH` and `QUIT` is queued and answered `+QUEUED`, or refused at once " +
				"(unknown command, wrong number of arguments, a command not allowed in a transaction, in a cluster `CROSSSLOT` or `MOVED` for its own keys, the queue over `transaction-max-commands` or `transaction-max-bytes`); a refusal makes `EXEC` answer `EXECABORT`.",
			Errors: []string{"`ERR MULTI calls can not be nested` inside a transaction (the transaction goes on)."},
			Notes: []string{
				"A transaction's keyspace writes (the limiter commands, `DEL`, `RESTORE`, `FLUSHALL`, `FLUSHDB`) are applied as one step: no other client's write lands between them, and in a replication group they are one log entry, so a failover applies all of them or none.",
				"Commands that read the keyspace (`GET`, `TTL`, `EXISTS`, …) see the writes queued before them and none queued after: they may come before the first write or after the last one. A write queued after such a read that itself follows a write is refused at queue time (`ERR … reads the keyspace between two writes …`) and the transaction aborts. Reads before the first write are not isolated from other clients' writes made before the transaction's write.",
				"Queued `CLUSTER ADDSLOTS`, `DELSLOTS`, `ADDSLOTSRANGE`, `DELSLOTSRANGE` and `SETSLOT` are one change of the group's log, applied when the first of them is reached: each is checked against the slot state as the ones before it leave it; a refused one answers its error in its place and changes nothing, the others apply.",
				"Other commands (`CONFIG SET`, `CLIENT …`, `MIGRATE`, …) run at `EXEC`, each on its own, in order; one queued between two writes runs after the writes' step.",
				"Size: a transaction queues at most `transaction-max-commands` commands (default 10000) and `transaction-max-bytes` bytes of arguments (default 1mb, about the size of its log entry); its queue's memory (argument bytes, plus 24 bytes an argument and 64 a command) also counts against `client-query-buffer-limit`. The command past a bound is answered `ERR transaction discarded: more than <n> commands queued (transaction-max-commands); …` (or `… bytes queued (transaction-max-bytes)`, `(client-query-buffer-limit)`), the queue is dropped at once, later commands are answered `QUEUED` without being kept, and `EXEC` answers `EXECABORT`. The bounds keep the transaction's one log entry small enough that other clients' writes are not held up for long while it commits (docs/performance.md, \"The largest transaction\").",
			},
			Handler: func(c *Conn, _ [][]byte) error {
				if c.tx.on {
					return errNestedMulti
				}
				c.resetTx()
				c.tx.on = true
				c.publishTx()
				c.WriteOK()
				return nil
			},
		},
		{
			Name: "exec", Arity: 1, Flags: FlagNoScript | FlagLoading | FlagStale, Group: "transactions", Since: "0.1.0",
			Summary: "Runs the commands queued since MULTI.", Complexity: "Depends on the queued commands",
			Reply: "Array: the reply of each queued command, in order. A command that fails when it runs answers its error in its place; the others still run (as Redis).",
			Errors: []string{"`ERR EXEC without MULTI`.",
				"`EXECABORT Transaction discarded because of previous errors.` when a command was refused while queuing; nothing runs.",
				"`ERR transaction discarded: its reply would be about <n> bytes, over client-output-buffer-limit's hard limit of <hard> bytes; nothing was run: …` when the replies of the queued commands, estimated before anything runs (each key of a limiter write counts 142 bytes, the most a decision takes; another command 32 bytes plus its arguments' bytes), and the replies already pending for the client would pass the hard limit: the transaction is discarded rather than applied and its client closed.",
				"In a cluster, `CROSSSLOT Keys in request don't hash to the same slot` when the queued commands' keys are in several slots, `MOVED <slot> <host>:<port>` when their slot is served by another group, and for a slot migrating out `ASK <slot> <host>:<port>` when none of the keys is here any more, `TRYAGAIN …` when some are and some are not (or are in flight); nothing runs."},
			Handler: func(c *Conn, _ [][]byte) error {
				if !c.tx.on {
					return errExecNoMulti
				}
				return c.execTx(c.cmdAsking)
			},
		},
		{
			Name: "discard", Arity: 1, Flags: flags, Group: "transactions", Since: "0.1.0",
			Summary: "Discards the commands queued since MULTI.", Complexity: "O(N) where N is the number of queued commands",
			Reply:  "Simple string `OK`. Nothing queued runs.",
			Errors: []string{"`ERR DISCARD without MULTI`."},
			Handler: func(c *Conn, _ [][]byte) error {
				if !c.tx.on {
					return errDiscardNo
				}
				c.resetTx()
				c.WriteOK()
				return nil
			},
		},
		{
			Name: "watch", Arity: -2, Flags: flags, FirstKey: 1, LastKey: -1, KeyStep: 1, Group: "transactions", Since: "0.1.0",
			Summary: "Not supported: answers an error.", Complexity: "O(1)",
			Args:  []Arg{{Name: "key", Type: "key", Multiple: true}},
			Reply: "Never succeeds.",
			Errors: []string{"`ERR WATCH is not supported: a transaction's writes are applied as one atomic step; use CL.THROTTLEALL or one transaction instead of check-and-set` outside a transaction.",
				"`ERR WATCH inside MULTI is not allowed` inside one (the transaction goes on)."},
			Handler: func(c *Conn, _ [][]byte) error {
				if c.tx.on {
					return errWatchInMulti
				}
				return errWatch
			},
		},
		{
			Name: "unwatch", Arity: 1, Flags: flags, Group: "transactions", Since: "0.1.0",
			Summary: "Forgets watched keys (there never are any: WATCH is not supported).", Complexity: "O(1)",
			Reply: "Simple string `OK`.",
			Handler: func(c *Conn, _ [][]byte) error {
				c.WriteOK()
				return nil
			},
		},
	}
}
