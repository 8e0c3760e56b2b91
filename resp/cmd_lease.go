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
// Waiting in line (CC.ACQUIRE … WAIT duration) is not parsed here yet: it
// hooks in at prepareAcquire (parse WAIT after the options) and
// finishAcquire (a limited reply within the wait parks the connection
// instead of answering); a CC.RELEASE that answers 1, and a lease found
// expired (Result.ExpiredLeases), free units and are where a parked waiter
// of the key is woken, in arrival order.

// prepareLease parses a CC.* command into an OpLimit, through the rules.
func prepareLease(op engine.LeaseOp) func(c *Conn, args [][]byte, o *shards.Op) error {
	return func(c *Conn, args [][]byte, o *shards.Op) error {
		req, err := engine.ParseLease(op, args[2:])
		if err != nil {
			return err
		}
		o.Code = shards.OpLimit
		o.Keys = append(o.Keys, args[1])
		o.Reqs = append(o.Reqs, req)
		return c.applyPolicy(o)
	}
}

// finishAcquire writes CC.ACQUIRE's reply: the five fields, then the lease.
func finishAcquire(c *Conn, args [][]byte, res *shards.Result) {
	r := &res.Results[0]
	c.acct.countOne(c, args[1], r.Limited)
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
