package resp

import (
	"bytes"

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
		op.Code = shards.OpLimit
		op.Keys = append(op.Keys, args[1])
		op.Reqs = append(op.Reqs, req)
		if err := admitWait(c, op.Reqs); err != nil {
			return err
		}
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
	if err := admitWait(c, op.Reqs); err != nil {
		return err
	}
	return c.applyPolicy(op)
}

// admitWait admits the WAIT of an op's requests, one for them all (the op
// waits as a whole; its first request carries it): max-wait caps it, and
// past max-waiting it is refused.
func admitWait(c *Conn, reqs []engine.Request) error {
	if len(reqs) == 0 || reqs[0].Wait <= 0 {
		return nil
	}
	w, err := c.srv.waits.admit(reqs[0].Wait)
	if err != nil {
		return err
	}
	for i := range reqs {
		reqs[i].Wait = w
	}
	return nil
}

// throttleAllKeys appends the keys of a CL.THROTTLEALL call (args with the
// command's name first) to dst: the first of every group of five, not the
// trailing WAIT duration's (its key positions alone would read WAIT as a
// key, and route the call by it).
func throttleAllKeys(dst, args [][]byte) [][]byte {
	n := len(args)
	if n > 3 && (n-1)%5 == 2 && bytes.EqualFold(args[n-2], []byte("wait")) {
		n -= 2
	}
	for i := 1; i < n; i += 5 {
		dst = append(dst, args[i])
	}
	return dst
}

// writeLimit writes the five fields every limiter replies, times rounded
// by round, as an array of 5+extra elements: the caller writes the extra
// ones (LB.ADD's wait, CC.ACQUIRE's lease).
func (c *Reply) writeLimit(r *engine.Result, round func(int64) int64, extra int) {
	limited := int64(0)
	if r.Limited {
		limited = 1
	}
	c.WriteArray(5 + extra)
	c.WriteInt(limited)
	c.WriteInt(r.Limit)
	c.WriteInt(r.Remaining)
	c.WriteInt(round(r.RetryAfter))
	c.WriteInt(round(r.ResetAfter))
}

// countOne counts a single-key decision: the decision, the key's
// frequency and its class.
func (t *tally) countOne(c *Conn, key []byte, limited bool) {
	t.countDecision(c, limited)
	t.countKey(c, key, limited)
	t.countClass(c, key, limited)
}

func finishThrottle(c *Conn, args [][]byte, res *shards.Result) {
	r := &res.Results[0]
	c.acct.countOne(c, args[1], r.Limited)
	c.writeLimit(r, engine.CellSeconds, 0)
}

func finishThrottleAll(c *Conn, args [][]byte, res *shards.Result) {
	limited := false
	c.WriteArray(len(res.Results))
	for i := range res.Results {
		limited = limited || res.Results[i].Limited
		c.acct.countKey(c, args[1+5*i], res.Results[i].Limited)
		c.acct.countClass(c, args[1+5*i], res.Results[i].Limited)
		c.writeLimit(&res.Results[i], engine.CellSeconds, 0)
	}
	c.acct.countDecision(c, limited)
}

func finishMillis(c *Conn, args [][]byte, res *shards.Result) {
	r := &res.Results[0]
	c.acct.countOne(c, args[1], r.Limited)
	c.writeLimit(r, engine.CeilMillis, 0)
}

func finishLeaky(c *Conn, args [][]byte, res *shards.Result) {
	r := &res.Results[0]
	c.acct.countOne(c, args[1], r.Limited)
	c.writeLimit(r, engine.CeilMillis, 1)
	c.WriteInt(engine.CeilMillis(r.Wait))
}
