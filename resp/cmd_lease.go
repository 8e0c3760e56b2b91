package resp

import (
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// The in-flight (concurrency) commands: CC.ACQUIRE holds units of a key
// until CC.RELEASE, or until its ttl passes without CC.RENEW. All three are
// batchable writes on one key of the concurrency kind (engine's
// concurrency.go), replicated and decided like every limiter command.
//
// CC.ACQUIRE … WAIT duration waits in the key's line (ccwait.go): prepare
// caps the wait (max-wait, max-waiting) and registers the connection as
// the waiter of its (key, lease id) before the op is decided; a queued
// reply holds the connection instead of answering, until a grant, the
// asking again at an expiry, or its deadline.

// prepareLease parses a CC.* command into an OpLimit, through the rules.
func prepareLease(op engine.LeaseOp) func(c *Conn, args [][]byte, o *shards.Op) error {
	return func(c *Conn, args [][]byte, o *shards.Op) error {
		req, err := engine.ParseLease(op, args[2:])
		if err != nil {
			return err
		}
		if req.Wait > 0 {
			w, err := c.srv.waits.admit(req.Wait)
			if err != nil {
				return err
			}
			if req.Wait = w; req.Wait > 0 && req.Lease == "" {
				req.Lease = c.srv.line.NewID()
			}
		}
		o.Code = shards.OpLimit
		o.Keys = append(o.Keys, args[1])
		o.Reqs = append(o.Reqs, req)
		if err := c.applyPolicy(o); err != nil {
			return err
		}
		if r := &o.Reqs[len(o.Reqs)-1]; r.Wait > 0 && !r.Shadow {
			c.ccw.submit(c, args[1], r)
		}
		return nil
	}
}

// finishAcquire writes CC.ACQUIRE's reply: the five fields, then the lease.
func finishAcquire(c *Conn, args [][]byte, res *shards.Result) {
	r := &res.Results[0]
	if c.ccw.queued(c, args[1], r) {
		// In line: no reply now; the connection waits until its
		// deadline (runWrites holds it for Delay), answered by a grant
		// before.
		r.Delay = c.ccw.req.Wait
		return
	}
	writeAcquire(c, args[1], r)
}

// writeAcquire writes CC.ACQUIRE's reply r for key (its decision counted):
// the five fields, then the lease (null when limited).
func writeAcquire(c *Conn, key []byte, r *engine.Result) {
	c.acct.countOne(c, key, r.Limited)
	c.writeLimit(r, engine.CeilMillis, 1)
	if r.Limited || r.Lease == "" {
		c.WriteNull()
	} else {
		c.WriteBulkString(r.Lease)
	}
}

// finishLeaseCount writes CC.RELEASE's and CC.RENEW's reply: 1 when the
// lease was held, 0 when not.
func finishLeaseCount(c *Conn, args [][]byte, res *shards.Result) {
	if res.Results[0].Limited {
		c.WriteInt(0)
	} else {
		c.WriteInt(1)
	}
}
