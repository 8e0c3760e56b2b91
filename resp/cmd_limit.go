package resp

import (
	"slices"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// The limiter commands. Each is a batchable write: Prepare parses the
// arguments into an Op, Finish writes the reply. Times are rounded by
// engine.CellSeconds for CL.THROTTLE (redis-cell's rule) and engine.CeilMillis
// for the others.

const limiterReply = "Array of five integers: `limited` (0 allowed, 1 limited), `limit`, `remaining`, `retry_after` (-1 when allowed or when the request can never succeed), `reset_after`."

const durationDoc = "a duration: an integer number of seconds, or an integer with a unit `ms`, `s`, `m`, `h`, `d` (any letter case); 1 ms up to 3660 days"

const countRange = "0 up to 2^40"

// waitErrors are the errors of WAIT, for the commands that take it.
var waitErrors = []string{
	"`ERR WAIT <value> is out of range: must be 0..1d` for a negative wait or one above a day; `ERR WAIT \"<value>\" is not a duration: …` for one that does not parse.",
	"`ERR too many requests are waiting on this server (max-waiting): retry later, or without WAIT` while `max-waiting` requests wait; nothing is consumed.",
	"`ERR WAIT is not allowed inside MULTI: a transaction is answered at once, as one step` when queued in a transaction (EXEC then answers EXECABORT).",
}

// waitArg is the trailing WAIT of the limiter commands that can wait
// (wait.go).
var waitArg = Arg{Name: "duration", Type: "string", Token: "WAIT", Optional: true,
	Doc: "wait up to this long instead of being refused: a request the limiter would admit within it takes its place in line at once (first come, first served per key) and is answered allowed when its turn comes, the connection blocked meanwhile; otherwise it is refused at once, consuming nothing. " +
		"A duration as the periods' (250ms, 2s; a bare integer is seconds), 0 up to 1 day, capped by `max-wait` (default 10s). Not inside MULTI"}

// durationErrors are the errors of a duration argument, for the commands
// that take one.
var durationErrors = []string{
	"`ERR <argument> \"<value>\" is not a duration: expected an integer number of seconds, or an integer with a unit ms, s, m, h or d, from 1ms..3660d` for a duration that does not parse: a fraction (`1.5s`), a unit other than `ms`, `s`, `m`, `h`, `d` (`1w`, `1us`), or a space (`\" 1s\"`).",
	"`ERR <argument> <value> is out of range: must be 1ms..3660d` for a period or window of 0, a negative one or one above 3660 days (`TB.TAKE tb1 10 1 3661d` → `ERR refill_period 3661d is out of range: must be 1ms..3660d`).",
}

var limiterErrors = []string{
	"`WRONGTYPE Operation against a key holding the wrong kind of value` when the key holds another kind of limiter (nothing changes).",
	"`ERR value is not an integer or out of range` for a number that is not a decimal integer (`x`, `1.5`, `60s` where whole seconds are expected), as Redis and redis-cell word it.",
	"`ERR <argument> <value> is out of range: must be <min>..<max>` for a number outside its argument's range (negative, zero where at least 1 is needed, above 2^40, or an integer beyond 64 bits): `CL.THROTTLE k -1 30 60` → `ERR max_burst -1 is out of range: must be 0..1099511627776`.",
	"`ERR <argument> <value> is out of range: must be <min>..<max> with these rate and period (the time to refill or drain completely must stay under 2^62 ns, about 146 years)` when max_burst or capacity, each in range, makes the derived duration (GCRA tolerance, time to refill or drain) exceed 2^62 ns; `<max>` is the largest that fits with the other arguments.",
	"`ERR wrong number of arguments for '<command>' command`.",
	"`OOM command not allowed when used memory > 'maxmemory'.` under `maxmemory-policy noeviction` while the keyspace is over `maxmemory`, when the request would create a key or grow one (an SL.ADD entry that needs a larger log); nothing changes. Requests that keep a key's size, denials and peeks still answer.",
}

func limiterCommands() []*Command {
	return []*Command{
		{
			Name: "cl.throttle", Arity: -5, MaxArgs: 8, Flags: FlagWrite | FlagDenyOOM | FlagFast, Waits: true,
			FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "ratelimit", Since: "0.1.0",
			Summary:    "Rate-limits a key with the Generic Cell Rate Algorithm, answering exactly as redis-cell does.",
			Complexity: "O(1)",
			Args: []Arg{
				{Name: "key", Type: "key", Doc: "the limited entity; binary-safe (any bytes)"},
				{Name: "max_burst", Type: "integer", Doc: "requests allowed at once beyond the steady rate; 0 up to 2^40 (limit = max_burst + 1)"},
				{Name: "count_per_period", Type: "integer", Doc: "requests per period; 1 up to 2^40"},
				{Name: "period", Type: "integer", Doc: "whole seconds; 1 up to 316224000 (3660 days)"},
				{Name: "quantity", Type: "integer", Optional: true, Doc: "units this request takes (default 1); 0 peeks; negative gives capacity back (at most to a fresh key's state); from -2^40 up to 2^40"},
				waitArg,
			},
			Reply:  limiterReply + " `retry_after` and `reset_after` are whole seconds: truncated, plus one when the remainder is at least 1 ms (redis-cell's rule).",
			Errors: append(append([]string{"`ERR period <value> is out of range: must be 1..316224000 seconds` for a period of 0, a negative one or one above 3660 days (`CL.THROTTLE kb 5 5 316224001`); `ERR count_per_period <value> is out of range: must be 1..<period in ns> for this period (period / count_per_period must be at least 1 ns)` when `period / count_per_period` is below 1 ns (`CL.THROTTLE kb 5 1099511627776 1` → `… must be 1..1000000000 for this period …`; redis-cell does not support such rates either)."}, limiterErrors...), waitErrors...),
			Notes: []string{
				"Example on a fresh key: `CL.THROTTLE user123 15 30 60` → `0 16 15 -1 2`.",
				"The key stores the theoretical arrival time (TAT) and expires at it; `GET key` returns the TAT as decimal nanoseconds since the Unix epoch, as redis-cell stores it.",
			},
			Prepare: prepareLimit(engine.KindGCRA),
			Finish:  finishThrottle,
		},
		{
			Name: "cl.throttleall", Arity: -6, Flags: FlagWrite | FlagDenyOOM,
			FirstKey: 1, LastKey: -1, KeyStep: 5, Group: "ratelimit", Since: "0.1.0",
			Summary:    "Checks several GCRA limits atomically: all are consumed if all allow, none otherwise.",
			Complexity: "O(N) where N is the number of limits",
			Args: []Arg{
				{Name: "limit", Type: "block", Multiple: true, Args: []Arg{
					{Name: "key", Type: "key", Doc: "as CL.THROTTLE"},
					{Name: "max_burst", Type: "integer", Doc: "as CL.THROTTLE"},
					{Name: "count_per_period", Type: "integer", Doc: "as CL.THROTTLE"},
					{Name: "period", Type: "integer", Doc: "as CL.THROTTLE (whole seconds)"},
					{Name: "quantity", Type: "integer", Doc: "required; 0 up to 2^40 (never negative)"},
				}},
			},
			Reply: "Array holding one CL.THROTTLE-shaped array per limit, in order. A limit's `limited` is 1 when it is one that refused; in a refused call the limits that would have allowed report what a peek (quantity 0) would answer at that instant, and nothing is consumed.",
			Errors: append([]string{"`ERR wrong number of arguments for 'cl.throttleall' command` unless the arguments come in groups of five.",
				"Parameter errors as CL.THROTTLE, prefixed by the limit's position (`ERR limit 2: quantity -1 is out of range: must be 0..1099511627776`)."}, limiterErrors[0]),
			Notes:   []string{"A key named twice has both quantities counted against it, in order. Keys on different shards are locked in a fixed order, so concurrent calls never deadlock."},
			Prepare: prepareThrottleAll,
			Finish:  finishThrottleAll,
		},
		{
			Name: "tb.take", Arity: -5, MaxArgs: 9, Flags: FlagWrite | FlagDenyOOM | FlagFast, Waits: true,
			FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "ratelimit", Since: "0.1.0",
			Summary:    "Takes tokens from a token bucket.",
			Complexity: "O(1)",
			Args: []Arg{
				{Name: "key", Type: "key", Doc: "the bucket"},
				{Name: "capacity", Type: "integer", Doc: "tokens the bucket holds when full (a new bucket is full); 1 up to 2^40"},
				{Name: "refill_tokens", Type: "integer", Doc: "tokens added per refill_period; 1 up to 2^40"},
				{Name: "refill_period", Type: "string", Doc: durationDoc},
				{Name: "tokens", Type: "integer", Optional: true, Doc: "tokens this request takes (default 1); 0 peeks; " + countRange},
				{Name: "interval", Type: "pure-token", Token: "INTERVAL", Optional: true, Doc: "refill_tokens arrive all at once at the end of each refill_period (aligned to the bucket's first use) instead of continuously"},
				waitArg,
			},
			Reply:   limiterReply + " `limit` = capacity, `remaining` = whole tokens left, `reset_after` = time until the bucket is full again; times in milliseconds, rounded up.",
			Errors:  append(append(slices.Clone(limiterErrors), durationErrors...), waitErrors...),
			Prepare: prepareLimit(engine.KindTokenBucket),
			Finish:  finishMillis,
		},
		{
			Name: "lb.add", Arity: -5, MaxArgs: 8, Flags: FlagWrite | FlagDenyOOM | FlagFast, Waits: true,
			FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "ratelimit", Since: "0.1.0",
			Summary:    "Adds a request to a leaky bucket (a queue that drains at a fixed rate).",
			Complexity: "O(1)",
			Args: []Arg{
				{Name: "key", Type: "key", Doc: "the bucket"},
				{Name: "capacity", Type: "integer", Doc: "requests the bucket holds; 1 up to 2^40"},
				{Name: "leak_count", Type: "integer", Doc: "requests drained per leak_period; 1 up to 2^40"},
				{Name: "leak_period", Type: "string", Doc: durationDoc},
				{Name: "count", Type: "integer", Optional: true, Doc: "units this request adds (default 1); 0 peeks; " + countRange},
				waitArg,
			},
			Reply:   "Array of six integers: the five of every limiter (`limited`, `limit` = capacity, `remaining`, `retry_after`, `reset_after` = time until the bucket is empty) and `wait`: milliseconds until this admitted request reaches the head of the queue (0 when the bucket was empty, -1 when limited; for a peek, the wait a request admitted now would have). Times in milliseconds, rounded up.",
			Errors:  append(append(slices.Clone(limiterErrors), durationErrors...), waitErrors...),
			Prepare: prepareLimit(engine.KindLeakyBucket),
			Finish:  finishLeaky,
		},
		windowCommand("fw.incr", engine.KindFixedWindow, "Counts a request in a fixed window aligned to the Unix epoch.",
			"`limit` = limit, `remaining` = what is left in the current window, `reset_after` = time to the window's end; times in milliseconds, rounded up."),
		windowCommand("sw.incr", engine.KindSlidingWindow, "Counts a request in a sliding window (weighted previous and current window).",
			"`remaining` = floor(limit − estimate) after the request, `retry_after` = when the estimate will have fallen enough, `reset_after` = time until both windows' counts have slid out; times in milliseconds, rounded up."),
		windowCommand("sl.add", engine.KindSlidingLog, "Logs a request in an exact sliding-window log.",
			"`remaining` = limit minus the counts logged in the last window, `retry_after` = when enough of the oldest entries leave the window, `reset_after` = when the newest entry leaves it; times in milliseconds, rounded up."),
		inspectCommand(),
	}
}

func windowCommand(name string, kind engine.Kind, summary, reply string) *Command {
	limitDoc := "requests allowed per window; 1 up to 2^40"
	complexity := "O(1)"
	errs := append(slices.Clone(limiterErrors), durationErrors...)
	errs = append(errs, "`ERR WAIT is not supported by this limiter (a window keeps no place for a later turn): only CL.THROTTLE, TB.TAKE and LB.ADD can wait` for a trailing `WAIT duration`.")
	var notes []string
	if kind == engine.KindSlidingLog {
		notes = []string{"Memory: a sliding-log key costs what every key does (27 bytes of record, table slot and parameter reference, plus its name), a 64-byte side-table entry, " +
			"and 16 bytes per entry of its log's array: one entry per admitted request at a distinct instant (requests at the same nanosecond share one), " +
			"at most `limit` entries. The array grows by about 1.25× once large and is reused as entries leave the window, so a key with `limit` 100000 " +
			"can hold about 2 MB. MEMORY USAGE reports it and `maxmemory` counts it."}
		limitDoc = "requests allowed per window; 1 up to the server's sl-max-limit (default 100000)"
		complexity = "O(log N) where N is the number of entries in the window, O(N) memory per key"
		errs = append([]string{"`ERR limit <value> is out of range: must be 1..<sl-max-limit> (sl-max-limit)` for a limit above sl-max-limit (`ERR limit 100001 is out of range: must be 1..100000 (sl-max-limit)` by default)."}, errs...)
	}
	return &Command{
		Name: name, Arity: -4, MaxArgs: 7, Flags: FlagWrite | FlagDenyOOM | FlagFast,
		FirstKey: 1, LastKey: 1, KeyStep: 1, Group: "ratelimit", Since: "0.1.0",
		Summary: summary, Complexity: complexity,
		Args: []Arg{
			{Name: "key", Type: "key", Doc: "the limited entity"},
			{Name: "limit", Type: "integer", Doc: limitDoc},
			{Name: "window", Type: "string", Doc: durationDoc},
			{Name: "count", Type: "integer", Optional: true, Doc: "units this request counts (default 1); 0 peeks; " + countRange},
		},
		Reply:   limiterReply + " " + reply,
		Errors:  errs,
		Notes:   notes,
		Prepare: prepareLimit(kind),
		Finish:  finishMillis,
	}
}

// prepareLimit parses a single-key limiter command into an OpLimit.
func prepareLimit(kind engine.Kind) func(c *Conn, args [][]byte, op *shards.Op) error {
	return func(c *Conn, args [][]byte, op *shards.Op) error {
		req, err := engine.ParseRequest(kind, args[2:], c.srv.cfg.Parse)
		if err != nil {
			return err
		}
		if req.Wait > 0 {
			if err := c.applyWait(&req.Wait); err != nil {
				return err
			}
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

func (c *Conn) writeLimit(r *engine.Result, round func(int64) int64) {
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
	c.countDecision(r.Limited)
	c.countKey(args[1], r.Limited)
	c.countClass(args[1], r.Limited)
	c.writeLimit(r, engine.CellSeconds)
}

func finishThrottleAll(c *Conn, args [][]byte, res *shards.Result) {
	limited := false
	c.WriteArray(len(res.Results))
	for i := range res.Results {
		limited = limited || res.Results[i].Limited
		c.countKey(args[1+5*i], res.Results[i].Limited)
		c.countClass(args[1+5*i], res.Results[i].Limited)
		c.writeLimit(&res.Results[i], engine.CellSeconds)
	}
	c.countDecision(limited)
}

func finishMillis(c *Conn, args [][]byte, res *shards.Result) {
	r := &res.Results[0]
	c.countDecision(r.Limited)
	c.countKey(args[1], r.Limited)
	c.countClass(args[1], r.Limited)
	c.writeLimit(r, engine.CeilMillis)
}

func finishLeaky(c *Conn, args [][]byte, res *shards.Result) {
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
	c.WriteInt(engine.CeilMillis(r.Wait))
}
