package resp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/serverstats"
	"github.com/cellserver/cellserver/shards"
)

// flushAt is the reply size at which a batch's replies are written out
// before the batch ends, so that a large reply never waits whole in memory.
const flushAt = 64 << 10

// Conn is one client connection. Its handlers run on the connection's own
// goroutine, one command at a time; only the fields under mu and the atomics
// are read by other goroutines (CLIENT LIST, INFO).
type Conn struct {
	srv *Server
	nc  net.Conn
	rd  *reader
	Reply
	id    int64
	addr  string
	laddr string
	start int64 // Unix ns

	quit bool // close after this batch (QUIT, SHUTDOWN)

	// now caches the read instant of the batch (0: not read yet); writes
	// invalidate it.
	now int64

	// Scratch reused by every batch so that the hot path does not allocate.
	wb    writeBatch // the run of writes being submitted
	tmp   []byte
	keys  [][]byte // a command's keys, for the cluster routing check
	wkeys wireKeys // the keyspace as the cluster routing check reads it

	// asking is set by ASKING and cleared by the next command (route.go);
	// cmdAsking is whether the command running now follows ASKING.
	asking, cmdAsking bool

	// tx is the transaction between MULTI and EXEC or DISCARD (tx.go);
	// multi (-1 outside one, else the commands queued) and multiMem (the
	// bytes they account for) mirror it for CLIENT LIST.
	tx       txState
	multi    atomic.Int64
	multiMem atomic.Int64

	// rcache is resolve's cache.
	rcache resolver

	cur      *Command // the command running now
	lastCmd  atomic.Pointer[Command]
	lastSeen atomic.Int64 // Unix ns of the last batch

	// rs is the read side's limits (the query timeout's deadline).
	rs readState

	// ob is the output buffer limit's state (outbuf.go).
	ob output

	// lp is the connection's event loop (loop.go); zero for a connection
	// served by its own goroutine.
	lp loopState
	// closing is set by closeNow, so that a connection killed while it
	// moves onto its loop is closed there.
	closing atomic.Bool
	// cmem is the memory the connection accounts for (clientmem.go).
	cmem clientMem

	// auth is the connection's authentication (authguard.go).
	auth authState

	// acct is the connection's accounting of its commands (stats.go).
	acct tally

	// wt is the connection's request waiting for its turn (WAIT, wait.go).
	wt connWait
	// ccw is the connection's acquire waiting in a line (CC.ACQUIRE …
	// WAIT, ccwait.go).
	ccw ccWait

	mu       sync.Mutex // guards the fields below
	name     string
	libName  string
	libVer   string
	pubProto int
}

// writeBatch is the scratch of a connection's run of writes, reused by
// every batch so that the hot path does not allocate: the run's commands
// (slots) and the ops they prepared, with their results.
type writeBatch struct {
	ops   []shards.Op
	res   []shards.Result
	slots []slot
}

// slot is one command of a batch of writes.
type slot struct {
	pos  int // position in a transaction (tx.go)
	cmd  *Command
	args [][]byte
	err  error
	op   int // index into ops/res, -1 when Prepare failed
	// asking: the command follows ASKING (cluster routing, route.go).
	asking bool
}

func newConn(s *Server, nc net.Conn) *Conn {
	c := &Conn{
		srv:   s,
		nc:    nc,
		id:    s.nextID.Add(1),
		addr:  nc.RemoteAddr().String(),
		laddr: nc.LocalAddr().String(),
		start: s.now(),
		Reply: Reply{proto: 2},
		acct:  tally{stats: make([]serverstats.Counters, len(s.table.all))},
	}
	c.auth.authed = *s.requirePass.Load() == ""
	c.multi.Store(-1)
	c.pubProto = 2
	c.rd = newReader(nc, s.cfg.MaxBulkLen, s.cfg.MaxArgs)
	c.rd.beforeRead = func(partial bool) { c.rs.beforeRead(c, partial) }
	c.lastSeen.Store(c.start)
	return c
}

// loopable reports whether c may run on an event loop: the server has
// loops, c is plaintext TCP (TLS keeps its goroutine) and authenticated.
func loopable(c *Conn) bool {
	_, tcp := c.nc.(*net.TCPConn)
	return tcp && c.auth.authed && c.srv.loops != nil
}

