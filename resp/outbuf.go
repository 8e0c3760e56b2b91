package resp

import (
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// Output buffer limit (client-output-buffer-limit): why back-pressure
// bounds most of what a goroutine connection holds, and what the limit's
// hard and soft parts add, is DESIGN.md's "Output buffers and
// back-pressure". The bytes counted are those the server holds and the
// kernel has not yet accepted (CLIENT LIST's omem), as Redis counts its
// reply buffers; the setting's syntax is internal/outlimit's.

// errOutputLimit ends a connection closed by client-output-buffer-limit.
var errOutputLimit = errors.New("output buffer limit reached")

// writeChunk is the most one write hands the kernel while more than the
// soft limit is pending, so that the soft limit's clock restarts as soon as
// the client has drained below it.
const writeChunk = 256 << 10

// output is a connection's state under client-output-buffer-limit: omem
// is the bytes pending for the client (CLIENT LIST), softSince when they
// passed the soft limit, writeDeadline the write deadline set, outLimited
// that the client is being closed for its output; loopSoft is set while a
// loop connection has more than the soft limit pending (checkLoopOutput).
type output struct {
	omem          atomic.Int64
	softSince     time.Time
	writeDeadline time.Time
	outLimited    bool
	loopSoft      atomic.Bool
}

// outputOver reports whether the client must be closed because pending
// bytes (its unwritten replies plus extra, a reply being built aside) pass
// the hard limit. The first time, it logs, counts, drops the pending
// replies and marks the connection to close after the command: handlers
// building a large reply call it as they go and stop when it is true.
func (o *output) outputOver(c *Conn, extra int) bool {
	if o.outLimited {
		return true
	}
	hard := c.srv.outLimits.Load().Normal.Hard
	if hard <= 0 {
		return false
	}
	n := int64(len(c.out) + extra)
	if n <= hard && c.lp.gc != nil {
		n += int64(c.lp.gc.OutboundBuffered())
	}
	if n <= hard {
		return false
	}
	o.closeForOutput(c, "hard", n)
	return true
}

// closeForOutput marks the client closed by the output buffer limit.
func (o *output) closeForOutput(c *Conn, which string, pending int64) {
	o.outLimited = true
	c.quit = true
	c.out = c.out[:0]
	o.omem.Store(0)
	c.srv.stats.OutputLimited.Add(1)
	l := c.srv.outLimits.Load().Normal
	c.srv.log.Warn("closing client that reached its output buffer limit", "client", c.addr, "limit", which,
		"pending", pending, "hard", l.Hard, "soft", l.Soft, "soft_seconds", l.SoftSeconds)
}

// flush writes the pending replies (writeOut), and publishes the
// connection's memory before (a client that does not read holds its
// replies while the write waits) and after (clientmem.go).
func (o *output) flush(c *Conn) error {
	c.cmem.trackMem(c)
	err := o.writeOut(c)
	c.cmem.trackMem(c)
	return err
}

// writeOut writes the pending replies. While more than the soft limit is
// pending, it writes in chunks under a deadline at the instant the soft
// limit's time runs out (counted from when the pending bytes first passed
// it), so a client that does not drain them in time is closed; below the
// soft limit a write may block as long as the client does not read
// (back-pressure: the connection reads no more commands meanwhile).
func (o *output) writeOut(c *Conn) error {
	if o.outLimited {
		return errOutputLimit
	}
	if len(c.out) == 0 {
		return nil
	}
	if o.outputOver(c, 0) {
		return errOutputLimit
	}
	if c.lp.gc != nil {
		return o.flushLoop(c)
	}
	l := c.srv.outLimits.Load().Normal
	out := c.out
	var err error
	for len(out) > 0 && err == nil {
		o.omem.Store(int64(len(out)))
		chunk := len(out)
		dl := l.SoftDeadline(int64(len(out)), &o.softSince, time.Now())
		if !dl.IsZero() {
			chunk = min(chunk, writeChunk)
		}
		if !dl.Equal(o.writeDeadline) {
			_ = c.nc.SetWriteDeadline(dl)
			o.writeDeadline = dl
		}
		var n int
		n, err = c.nc.Write(out[:chunk])
		out = out[n:]
	}
	if err == nil {
		o.softSince = time.Time{}
	} else {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && !o.writeDeadline.IsZero() {
			o.closeForOutput(c, "soft", int64(len(out)))
			err = errOutputLimit
		}
	}
	o.omem.Store(0)
	c.resetOut()
	return err
}

// flushLoop is flush on an event loop: gnet writes what the socket takes
// and keeps the rest, sending it as the socket drains, so nothing blocks
// and nothing back-pressures the client; the limits bound what gnet keeps.
// As in Redis, they are checked when replies are added: the hard limit at
// once, the soft limit against the time the pending bytes first passed it.
func (o *output) flushLoop(c *Conn) error {
	_, err := c.lp.gc.Write(c.out)
	c.resetOut()
	if err != nil {
		return err
	}
	return o.checkLoopOutput(c)
}

// checkLoopOutput compares what gnet keeps for a loop connection with the
// limits. While more than the soft limit is pending, loopSoft is set and
// the sweeper wakes the connection to check again, so that a client that
// stops reading and sending is still closed when the soft time runs out.
func (o *output) checkLoopOutput(c *Conn) error {
	pending := int64(c.lp.gc.OutboundBuffered())
	o.omem.Store(pending)
	which, over := c.srv.outLimits.Load().Normal.Check(pending, &o.softSince, time.Now())
	o.loopSoft.Store(over)
	if which != "" {
		o.closeForOutput(c, which, pending)
		return errOutputLimit
	}
	return nil
}

// resetOut empties the reply buffer after a write, dropping one that a
// large reply grew past 1 MiB.
func (c *Reply) resetOut() {
	if cap(c.out) > 1<<20 {
		c.out = nil
	} else {
		c.out = c.out[:0]
	}
}
