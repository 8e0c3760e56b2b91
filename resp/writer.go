package resp

import (
	"strconv"

	"github.com/cellserver/cellserver/internal/reply"
)

// Reply is a connection's reply encoding: every reply byte is appended
// here, to the connection's output buffer, so that RESP2 and RESP3 differ
// in one place. Replies go out when a batch is done (or the buffer grows
// large), one write per batch (outbuf.go). Conn embeds it: a handler
// writes its reply with c.WriteInt, c.WriteBulk, ...
type Reply struct {
	out   []byte
	proto int // 2 or 3
}

// WriteInt appends an integer reply.
func (c *Reply) WriteInt(n int64) {
	c.out = append(c.out, ':')
	c.out = strconv.AppendInt(c.out, n, 10)
	c.out = append(c.out, '\r', '\n')
}

// WriteBulk appends a bulk string reply.
func (c *Reply) WriteBulk(b []byte) { c.out = appendBulk(c.out, b) }

// WriteBulkString appends a bulk string reply.
func (c *Reply) WriteBulkString(s string) { c.out = appendBulk(c.out, s) }

func appendBulk[T string | []byte](out []byte, b T) []byte {
	out = append(out, '$')
	out = strconv.AppendInt(out, int64(len(b)), 10)
	out = append(out, '\r', '\n')
	out = append(out, b...)
	return append(out, '\r', '\n')
}

// WriteBulkInt appends n as a bulk string (as TIME and SCAN's cursor are).
func (c *Reply) WriteBulkInt(n int64) {
	var tmp [20]byte
	c.WriteBulk(strconv.AppendInt(tmp[:0], n, 10))
}

// WriteSimple appends a simple string reply such as OK. s must not contain
// CR or LF.
func (c *Reply) WriteSimple(s string) {
	c.out = append(c.out, '+')
	c.out = append(c.out, s...)
	c.out = append(c.out, '\r', '\n')
}

// WriteOK appends +OK.
func (c *Reply) WriteOK() { c.out = append(c.out, "+OK\r\n"...) }

// WriteArray appends an array header of n elements; the elements follow.
func (c *Reply) WriteArray(n int) { c.header('*', n) }

// WriteMap appends a map header of n key/value pairs: a RESP3 map, or in
// RESP2 a flat array of 2n elements, as Redis does.
func (c *Reply) WriteMap(n int) { c.header(pick(c.proto, byte('%'), '*'), pick(c.proto, n, 2*n)) }

// WriteSet appends a set header of n elements (a RESP3 set, a RESP2 array).
func (c *Reply) WriteSet(n int) { c.header(pick(c.proto, byte('~'), '*'), n) }

// WriteNull appends the null reply (RESP2's nil bulk string, RESP3's _).
func (c *Reply) WriteNull() { c.out = append(c.out, pick(c.proto, "_\r\n", "$-1\r\n")...) }

// WriteNullArray appends the null array (RESP2's *-1, RESP3's _).
func (c *Reply) WriteNullArray() { c.out = append(c.out, pick(c.proto, "_\r\n", "*-1\r\n")...) }

// pick returns resp3 on a RESP3 connection, else resp2.
func pick[T any](proto int, resp3, resp2 T) T {
	if proto >= 3 {
		return resp3
	}
	return resp2
}

// WriteError appends the error reply for err; see appendErrorText.
func (c *Reply) WriteError(err error) { c.out = appendErrorReply(c.out, err) }

// appendErrorReply appends err as a RESP error reply: '-', its wording
// (appendErrorText), CRLF.
func appendErrorReply(b []byte, err error) []byte {
	b = append(b, '-')
	b = appendErrorText(b, err)
	return append(b, '\r', '\n')
}

func (c *Reply) header(kind byte, n int) {
	c.out = append(c.out, kind)
	c.out = strconv.AppendInt(c.out, int64(n), 10)
	c.out = append(c.out, '\r', '\n')
}

// WriteDouble appends a double reply: RESP3's double, or in RESP2 a bulk
// string of the shortest decimal that reads back as f, as Redis does.
func (c *Reply) WriteDouble(f float64) {
	if c.proto >= 3 {
		c.out = append(c.out, ',')
		c.out = strconv.AppendFloat(c.out, f, 'g', -1, 64)
		c.out = append(c.out, '\r', '\n')
		return
	}
	var tmp [32]byte
	c.WriteBulk(strconv.AppendFloat(tmp[:0], f, 'g', -1, 64))
}

// WriteNode appends a reply described as data (internal/reply), in the
// connection's protocol.
func (c *Reply) WriteNode(n reply.Node) {
	switch n.Kind {
	case reply.KindArray:
		c.WriteArray(len(n.Elems))
	case reply.KindMap:
		c.WriteMap(len(n.Elems) / 2)
	case reply.KindSet:
		c.WriteSet(len(n.Elems))
	case reply.KindBulk:
		c.WriteBulkString(n.Str)
	case reply.KindSimple:
		c.WriteSimple(n.Str)
	case reply.KindInt:
		c.WriteInt(n.Int)
	case reply.KindNull:
		c.WriteNull()
	}
	for _, e := range n.Elems {
		c.WriteNode(e)
	}
}
