package resp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// Event loops (DESIGN.md, "Event loops"): Serve accepts a plaintext TCP
// connection as any other, then hands it to one of Config.EventLoops gnet
// loops, which runs its batches on the loop goroutine. A loop must never
// wait, so a server with a Cluster (its writes wait on raft commits) and
// TLS connections keep a goroutine per connection.

// loopBatch bounds the commands of one batch on a loop, so that a deep
// pipeline of slow commands (KEYS) reaches the time check between batches
// soon; a redis-benchmark P16 pipeline still fits in one.
const loopBatch = 32

// loopSlice is how long one connection's event may run batches before it
// lets the loop's other connections have their turn.
const loopSlice = 2 * time.Millisecond

// errWouldBlock is the loop reader's "nothing more has arrived": the reader
// keeps its partial command and the loop waits for the next event.
var errWouldBlock = errors.New("resp: no more input")

// loops runs connections on gnet event loops.
type loops struct {
	gnet.BuiltinEventEngine
	srv *Server
	cli *gnet.Client
}

// startLoops starts n event loops for s.
func startLoops(s *Server, n int) (*loops, error) {
	l := &loops{srv: s}
	cli, err := gnet.NewClient(l,
		gnet.WithMulticore(true),
		gnet.WithNumEventLoop(n),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(gnetLogger{s.log}),
	)
	if err != nil {
		return nil, fmt.Errorf("resp: event loops: %w", err)
	}
	if err := cli.Start(); err != nil {
		return nil, fmt.Errorf("resp: start event loops: %w", err)
	}
	l.cli = cli
	return l, nil
}

// enroll moves nc onto a loop (gnet duplicates its descriptor and closes
// nc). The caller has counted c in s.wg; OnClose releases it.
func (l *loops) enroll(c *Conn, nc net.Conn) error {
	gc, err := l.cli.EnrollContext(nc, c)
	if err != nil {
		return err
	}
	// EnrollContext returns once the loop has opened the connection, or
	// failed to register it (gnet then returns no error, but OnOpen never
	// ran and OnClose never will).
	if c.lp.loop.Load() == nil {
		return errors.New("the event loop could not register the connection")
	}
	// closeNow stores closing, then loads loop; OnOpen stored loop before
	// this loads closing: one of the two sees the other and closes gc.
	if c.closing.Load() {
		_ = gc.Close()
	}
	return nil
}

// stop closes every loop connection and stops the loops.
func (l *loops) stop() {
	if err := l.cli.Stop(); err != nil {
		l.srv.log.Debug("stopping event loops", "err", err)
	}
}

// OnOpen runs on the connection's loop before any of its traffic.
func (l *loops) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	c := gc.Context().(*Conn)
	c.lp.gc = gc
	c.lp.loop.Store(&loopConn{gc})
	c.rd.rd = loopInput{gc}
	c.rd.beforeRead = nil
	c.rd.maxBatch = loopBatch
	if c.rs.queryDeadline || c.rd.w > c.rd.r {
		// Moved from its goroutine with input already read: run it now
		// rather than at the next arrival.
		c.rs.queryDeadline = false
		_ = gc.Wake(nil)
	}
	return nil, gnet.None
}

// OnTraffic runs a connection's complete commands.
func (l *loops) OnTraffic(gc gnet.Conn) gnet.Action {
	c := gc.Context().(*Conn)
	if c.lp.onTraffic(c) {
		return gnet.Close
	}
	return gnet.None
}

// OnClose runs once per connection, whoever closed it.
func (l *loops) OnClose(gc gnet.Conn, _ error) gnet.Action {
	c := gc.Context().(*Conn)
	c.srv.removeConn(c)
	return gnet.None
}

// loopState is a connection's event loop: gc is its handle, for the loop
// goroutine (nil for a connection served by its own goroutine); loop holds
// the same for other goroutines (nil until the loop has opened the
// connection); partialSince is when the connection started the command it
// has not finished (Unix ns; 0: none), for the query timeout.
type loopState struct {
	gc           gnet.Conn
	loop         atomic.Pointer[loopConn]
	partialSince atomic.Int64
}

// loopConn is a connection's loop handle as other goroutines see it.
type loopConn struct{ gc gnet.Conn }

// loopInput is the reader's input on a loop: what gnet has buffered for the
// connection, then errWouldBlock.
type loopInput struct{ gc gnet.Conn }