// serve reads batches of commands and answers them until the client leaves,
// a protocol error, the idle timeout, or the server's shutdown.
func (c *Conn) serve() {
	s := c.srv
	moved := false
	defer func() {
		if r := recover(); r != nil {
			// A bug must cost one connection, never the server.
			s.log.Error("panic serving client; connection closed", "client", c.addr, "panic", r, "stack", string(debug.Stack()))
		}
		if moved {
			return // the loop owns the connection now
		}
		c.nc.Close()
		s.removeConn(c)
	}()
	if c.refuseUnprotected() {
		return
	}
	for {
		if s.draining.Load() {
			return
		}
		if loopable(c) {
			// Plaintext (TLS keeps its goroutine) and authenticated, at
			// connect or by AUTH: the rest of the connection runs on a
			// loop. Failed AUTH waits and protected mode's refusal happen
			// here, never on a loop.
			if err := s.loops.enroll(c, c.nc); err != nil {
				s.log.Warn("cannot serve client on an event loop; connection closed", "client", c.addr, "err", err)
				return
			}
			moved = true
			return
		}
		if t := s.timeout.Load(); t > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(time.Duration(t)))
		} else if c.rs.queryDeadline {
			_ = c.nc.SetReadDeadline(time.Time{})
		}
		c.rs.queryDeadline = false
		c.refreshLimits()
		cmds, err := c.rd.next()
		if err != nil {
			c.rs.readFailed(c, err)
			return
		}
		c.now = 0
		c.execBatch(cmds)
		if err := c.ob.flush(c); err != nil || c.quit {
			return
		}
	}
}

// closeNow closes the connection's transport: whatever the connection is
// doing ends at its next read or write. Safe from any goroutine.
func (c *Conn) closeNow() {
	c.closing.Store(true)
	if lc := c.lp.loop.Load(); lc != nil {
		_ = lc.gc.Close()
		return
	}
	c.nc.Close()
}

// readState is the read side's state: queryDeadline is true while the
// read deadline is the query timeout's (the client has started a command
// and must finish it).
type readState struct {
	queryDeadline bool
}

// refreshLimits gives the reader the limits of this batch (they can change
// live).
func (c *Conn) refreshLimits() {
	s := c.srv
	c.rd.maxBulk = int(s.maxBulk.Load())
	c.rd.maxQuery = int(s.queryLimit.Load())
	c.rd.unauth = !c.auth.authed
}

// readFailed answers (a protocol error), counts and logs the reason a
// connection's input ended; the caller closes it.
func (r *readState) readFailed(c *Conn, err error) {
	s := c.srv
	var perr *protocolError
	switch {
	case errors.As(err, &perr):
		c.WriteError(err)
		_ = c.ob.flush(c)
		s.log.Debug("protocol error; client closed", "client", c.addr, "err", err)
	case errors.Is(err, errQueryLimit):
		s.stats.QueryLimited.Add(1)
		s.log.Warn("closing client that reached max query buffer length", "client", c.addr, "limit", c.rd.maxQuery)
	case errors.Is(err, os.ErrDeadlineExceeded) && r.queryDeadline && !s.draining.Load():
		s.stats.QueryTimeouts.Add(1)
		s.log.Info("closing client that did not finish its command in time", "client", c.addr, "timeout", time.Duration(s.queryTime.Load()))
	case !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, net.ErrClosed):
		s.log.Debug("read failed; client closed", "client", c.addr, "err", err)
	}
}

// beforeRead bounds the wait for the rest of a started command by the
// query timeout (once per batch: the deadline counts from the first wait),
// so that a client sending a command slowly cannot hold its connection and
// buffer forever. The idle timeout, when shorter, still applies.
func (r *readState) beforeRead(c *Conn, partial bool) {
	c.cmem.trackMem(c) // the query buffer may have grown for the rest
	if !partial || r.queryDeadline {
		return
	}
	qt := c.srv.queryTime.Load()
	if qt <= 0 {
		return
	}
	if t := c.srv.timeout.Load(); t > 0 && t < qt {
		return // the idle deadline set for this batch comes first
	}
	r.queryDeadline = true
	_ = c.nc.SetReadDeadline(time.Now().Add(time.Duration(qt)))
}

