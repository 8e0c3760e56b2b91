package resp

import (
	"sync"
	"sync/atomic"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/waiters"
	"github.com/cellserver/cellserver/shards"
)

// CC.ACQUIRE … WAIT duration: waiting in a concurrency key's line for a
// release or an expiry. The line is the key's state (engine/concurrency.go);
// the server only answers: it knows which connection waits for which (key,
// lease id) (Server.line), and the store tells it of every grant it applies
// (GrantHook). A waiter also asks again at the earliest lease's expiry and
// once more, without WAIT, at its deadline. resp/DESIGN.md ("Waiting for a
// release") tells the whole course, leaving the line included.

// lineWaiters is the server's waiting connections by (key, lease id).
type lineWaiters = waiters.Registry[*Conn]

// GrantHook returns the hook to set on the store (shards.Store.SetGrantHook)
// so that s answers the waiters of its connections that an applied op
// granted.
func GrantHook(s *Server) shards.GrantHook {
	return func(key []byte, granted []engine.Result) {
		for i := range granted {
			k := waiters.Key{Key: string(key), ID: granted[i].Lease}
			if c, ok := s.line.Take(k); ok {
				c.ccw.grant(c, k, &granted[i])
			}
		}
	}
}

// The states of a connection's waiting acquire.
const (
	ccIdle      = iota // none
	ccSubmitted        // its op is being decided
	ccQueued           // in line
	ccGranted          // granted, its reply not yet sent
)

// ccWait is a connection's acquire waiting in a line (one at most: a run
// of writes ends at a command with WAIT). mu guards state and granted,
// which the grant hook sets from another goroutine; the rest belongs to the
// connection's goroutine or loop.
type ccWait struct {
	mu      sync.Mutex
	state   uint8
	granted engine.Result
	k       waiters.Key
	req     engine.Request // the acquire (its Lease set), for asking again
	retryAt int64          // the server's monotonic ns: ask again then; 0: not before the deadline
	seen    bool           // its op's reply was handled (queued)
	cmd     *Command       // CC.ACQUIRE, current again when answered
	// busy is set while state is not ccIdle, so that the checks every
	// batch and every CC.ACQUIRE make cost one atomic load when nothing
	// waits.
	busy atomic.Bool
	wake chan struct{} // a goroutine connection's wake-up (capacity 1)
}

// submit registers the connection as waiting for (key, req.Lease) before
// its op is decided.
func (w *ccWait) submit(c *Conn, key []byte, req *engine.Request) {
	w.mu.Lock()
	old := w.k
	w.state, w.k, w.req, w.retryAt, w.seen = ccSubmitted, waiters.Key{Key: string(key), ID: req.Lease}, *req, 0, false
	w.busy.Store(true)
	w.mu.Unlock()
	if old != (waiters.Key{}) && old != w.k {
		c.srv.line.Remove(old, c)
	}
	c.srv.line.Add(w.k, c)
}

// grant records the grant of k (the grant hook, any goroutine) and wakes
// the connection.
func (w *ccWait) grant(c *Conn, k waiters.Key, r *engine.Result) {
	w.mu.Lock()
	if w.k != k || (w.state != ccSubmitted && w.state != ccQueued) {
		w.mu.Unlock()
		return
	}
	w.state, w.granted = ccGranted, *r
	w.granted.Lease = k.ID
	w.mu.Unlock()
	if lc := c.lp.loop.Load(); lc != nil {
		_ = lc.gc.Wake(nil)
		return
	}
	if ch := w.wakeChan(); ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// wakeChan returns the wake-up channel of a goroutine connection's wait.
func (w *ccWait) wakeChan() chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wake
}

