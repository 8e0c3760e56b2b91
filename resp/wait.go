package resp

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/internal/serverstats"
	"github.com/cellserver/cellserver/internal/timerheap"
)

// Waiting instead of refusing: a limiter request's trailing WAIT. The
// engine admits it at once as of its turn (engine/wait.go, Result.Delay);
// this file holds the connection and its rendered reply until that turn,
// with no goroutine per waiter: resp/DESIGN.md ("Waiting instead of
// refusing") tells how, and what a disconnection or a shutdown does.

// Defaults of max-wait and max-waiting.
const (
	DefaultMaxWait    = 10 * time.Second
	DefaultMaxWaiting = 100000
)

var (
	// errTooManyWaiting refuses a request with WAIT while max-waiting
	// requests wait on the server.
	errTooManyWaiting = errors.New("too many requests waiting (max-waiting)")
	// errWaitInMulti refuses a queued command with WAIT: a transaction's
	// writes are one step and its replies one array.
	errWaitInMulti = errors.New("WAIT inside MULTI")
)

// waiting is the server's side of WAIT: its settings, the requests waiting
// and the heap of turns of the connections on event loops.
type waiting struct {
	maxWait    atomic.Int64 // max-wait, ns
	maxWaiting atomic.Int64 // max-waiting
	count      atomic.Int64 // requests waiting now
	// done counts the requests that waited, their waits and how late
	// their replies were written.
	done serverstats.WaitCounters

	base time.Time // origin of the monotonic instants below

	mu   sync.Mutex
	due  timerheap.Heap[*Conn] // turns of the connections on loops
	kick chan struct{}         // a new earliest turn (capacity 1)
}

func (w *waiting) init(cfg Config) {
	w.maxWait.Store(int64(cfg.MaxWait))
	w.maxWaiting.Store(cfg.MaxWaiting)
	w.base = time.Now()
	w.kick = make(chan struct{}, 1)
	w.done.Init()
}

// mono is now on the monotonic clock, in ns since base.
func (w *waiting) mono() int64 { return int64(time.Since(w.base)) }

// admit caps a request's wait by max-wait, and refuses it while
// max-waiting requests wait. wait is the request's WAIT (ns, > 0).
func (w *waiting) admit(wait int64) (int64, error) {
	if n := w.maxWaiting.Load(); w.count.Load() >= n {
		return 0, errTooManyWaiting
	}
	return min(wait, w.maxWait.Load()), nil
}

