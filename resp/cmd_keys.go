package resp

import (
	"strconv"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

func delPrepare(c *Conn, args [][]byte, op *shards.Op) error {
	op.Code = shards.OpDel
	op.Keys = append(op.Keys, args[1:]...)
	return nil
}

func delFinish(c *Conn, _ [][]byte, res *shards.Result) { c.WriteInt(res.N) }

func existsHandler(c *Conn, args [][]byte) error {
	now, err := c.readNow()
	if err != nil {
		return err
	}
	c.WriteInt(c.srv.backend.Store().Exists(args[1:], now))
	return nil
}

func typeHandler(c *Conn, args [][]byte) error {
	st, _, err := c.lookup(args[1])
	if err != nil {
		return err
	}
	c.WriteSimple(st.Kind.String())
	return nil
}

func getHandler(c *Conn, args [][]byte) error {
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
}

func dbsizeHandler(c *Conn, _ [][]byte) error {
	now, err := c.readNow()
	if err != nil {
		return err
	}
	c.WriteInt(int64(c.srv.backend.Store().Len(now)))
	return nil
}

func keysHandler(c *Conn, args [][]byte) error {
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
}

// flushPrepare makes FLUSHALL and FLUSHDB one OpFlush.
func flushPrepare(c *Conn, args [][]byte, op *shards.Op) error {
	if len(args) == 2 && !equalFoldString(args[1], "async") && !equalFoldString(args[1], "sync") {
		return engine.ErrSyntax
	}
	op.Code = shards.OpFlush
	return nil
}

func flushFinish(c *Conn, _ [][]byte, _ *shards.Result) { c.WriteOK() }

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
		st, ok, err := c.lookup(args[1])
		switch {
		case err != nil:
			return err
		case !ok:
			c.WriteInt(-2)
			return nil
		}
		ms := engine.CeilMillis(st.ExpireAt - c.now) // c.now: the instant lookup read at
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
				return refusal(refuseTypeName, string(clip(v)))
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