// active reports whether the connection's waiting request is an acquire in
// a line (queued or granted).
func (w *ccWait) active() bool {
	if !w.busy.Load() {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state == ccQueued || w.state == ccGranted
}

// finish ends the connection's waiting acquire (answered), forgetting it.
func (w *ccWait) finish(c *Conn) {
	w.mu.Lock()
	k := w.k
	w.state, w.k = ccIdle, waiters.Key{}
	w.busy.Store(false)
	w.mu.Unlock()
	if k != (waiters.Key{}) {
		c.srv.line.Remove(k, c)
	}
}

// queued handles the reply of the connection's submitted acquire: it
// reports whether the acquire now waits in line (nothing to write yet: the
// caller holds the connection for the wait), having armed the asking again
// at retry_after; false when the reply is to be written now (r is then
// the reply, the grant's if the grant came first).
func (w *ccWait) queued(c *Conn, key []byte, r *engine.Result) bool {
	if !w.busy.Load() {
		return false
	}
	w.mu.Lock()
	if w.state == ccIdle || w.seen || w.k.Key != string(key) || w.k.ID != r.Lease {
		w.mu.Unlock()
		return false
	}
	w.seen = true
	switch {
	case w.state == ccGranted:
		*r = w.granted
	case r.Queued:
		w.state, w.cmd = ccQueued, c.cur
		if c.lp.gc == nil && w.wake == nil {
			w.wake = make(chan struct{}, 1)
		}
		w.mu.Unlock()
		w.arm(c, r.RetryAfter)
		return true
	}
	w.mu.Unlock()
	w.finish(c)
	return false
}

// arm sets when the waiter asks again: after retry (ns; the earliest held
// lease's expiry), and never when retry is negative (none held: a release
// or the deadline ends the wait).
func (w *ccWait) arm(c *Conn, retry int64) {
	w.retryAt = 0
	if retry < 0 {
		return
	}
	w.retryAt = c.srv.waits.mono() + max(retry, 1)
	if c.lp.gc != nil {
		c.srv.waits.schedule(w.retryAt, c)
	}
}

// step runs on the connection's goroutine or loop while its acquire waits
// in line (cw holds the wait's deadline): it writes the reply and reports
// true when the wait is over (granted; asked again and allowed; its
// deadline come), false while it still waits.
func (w *ccWait) step(c *Conn, cw *connWait) bool {
	now := c.srv.waits.mono()
	w.mu.Lock()
	state, granted := w.state, w.granted
	w.mu.Unlock()
	req := w.req
	if w.cmd != nil {
		c.setCurrent(w.cmd) // the decision is counted as CC.ACQUIRE's
	}
	switch {
	case state == ccGranted:
		w.reply(c, &granted)
		w.finish(c)
		return true
	case now >= cw.due:
		req.Wait = 0 // out of the line: the usual limited reply
	case w.retryAt != 0 && now >= w.retryAt:
		req.Wait = cw.due - now // ask again: it keeps its place
	default:
		return false
	}
	op := [1]shards.Op{{Code: shards.OpLimit, Keys: [][]byte{[]byte(w.k.Key)}, Reqs: []engine.Request{req}}}
	res := [1]shards.Result{}
	err := c.srv.backend.Write(c.srv.ctx, op[:], res[:])
	if err == nil && res[0].Err != nil {
		err = c.redirect(res[0].Err, op[0].Keys) // MOVED, ASK: worded for the wire
	}
	if err == nil && len(res[0].Results) != 1 {
		err = shards.ErrBadOp
	}
	if err != nil {
		c.WriteError(err)
		w.finish(c)
		return true
	}
	r := &res[0].Results[0]
	if r.Queued && req.Wait > 0 {
		w.mu.Lock()
		if w.state == ccGranted { // granted meanwhile, by another op
			*r = w.granted
		}
		w.mu.Unlock()
		if r.Queued {
			w.arm(c, r.RetryAfter)
			return false
		}
	}
	w.reply(c, r)
	w.finish(c)
	return true
}

// reply writes CC.ACQUIRE's reply r and counts the decision.
func (w *ccWait) reply(c *Conn, r *engine.Result) {
	r.Queued = false
	writeAcquire(c, []byte(w.k.Key), r)
}

// settle runs after each reply of a run of writes: an acquire that was
// to wait but whose op failed (an error reply, not handled by queued) is
// abandoned, its id released in case the op was applied.
func (w *ccWait) settle(c *Conn) {
	if !w.busy.Load() {
		return
	}
	w.mu.Lock()
	pending := w.state != ccIdle && !w.seen
	w.mu.Unlock()
	if pending {
		w.abandon(c)
	}
}

// abandon runs when the connection closes: an acquire submitted, waiting
// or granted but not answered is released (CC.RELEASE through the
// decision path, on a goroutine of its own: the closing loop does not wait
// for it), so it leaves the line or frees its units.
func (w *ccWait) abandon(c *Conn) {
	w.mu.Lock()
	state, k := w.state, w.k
	w.state, w.k = ccIdle, waiters.Key{}
	w.busy.Store(false)
	w.mu.Unlock()
	if state == ccIdle || k == (waiters.Key{}) {
		return
	}
	s := c.srv
	s.line.Remove(k, c)
	go func() {
		op := [1]shards.Op{{Code: shards.OpLimit, Keys: [][]byte{[]byte(k.Key)}, Reqs: []engine.Request{{Kind: engine.KindConcurrency, Op: engine.LeaseRelease, Lease: k.ID}}}}
		res := [1]shards.Result{}
		if err := s.backend.Write(s.ctx, op[:], res[:]); err != nil && s.ctx.Err() == nil {
			s.log.Warn("could not release the lease of a client that closed while waiting; it leaves the line at its deadline", "key", k.Key, "lease", k.ID, "err", err)
		}
	}()
}
