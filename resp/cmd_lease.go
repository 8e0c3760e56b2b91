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

const leaseIDDoc = "a lease id: 1 to 64 bytes, binary-safe"

// leaseCommands is the command table's block of the CC.* commands.
func leaseCommands() []*Command {
	return []*Command{
		{
			Name: "cc.acquire", Arity: -4, MaxArgs: 8, Flags: FlagWrite | FlagDenyOOM | FlagFast,
			FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "ratelimit", Since: "0.1.0",
			Summary:    "Holds units of an in-flight (concurrency) limit until CC.RELEASE, or until ttl passes without CC.RENEW.",
			Complexity: "O(N) where N is the number of leases the key holds",
			Args: []Arg{
				{Name: "key", Type: "key", Doc: "the limited entity (a user, a tenant, an API key)"},
				{Name: "max", Type: "integer", Doc: "units held at most at once; 1 up to 2^40"},
				{Name: "ttl", Type: "string", Doc: "how long the lease is held without CC.RENEW; " + durationDoc},
				{Name: "cost", Type: "integer", Token: "COST", Optional: true, Doc: "units this lease holds (default 1); 1 up to 2^40"},
				{Name: "lease", Type: "string", Token: "ID", Optional: true, Doc: leaseIDDoc + "; acquiring an id already held renews it and takes no more units (a retry after a lost reply is safe); without ID the server makes a unique id"},
			},
			Reply: "Array of six: the five integers of every limiter (`limited`, `limit` = max, `remaining` = max minus the units held after this request, " +
				"`retry_after` = milliseconds until the earliest held lease expires when limited, -1 when allowed and -1 when cost > max, " +
				"`reset_after` = milliseconds until every held lease has expired, 0 when none is held; rounded up), then the lease id as a bulk string (nil when limited).",
			Errors: append([]string{
				"`ERR lease id must be 1 to 64 bytes` for an empty or longer ID.",
				"`ERR syntax error` for an option other than COST and ID, one given twice, or one without its value.",
			}, append([]string{limiterErrors[0], limiterErrors[1], limiterErrors[2], limiterErrors[4], limiterErrors[5]}, durationErrors...)...),
			Notes: []string{
				"Example on a fresh key: `CC.ACQUIRE streams:user1 2 30s ID job-1` → `0 2 1 -1 30000 \"job-1\"`. Without ID the server makes the id (the instant and a counter of the key, in base 36, such as `\"dn6g4g7fn63r-1\"`).",
				"A concurrency key expires when nothing is held; it answers WRONGTYPE to the other limiter commands, and they to it. " +
					"limit-override replaces max (ttl and cost stay the caller's); under limit-shadow a refusal answers allowed, with a lease id that is not held.",
				"Memory: 64 bytes of side-table entry plus 32 bytes and the id's length per lease; a key holds at most 100000 leases (an acquire beyond is limited).",
			},
			Prepare: prepareLease(engine.LeaseAcquire),
			Finish:  finishAcquire,
		},
		{
			Name: "cc.release", Arity: 3, Flags: FlagWrite | FlagFast,
			FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "ratelimit", Since: "0.1.0",
			Summary:    "Releases a lease taken by CC.ACQUIRE, freeing its units.",
			Complexity: "O(N) where N is the number of leases the key holds",
			Args: []Arg{
				{Name: "key", Type: "key", Doc: "the key of CC.ACQUIRE"},
				{Name: "lease", Type: "string", Doc: "the lease id CC.ACQUIRE answered (or gave with ID)"},
			},
			Reply:   "Integer: 1 when a held lease was released, 0 when the lease is not held (unknown, expired, or already released); releasing twice is harmless.",
			Notes:   []string{"Example on a fresh key: `CC.RELEASE streams:user2 job-1` → `0`. A release that frees the last held lease deletes the key."},
			Errors:  []string{limiterErrors[0], "`ERR lease id must be 1 to 64 bytes`."},
			Prepare: prepareLease(engine.LeaseRelease),
			Finish:  finishLeaseCount,
		},
		{
			Name: "cc.renew", Arity: 4, Flags: FlagWrite | FlagFast,
			FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "ratelimit", Since: "0.1.0",
			Summary:    "Extends a held lease: it now expires ttl from now.",
			Complexity: "O(N) where N is the number of leases the key holds",
			Args: []Arg{
				{Name: "key", Type: "key", Doc: "the key of CC.ACQUIRE"},
				{Name: "lease", Type: "string", Doc: "the lease id"},
				{Name: "ttl", Type: "string", Doc: durationDoc},
			},
			Reply:   "Integer: 1 when the lease was held and is renewed, 0 when it is not held (unknown, expired, or released).",
			Errors:  append([]string{limiterErrors[0], "`ERR lease id must be 1 to 64 bytes`."}, durationErrors...),
			Prepare: prepareLease(engine.LeaseRenew),
			Finish:  finishLeaseCount,
		},
	}
}

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
	c.countDecision(r.Limited)
	c.countKey(args[1], r.Limited)
	c.countClass(args[1], r.Limited)
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