func (in loopInput) Read(p []byte) (int, error) {
	n, _ := in.gc.Read(p)
	if n == 0 {
		return 0, errWouldBlock
	}
	return n, nil
}

// onTraffic parses and runs every complete command received so far and
// writes their replies; it reports whether the connection must close.
func (l *loopState) onTraffic(c *Conn) (closing bool) {
	s := c.srv
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic serving client; connection closed", "client", c.addr, "panic", r, "stack", string(debug.Stack()))
			closing = true
		}
	}()
	if in := l.gc.InboundBuffered(); in > int(s.queryLimit.Load()) {
		// What gnet holds beyond the reader (a connection that yielded
		// while its client kept sending) counts against the same limit.
		s.stats.QueryLimited.Add(1)
		s.log.Warn("closing client that reached max query buffer length", "client", c.addr, "limit", s.queryLimit.Load())
		return true
	}
	if prev := c.ob.omem.Load(); prev > 0 || c.ob.loopSoft.Load() {
		if c.ob.checkLoopOutput(c) != nil {
			return true
		}
		if c.ob.omem.Load() < prev {
			// Draining its replies counts as activity (idle timeout).
			c.lastSeen.Store(time.Now().UnixNano())
		}
	}
	if c.wt.due != 0 {
		// A request of this connection waits for its turn (wait.go).
		waiting, closing := c.wt.resumeLoop(c)
		if closing || waiting {
			return closing
		}
	}
	start := time.Now()
	for {
		if s.draining.Load() || c.closing.Load() {
			return true
		}
		if time.Since(start) > loopSlice {
			// A long pipeline of slow commands (KEYS) yields to the
			// loop's other connections; its next event continues it.
			_ = l.gc.Wake(nil)
			return c.ob.flush(c) != nil
		}
		c.refreshLimits()
		cmds, err := c.rd.next()
		if errors.Is(err, errWouldBlock) {
			l.markPartial(c.rd.w > c.rd.r)
			return c.ob.flush(c) != nil
		}
		if err != nil {
			c.rs.readFailed(c, err)
			return true
		}
		l.markPartial(false)
		c.now = 0
		c.execBatch(cmds) // flushes on its own past flushAt
		if c.quit {
			_ = c.ob.flush(c)
			return true
		}
		if c.wt.due != 0 {
			return c.ob.flush(c) != nil // resumed at its turn
		}
	}
}

// markPartial records when the client started a command it has not
// finished (for the query timeout, which loops enforce in sweepLoopConns).
func (l *loopState) markPartial(partial bool) {
	switch {
	case !partial:
		if l.partialSince.Load() != 0 {
			l.partialSince.Store(0)
		}
	case l.partialSince.Load() == 0:
		l.partialSince.Store(time.Now().UnixNano())
	}
}

// sweepLoopConns closes loop connections past the idle timeout or the query
// timeout, as the goroutine path's read deadlines do, ten times a second
// (Redis's clientsCron checks timeouts at a similar pace).
func (s *Server) sweepLoopConns() {
	defer s.bg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now().UnixNano()
		idle, query := s.timeout.Load(), s.queryTime.Load()
		s.mu.Lock()
		for c := range s.conns {
			lc := c.lp.loop.Load()
			if lc == nil {
				continue
			}
			switch p := c.lp.partialSince.Load(); {
			case query > 0 && p != 0 && now-p > query:
				s.stats.QueryTimeouts.Add(1)
				s.log.Info("closing client that did not finish its command in time", "client", c.addr, "timeout", time.Duration(query))
				_ = lc.gc.Close()
			case idle > 0 && now-c.lastSeen.Load() > idle && c.ob.omem.Load() == 0 && !c.wt.waitingNow.Load():
				_ = lc.gc.Close()
			case c.ob.loopSoft.Load(), c.ob.omem.Load() > 0:
				// Replies pending: the connection checks the output limits
				// and whether its client is still draining them, and
				// publishes what gnet still keeps (maxmemory-clients).
				_ = lc.gc.Wake(nil)
			}
		}
		s.mu.Unlock()
	}
}

// gnetLogger sends gnet's log lines to the server's logger.
type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) Debugf(format string, args ...any) { g.l.Debug(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Infof(format string, args ...any)  { g.l.Debug(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Warnf(format string, args ...any)  { g.l.Warn(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Errorf(format string, args ...any) { g.l.Error(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Fatalf(format string, args ...any) { g.l.Error(fmt.Sprintf(format, args...)) }
