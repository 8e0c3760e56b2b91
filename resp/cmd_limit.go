package resp

import (
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// The limiter commands. Each is a batchable write: Prepare parses the
// arguments into an Op, Finish writes the reply. Times are rounded by
// engine.CellSeconds for CL.THROTTLE (redis-cell's rule) and engine.CeilMillis
// for the others.

// prepareLimit parses a single-key limiter command into an OpLimit.
func prepareLimit(kind engine.Kind) func(c *Conn, args [][]byte, op *shards.Op) error {
	return func(c *Conn, args [][]byte, op *shards.Op) error {
		req, err := engine.ParseRequest(kind, args[2:], c.srv.cfg.Parse)
		if err != nil {
			return err
		}
		if req.Wait > 0 {
			// max-wait caps the wait; past max-waiting it is refused.
			w, err := c.srv.waits.admit(req.Wait)
			if err != nil {
				return err
			}
			req.Wait = w
		}
		op.Code = shards.OpLimit
		op.Keys = append(op.Keys, args[1])
		op.Reqs = append(op.Reqs, req)
		return c.applyPolicy(op)
	}
}

func prepareThrottleAll(c *Conn, args [][]byte, op *shards.Op) error {
	keys, reqs, err := engine.ParseThrottleAll(args[1:], c.srv.cfg.Parse)
	if err != nil {
		return err
	}
	op.Code = shards.OpLimitAll
	op.Keys = append(op.Keys, keys...)
	op.Reqs = append(op.Reqs, reqs...)
	return c.applyPolicy(op)
}

func (c *Reply) writeLimit(r *engine.Result, round func(int64) int64) {
	limited := int64(0)
	if r.Limited {
		limited = 1
	}
	c.WriteArray(5)
	c.WriteInt(limited)
	c.WriteInt(r.Limit)
	c.WriteInt(r.Remaining)
	c.WriteInt(round(r.RetryAfter))
	c.WriteInt(round(r.ResetAfter))
}

func finishThrottle(c *Conn, args [][]byte, res *shards.Result) {
	r := &res.Results[0]
	c.acct.countDecision(c, r.Limited)
	c.acct.countKey(c, args[1], r.Limited)
	c.acct.countClass(c, args[1], r.Limited)
	c.writeLimit(r, engine.CellSeconds)
}

func finishThrottleAll(c *Conn, args [][]byte, res *shards.Result) {
	limited := false
	c.WriteArray(len(res.Results))
	for i := range res.Results {
		limited = limited || res.Results[i].Limited
		c.acct.countKey(c, args[1+5*i], res.Results[i].Limited)
		c.acct.countClass(c, args[1+5*i], res.Results[i].Limited)
		c.writeLimit(&res.Results[i], engine.CellSeconds)
	}
	c.acct.countDecision(c, limited)
}

func finishMillis(c *Conn, args [][]byte, res *shards.Result) {
	r := &res.Results[0]
	c.acct.countDecision(c, r.Limited)
	c.acct.countKey(c, args[1], r.Limited)
	c.acct.countClass(c, args[1], r.Limited)
	c.writeLimit(r, engine.CeilMillis)
}

func finishLeaky(c *Conn, args [][]byte, res *shards.Result) {
	r := &res.Results[0]
	c.acct.countDecision(c, r.Limited)
	c.acct.countKey(c, args[1], r.Limited)
	c.acct.countClass(c, args[1], r.Limited)
	limited := int64(0)
	if r.Limited {
		limited = 1
	}
	c.WriteArray(6)
	c.WriteInt(limited)
	c.WriteInt(r.Limit)
	c.WriteInt(r.Remaining)
	c.WriteInt(engine.CeilMillis(r.RetryAfter))
	c.WriteInt(engine.CeilMillis(r.ResetAfter))
	c.WriteInt(engine.CeilMillis(r.Wait))
}