// schedule wakes c's loop at at (mono ns).
func (w *waiting) schedule(at int64, c *Conn) {
	w.mu.Lock()
	first := w.due.Push(at, c)
	w.mu.Unlock()
	if first {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// run wakes the loop of each connection whose turn has come, until the
// server stops. One goroutine per server (started with the event loops).
func (w *waiting) run(s *Server) {
	defer s.bg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var ready []*Conn
	for {
		w.mu.Lock()
		now := w.mono()
		ready = w.due.PopDue(now, ready)
		next := time.Hour
		if at, ok := w.due.Next(); ok {
			next = time.Duration(at - now)
		}
		w.mu.Unlock()
		for i, c := range ready {
			if lc := c.lp.loop.Load(); lc != nil {
				_ = lc.gc.Wake(nil) // a closed connection refuses: nothing to send
			}
			ready[i] = nil
		}
		ready = ready[:0]
		t.Reset(next)
		select {
		case <-t.C:
		case <-w.kick:
		case <-s.ctx.Done():
			return
		}
	}
}

// hasWait reports whether a command of cmd with args ends with WAIT
// duration (the engine parses it; this only finds it, to end a run of
// pipelined writes there and to refuse it inside MULTI).
func hasWait(cmd *Command, args [][]byte) bool {
	n := len(args)
	return cmd.Waits && n >= 4 && bytes.EqualFold(args[n-2], []byte("wait"))
}

// connWait is a connection's waiting request (WAIT), touched by the
// connection's goroutine or loop only (waitingNow is read by the idle
// sweep too): held is the reply of a waiting request, due at due (the
// server's monotonic ns; 0: none waits), which started waiting at start;
// pending is the rest of its batch (loops); timer is the goroutine's
// reusable timer. waitingNow is set while the request is counted as
// waiting.
type connWait struct {
	held       []byte
	due        int64
	start      int64
	pending    []span
	timer      *time.Timer
	waitingNow atomic.Bool
}

// hold keeps the reply written since mark, of a request admitted after
// delay ns, for sending when its turn comes.
func (cw *connWait) hold(c *Conn, mark int, delay int64) {
	w := &c.srv.waits
	cw.held = append(cw.held[:0], c.out[mark:]...)
	c.out = c.out[:mark]
	cw.start = w.mono()
	cw.due = cw.start + delay
	cw.waitingNow.Store(true)
	w.count.Add(1)
}

// deliver appends the held reply to the output, its turn having come.
func (cw *connWait) deliver(c *Conn) {
	w := &c.srv.waits
	c.out = append(c.out, cw.held...)
	cw.held = cw.held[:0]
	now := w.mono()
	w.done.Observe(now-cw.start, max(now-cw.due, 0))
	cw.due = 0
	cw.unwait(c)
	c.lastSeen.Store(time.Now().UnixNano())
}

// unwait stops counting the connection's waiting request (delivered, or
// the connection closed); it may run twice.
func (cw *connWait) unwait(c *Conn) {
	if cw.waitingNow.Swap(false) {
		c.srv.waits.count.Add(-1)
	}
}

// waitHere waits on the connection's own goroutine until its held reply's
// turn, having sent the replies before it, then appends it. It reports
// false when the connection must close instead (a failed write, the
// server stopping).
func (cw *connWait) waitHere(c *Conn) bool {
	if c.ob.flush(c) != nil {
		cw.unwait(c)
		return false
	}
	for {
		// An acquire in a line (ccwait.go) wakes when granted, to ask
		// again, and at its deadline; any other waits for its turn.
		at := cw.due
		var wake chan struct{}
		if c.ccw.active() {
			if c.ccw.step(c, cw) {
				break
			}
			if c.ccw.retryAt != 0 {
				at = min(at, c.ccw.retryAt)
			}
			wake = c.ccw.wakeChan()
		}
		d := time.Duration(at - c.srv.waits.mono())
		if d <= 0 {
			if wake == nil {
				break
			}
			continue
		}
		if cw.timer == nil {
			cw.timer = time.NewTimer(d)
		} else {
			cw.timer.Reset(d)
		}
		select {
		case <-cw.timer.C:
		case <-wake:
			cw.timer.Stop()
		case <-c.srv.stopping:
			cw.timer.Stop()
			cw.unwait(c)
			return false
		}
		if wake == nil {
			break
		}
	}
	cw.deliver(c)
	return true
}

// resumeLoop runs on a loop connection's event while it waits: before its
// turn it does nothing (input stays buffered); at its turn it sends the
// held reply and runs the rest of the batch, which may wait again. It
// reports whether the connection still waits, and whether it must close.
func (cw *connWait) resumeLoop(c *Conn) (waiting, closing bool) {
	if c.ccw.active() {
		if !c.ccw.step(c, cw) {
			return true, false // still in line (ccwait.go)
		}
	} else if c.srv.waits.mono() < cw.due {
		return true, false
	}
	cw.deliver(c)
	rest := cw.pending
	cw.pending = nil
	c.now = 0
	c.execBatch(rest)
	if c.quit {
		_ = c.ob.flush(c)
		return false, true
	}
	if cw.due != 0 {
		return true, c.ob.flush(c) != nil
	}
	return false, false
}

// delayOf returns how long the reply of a write submitted by submitWrites
// waits for its turn (engine.Result.Delay; 0: answered now). A
// CL.THROTTLEALL's results all carry the call's one Delay when it waits,
// and none when it is refused: the largest is the call's.
func (b *writeBatch) delayOf(sl *slot, werr error) int64 {
	if sl.op < 0 || werr != nil {
		return 0
	}
	res := &b.res[sl.op]
	if res.Err != nil {
		return 0
	}
	d := int64(0)
	for i := range res.Results {
		d = max(d, res.Results[i].Delay)
	}
	return d
}