// execBatch runs the commands of one batch, in order. Consecutive batchable
// writes go to the backend in one Write call.
func (c *Conn) execBatch(cmds []span) {
	args := c.rd.args
	t0 := time.Now()
	c.lastSeen.Store(t0.UnixNano())
	for i := 0; i < len(cmds); {
		if c.closing.Load() {
			// Closed by CLIENT KILL or Close: the rest of a long batch is
			// not run (Shutdown lets batches finish; Close does not wait).
			c.quit = true
			return
		}
		a := args[cmds[i].lo:cmds[i].hi]
		asking := c.asking // ASKING applies to the next command only
		c.asking = false
		cmd, err := c.rcache.resolve(c.srv.table, a)
		if err == nil && !c.auth.authed && cmd.Flags&FlagNoAuth == 0 {
			err = ErrNoAuth
		}
		if c.tx.On && (err != nil || !runsInMulti(cmd)) {
			if err != nil {
				c.tx.Failed = true // Redis: EXEC answers EXECABORT
				c.reject(cmd, err)
			} else {
				c.tx.queue(c, cmd, a)
			}
			i++
			if c.ob.outputOver(c, 0) {
				return
			}
			continue
		}
		if err != nil {
			c.reject(cmd, err)
			i++
			continue
		}
		if cmd.Prepare == nil {
			c.setCurrent(cmd)
			c.cmdAsking = asking
			err := c.routeCommand(cmd, a, asking, nil)
			if err == nil {
				err = cmd.Handler(c, a)
			}
			if err != nil {
				c.fail(cmd, err)
			}
			t0 = c.acct.account(c, cmd, a, t0)
			i++
		} else {
			c.wb.slots = c.wb.slots[:0]
			c.wb.slots = append(c.wb.slots, slot{cmd: cmd, args: a, asking: asking})
			// A run ends after a command with WAIT: what follows it runs
			// once it has been answered (wait.go).
			for i++; i < len(cmds) && !hasWait(c.wb.slots[len(c.wb.slots)-1].cmd, c.wb.slots[len(c.wb.slots)-1].args); i++ {
				a := args[cmds[i].lo:cmds[i].hi]
				next, err := c.rcache.resolve(c.srv.table, a)
				if err != nil || next.Prepare == nil || (!c.auth.authed && next.Flags&FlagNoAuth == 0) {
					break
				}
				c.wb.slots = append(c.wb.slots, slot{cmd: next, args: a})
			}
			c.wb.runWrites(c, c.wb.slots)
			t0 = c.acct.accountSlots(c, c.wb.slots, t0)
			if c.wt.due != 0 {
				if c.lp.gc != nil {
					// On a loop: the rest waits for the turn (resumeLoop).
					c.wt.pending = cmds[i:]
					c.srv.waits.schedule(c.wt.due, c)
					return
				}
				if !c.wt.waitHere(c) {
					c.quit = true
					return
				}
				t0 = time.Now()
			}
		}
		if c.quit {
			return
		}
		if c.ob.outputOver(c, 0) {
			return
		}
		if len(c.out) > flushAt {
			if c.ob.flush(c) != nil {
				c.quit = true
				return
			}
		}
	}
}

// resolver is a connection's one-entry cache of command names: the name
// bytes of the last command without subcommands it named (nameCache), and
// that command (cmdCache).
type resolver struct {
	nameCache []byte
	cmdCache  *Command
}

// resolve is table.resolve with a one-entry cache of the last command
// without subcommands this connection named, in the exact bytes it sent:
// a client repeating one command (a pipeline of CL.THROTTLE) skips the
// table's case-folding map lookup. The table is sealed before the first
// connection, so the cached pointer stays valid.
func (r *resolver) resolve(t *table, args [][]byte) (*Command, error) {
	cmd := r.cmdCache
	if cmd == nil || !bytes.Equal(args[0], r.nameCache) {
		if cmd = t.lookup(args[0]); cmd == nil {
			return nil, &unknownCommandError{args: args}
		}
		if cmd.subs == nil {
			r.nameCache = append(r.nameCache[:0], args[0]...)
			r.cmdCache = cmd
		}
	}
	return resolveFrom(cmd, args)
}

// runWrites prepares the ops of a run of batchable writes, submits them in
// one Backend.Write, and appends every reply in order.
func (b *writeBatch) runWrites(c *Conn, slots []slot) {
	n, werr := b.submitWrites(c, slots, false)
	for k := range slots {
		mark := len(c.out)
		b.finishWrite(c, &slots[k], werr)
		if d := b.delayOf(&slots[k], werr); d > 0 {
			c.wt.hold(c, mark, d) // only the run's last command can wait
		}
	}
	c.ccw.settle(c) // an acquire that was to wait and failed leaves no trace
	b.releaseOps(c, n)
}

