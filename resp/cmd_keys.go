package resp

import (
	"strconv"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

func keyCommands() []*Command {
	return []*Command{
		{
			Name: "del", Arity: -2, Flags: FlagWrite, FirstKey: 1, LastKey: -1, KeyStep: 1,
			Group: "generic", Since: "0.1.0", Summary: "Deletes keys, resetting their limiters.",
			Complexity: "O(N) where N is the number of keys",
			Args:       []Arg{{Name: "key", Type: "key", Multiple: true}},
			Reply:      "Integer: the number of keys that existed and were deleted.",
			Prepare: func(c *Conn, args [][]byte, op *shards.Op) error {
				op.Code = shards.OpDel
				op.Keys = append(op.Keys, args[1:]...)
				return nil
			},
			Finish: func(c *Conn, _ [][]byte, res *shards.Result) { c.WriteInt(res.N) },
		},
		{
			Name: "exists", Arity: -2, Flags: FlagReadonly | FlagFast, FirstKey: 1, LastKey: -1, KeyStep: 1,
			Group: "generic", Since: "0.1.0", Summary: "Counts how many of the keys exist.",
			Complexity: "O(N) where N is the number of keys",
			Args:       []Arg{{Name: "key", Type: "key", Multiple: true}},
			Reply:      "Integer: the number of keys that exist; a key named twice counts twice.",
			Handler: func(c *Conn, args [][]byte) error {
				now, err := c.readNow()
				if err != nil {
					return err
				}
				c.WriteInt(c.srv.backend.Store().Exists(args[1:], now))
				return nil
			},
		},
		{
			Name: "type", Arity: 2, Flags: FlagReadonly | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Group: "generic", Since: "0.1.0", Summary: "Returns the kind of limiter a key holds.",
			Complexity: "O(1)",
			Args:       []Arg{{Name: "key", Type: "key"}},
			Reply:      "Simple string: `gcra`, `token-bucket`, `leaky-bucket`, `fixed-window`, `sliding-window`, `sliding-log`, or `none` when the key does not exist.",
			Handler: func(c *Conn, args [][]byte) error {
				st, _, err := c.lookup(args[1])
				if err != nil {
					return err
				}
				c.WriteSimple(st.Kind.String())
				return nil
			},
		},
		{
			Name: "ttl", Arity: 2, Flags: FlagReadonly | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Group: "generic", Since: "0.1.0", Summary: "Returns the seconds until a key expires (is back to fresh).",
			Complexity: "O(1)",
			Args:       []Arg{{Name: "key", Type: "key"}},
			Reply:      "Integer: seconds to expiry, rounded to the nearest second as Redis does; -2 when the key does not exist (every limiter key has an expiry, so -1 never occurs).",
			Handler:    ttlHandler(false),
		},
		{
			Name: "pttl", Arity: 2, Flags: FlagReadonly | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Group: "generic", Since: "0.1.0", Summary: "Returns the milliseconds until a key expires (is back to fresh).",
			Complexity: "O(1)",
			Args:       []Arg{{Name: "key", Type: "key"}},
			Reply:      "Integer: milliseconds to expiry, rounded up; -2 when the key does not exist.",
			Handler:    ttlHandler(true),
		},
		{
			Name: "get", Arity: 2, Flags: FlagReadonly | FlagFast, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Group: "generic", Since: "0.1.0", Summary: "Returns a GCRA key's theoretical arrival time, as redis-cell stores it.",
			Complexity: "O(1)",
			Args:       []Arg{{Name: "key", Type: "key"}},
			Reply:      "Bulk string: the TAT in decimal nanoseconds since the Unix epoch; nil when the key does not exist.",
			Errors:     []string{"`WRONGTYPE Operation against a key holding the wrong kind of value` for a key of any other limiter kind."},
			Handler: func(c *Conn, args [][]byte) error {
				st, ok, err := c.lookup(args[1])
				switch {
				case err != nil:
					return err
				case !ok:
					c.WriteNull()
				case st.Kind != engine.KindGCRA:
					return shards.ErrWrongType
				default:
					c.WriteBulkInt(st.A)
				}
				return nil
			},
		},
		{
			Name: "dbsize", Arity: 1, Flags: FlagReadonly | FlagFast, Group: "server", Since: "0.1.0",
			Summary: "Returns the number of live keys.", Complexity: "O(N): expired keys are reclaimed first",
			Reply: "Integer: the number of keys.",
			Handler: func(c *Conn, _ [][]byte) error {
				now, err := c.readNow()
				if err != nil {
					return err
				}
				c.WriteInt(int64(c.srv.backend.Store().Len(now)))
				return nil
			},
		},
		{
			Name: "keys", Arity: 2, Flags: FlagReadonly, Group: "generic", Since: "0.1.0",
			Summary: "Returns every key matching a glob pattern.", Complexity: "O(N) where N is the number of keys",
			Args:  []Arg{{Name: "pattern", Type: "pattern", Doc: "Redis glob: `*`, `?`, `[abc]`, `[^a]`, `[a-z]`, `\\` escapes"}},
			Reply: "Array of bulk strings: the matching keys, in no particular order.",
			Handler: func(c *Conn, args [][]byte) error {
				now, err := c.readNow()
				if err != nil {
					return err
				}
				pat := args[1]
				all := len(pat) == 1 && pat[0] == '*'
				// Encode the matches aside, then prefix their count.
				saved := c.out
				c.out = c.tmp[:0]
				n := 0
				store := c.srv.backend.Store()
				for cur := uint64(0); ; {
					cur = store.Scan(cur, 1000, now, func(key []byte, _ engine.Kind) {
						if all || globMatch(pat, key) {
							c.WriteBulk(key)
							n++
						}
					})
					if cur == 0 {
						break
					}
					if c.ob.outputOver(c, len(saved)) {
						// Beyond client-output-buffer-limit's hard limit:
						// stop building; the client is closed.
						c.tmp = shrink(c.out[:0])
						c.out = saved[:0]
						return nil
					}
				}
				body := c.out
				c.out = saved
				c.WriteArray(n)
				c.out = append(c.out, body...)
				c.tmp = shrink(body)
				return nil
			},
		},
		{
			Name: "scan", Arity: -2, Flags: FlagReadonly, Group: "generic", Since: "0.1.0",
			Summary: "Iterates the keyspace.", Complexity: "O(1) per call, O(N) for a full iteration",
			Args: []Arg{
				{Name: "cursor", Type: "integer", Doc: "0 starts an iteration; then the cursor the previous call returned"},
				{Name: "pattern", Type: "pattern", Token: "MATCH", Optional: true, Doc: "Redis glob applied to the keys returned"},
				{Name: "count", Type: "integer", Token: "COUNT", Optional: true, Doc: "about how many keys to visit per call (default 10); at least 1"},
				{Name: "type", Type: "string", Token: "TYPE", Optional: true, Doc: "only keys of this limiter kind (as TYPE names them)"},
			},
			Reply:   "Array of two elements: the next cursor (bulk string; 0 when the iteration is complete) and an array of keys. A full iteration returns every key that existed throughout it; a key may be returned more than once.",
			Errors:  []string{"`ERR invalid cursor`.", "`ERR syntax error` for an unknown option or COUNT below 1.", "`ERR unknown type name '<kind>'`."},
			Handler: scanHandler,
		},
		flushCommand("flushall", "Deletes every key."),
		flushCommand("flushdb", "Deletes every key of the (only) database."),
	}
}

func flushCommand(name, summary string) *Command {
	return &Command{
		Name: name, Arity: -1, MaxArgs: 2, Flags: FlagWrite, Group: "server", Since: "0.1.0",
		Summary: summary, Complexity: "O(N) where N is the number of keys",
		Args: []Arg{{Name: "flush-type", Type: "oneof", Optional: true, Args: []Arg{
			{Name: "async", Type: "pure-token", Token: "ASYNC"}, {Name: "sync", Type: "pure-token", Token: "SYNC"},
		}, Doc: "accepted for compatibility; the flush is always immediate"}},
		Reply: "Simple string OK.",
		Prepare: func(c *Conn, args [][]byte, op *shards.Op) error {
			if len(args) == 2 && !equalFoldString(args[1], "async") && !equalFoldString(args[1], "sync") {
				return engine.ErrSyntax
			}
			op.Code = shards.OpFlush
			return nil
		},
		Finish: func(c *Conn, _ [][]byte, _ *shards.Result) { c.WriteOK() },
	}
}

// lookup reads one key at the batch's read instant.
func (c *Conn) lookup(key []byte) (engine.State, bool, error) {
	now, err := c.readNow()
	if err != nil {
		return engine.State{}, false, err
	}
	st, ok := c.srv.backend.Store().Lookup(key, now)
	return st, ok, nil
}

func ttlHandler(millis bool) func(c *Conn, args [][]byte) error {
	return func(c *Conn, args [][]byte) error {
		now, err := c.readNow()
		if err != nil {
			return err
		}
		st, ok := c.srv.backend.Store().Lookup(args[1], now)
		if !ok {
			c.WriteInt(-2)
			return nil
		}
		ms := engine.CeilMillis(st.ExpireAt - now)
		if millis {
			c.WriteInt(ms)
		} else {
			c.WriteInt((ms + 500) / 1000)
		}
		return nil
	}
}

func scanHandler(c *Conn, args [][]byte) error {
	cursor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		return ErrInvalidCursor
	}
	var pattern []byte
	count := 10
	kind := engine.KindNone
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return engine.ErrSyntax
		}
		v := args[i+1]
		switch {
		case equalFoldString(args[i], "match"):
			pattern = v
		case equalFoldString(args[i], "count"):
			n, err := engine.ParseInt(v)
			if err != nil {
				return err
			}
			if n < 1 {
				return engine.ErrSyntax
			}
			count = int(min(n, 1<<20))
		case equalFoldString(args[i], "type"):
			k, ok := engine.ParseKind(string(v))
			if !ok || k == engine.KindNone {
				return &textError{"ERR unknown type name '" + string(clip(v)) + "'"}
			}
			kind = k
		default:
			return engine.ErrSyntax
		}
	}
	now, err := c.readNow()
	if err != nil {
		return err
	}
	saved := c.out
	c.out = c.tmp[:0]
	n := 0
	next := c.srv.backend.Store().Scan(cursor, count, now, func(key []byte, k engine.Kind) {
		if (kind == engine.KindNone || k == kind) && (pattern == nil || globMatch(pattern, key)) {
			c.WriteBulk(key)
			n++
		}
	})
	body := c.out
	c.out = saved
	c.WriteArray(2)
	c.WriteBulk(strconv.AppendUint(nil, next, 10))
	c.WriteArray(n)
	c.out = append(c.out, body...)
	c.tmp = shrink(body)
	return nil
}

// shrink keeps a scratch buffer for reuse unless it grew large.
func shrink(b []byte) []byte {
	if cap(b) > 1<<20 {
		return nil
	}
	return b[:0]
}

// equalFoldString compares b with a lower-case ASCII word, ignoring case.
func equalFoldString(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