// submitWrites routes and prepares the ops of slots and submits those
// that prepared in one Backend call (WriteAtomic when atomic: a
// transaction's writes). It returns how many ops it used and the call's
// error; the replies are left to finishWrite.
func (b *writeBatch) submitWrites(c *Conn, slots []slot, atomic bool) (int, error) {
	n := 0
	for k := range slots {
		sl := &slots[k]
		if n == len(b.ops) {
			b.ops = append(b.ops, shards.Op{})
			b.res = append(b.res, shards.Result{})
		}
		op := &b.ops[n]
		op.Keys = op.Keys[:0]
		op.Reqs = op.Reqs[:0]
		op.NoGrow = false
		op.Asking = false
		op.Dest = ""
		if sl.err = c.routeCommand(sl.cmd, sl.args, sl.asking, op); sl.err != nil {
			sl.op = -1
			continue
		}
		if sl.err = sl.cmd.Prepare(c, sl.args, op); sl.err != nil {
			sl.op = -1
			continue
		}
		c.markNoGrow(op)
		sl.op = n
		n++
	}
	if n == 0 {
		return 0, nil
	}
	var werr error
	if atomic {
		werr = c.srv.backend.WriteAtomic(c.srv.ctx, b.ops[:n], b.res[:n])
	} else {
		werr = c.srv.backend.Write(c.srv.ctx, b.ops[:n], b.res[:n])
	}
	c.now = 0
	return n, werr
}

// finishWrite appends the reply of one write submitted by submitWrites
// (werr: the submitting call's error).
func (b *writeBatch) finishWrite(c *Conn, sl *slot, werr error) {
	c.setCurrent(sl.cmd)
	switch {
	case sl.op < 0:
		c.fail(sl.cmd, sl.err)
	case werr != nil:
		c.fail(sl.cmd, werr)
	case b.res[sl.op].Err != nil:
		c.fail(sl.cmd, c.redirect(b.res[sl.op].Err, b.ops[sl.op].Keys))
	default:
		sl.cmd.Finish(c, sl.args, &b.res[sl.op])
	}
}

// releaseOps drops the references of the first n ops to their keys (they
// live in the read buffer or a transaction's queue).
func (b *writeBatch) releaseOps(c *Conn, n int) {
	for k := 0; k < n; k++ {
		clear(b.ops[k].Keys)
	}
}

// readNow returns the instant reads of this batch evaluate expiry at,
// asking the backend once per batch (and again after a write).
func (c *Conn) readNow() (int64, error) {
	if c.now != 0 {
		return c.now, nil
	}
	now, err := c.srv.backend.ReadNow(c.srv.ctx)
	if err != nil {
		return 0, err
	}
	c.now = now
	return now, nil
}

func (c *Conn) setCurrent(cmd *Command) {
	c.cur = cmd
	if c.lastCmd.Load() != cmd {
		c.lastCmd.Store(cmd)
	}
}

// reject answers a command refused before it ran (unknown, arity, auth).
func (c *Conn) reject(cmd *Command, err error) {
	c.srv.stats.Errors.Add(1)
	if cmd != nil {
		c.acct.stats[cmd.index].Rejected.Add(1)
	}
	c.WriteError(err)
}

// fail answers a command that ran and failed.
func (c *Conn) fail(cmd *Command, err error) {
	if errors.Is(err, engine.ErrArity) {
		err = &arityError{cmd.fullName}
	}
	c.srv.stats.Errors.Add(1)
	c.acct.stats[cmd.index].Failed.Add(1)
	c.WriteError(err)
}

// account adds one call of cmd and the time since t0 (accountSlots); it
// returns the new t0.
func (t *tally) account(c *Conn, cmd *Command, args [][]byte, t0 time.Time) time.Time {
	one := [1]slot{{cmd: cmd, args: args}}
	return t.accountSlots(c, one[:], t0)
}

// accountSlots adds the calls of a run of commands and the time since t0,
// less what AUTH waited (authState.penalty), shared evenly among them: the
// counters, the latency histogram, and the slow log when slow enough. A
// run of one command (a pipeline of CL.THROTTLE) is counted with one update
// of each counter, not one per command. It returns the new t0.
func (t *tally) accountSlots(c *Conn, slots []slot, t0 time.Time) time.Time {
	t1 := time.Now()
	per := int64(t1.Sub(t0)-c.auth.penalty) / int64(len(slots))
	c.auth.penalty = 0
	t.flushClasses(c)
	if c.srv.slowlog.Slow(per) {
		for k := range slots {
			logSlow(c, slots[k].cmd, slots[k].args, per)
		}
	}
	for k := 0; k < len(slots); {
		cmd := slots[k].cmd
		n := 1
		for k+n < len(slots) && slots[k+n].cmd == cmd {
			n++
		}
		st := &t.stats[cmd.index]
		st.Calls.Add(int64(n))
		st.Nanos.Add(per * int64(n))
		c.srv.latency.ObserveN(cmd.index, c.id, per, n)
		k += n
	}
	return t1
}

// countDecision records a limiter decision of the current command.
func (t *tally) countDecision(c *Conn, limited bool) {
	if limited {
		t.stats[c.cur.index].Limited.Add(1)
	} else {
		t.stats[c.cur.index].Allowed.Add(1)
	}
}
