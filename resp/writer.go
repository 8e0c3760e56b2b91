package resp

import "strconv"

// Reply encoding. Every reply byte is appended here, to the connection's
// output buffer, so that RESP2 and RESP3 differ in one place. Replies go out
// when a batch is done (or the buffer grows large), one write per batch.

// WriteInt appends an integer reply.
func (c *Conn) WriteInt(n int64) {
	c.out = append(c.out, ':')
	c.out = strconv.AppendInt(c.out, n, 10)
	c.out = append(c.out, '\r', '\n')
}

// WriteBulk appends a bulk string reply.
func (c *Conn) WriteBulk(b []byte) {
	c.out = append(c.out, '$')
	c.out = strconv.AppendInt(c.out, int64(len(b)), 10)
	c.out = append(c.out, '\r', '\n')
	c.out = append(c.out, b...)
	c.out = append(c.out, '\r', '\n')
}

// WriteBulkString appends a bulk string reply.
func (c *Conn) WriteBulkString(s string) {
	c.out = append(c.out, '$')
	c.out = strconv.AppendInt(c.out, int64(len(s)), 10)
	c.out = append(c.out, '\r', '\n')
	c.out = append(c.out, s...)
	c.out = append(c.out, '\r', '\n')
}

// WriteBulkInt appends n as a bulk string (as TIME and SCAN's cursor are).
func (c *Conn) WriteBulkInt(n int64) {
	var tmp [20]byte
	c.WriteBulk(strconv.AppendInt(tmp[:0], n, 10))
}

// WriteSimple appends a simple string reply such as OK. s must not contain
// CR or LF.
func (c *Conn) WriteSimple(s string) {
	c.out = append(c.out, '+')
	c.out = append(c.out, s...)
	c.out = append(c.out, '\r', '\n')
}

// WriteOK appends +OK.
func (c *Conn) WriteOK() { c.out = append(c.out, "+OK\r\n"...) }

// WriteArray appends an array header of n elements; the elements follow.
func (c *Conn) WriteArray(n int) { c.header('*', n) }

// WriteMap appends a map header of n key/value pairs: a RESP3 map, or in
// RESP2 a flat array of 2n elements, as Redis does.
func (c *Conn) WriteMap(n int) {
	if c.proto >= 3 {
		c.header('%', n)
	} else {
		c.header('*', 2*n)
	}
}

// WriteSet appends a set header of n elements (a RESP3 set, a RESP2 array).
func (c *Conn) WriteSet(n int) {
	if c.proto >= 3 {
		c.header('~', n)
	} else {
		c.header('*', n)
	}
}

// WriteNull appends the null reply (RESP2's nil bulk string, RESP3's _).
func (c *Conn) WriteNull() {
	if c.proto >= 3 {
		c.out = append(c.out, "_\r\n"...)
	} else {
		c.out = append(c.out, "$-1\r\n"...)
	}
}

// WriteNullArray appends the null array (RESP2's *-1, RESP3's _).
func (c *Conn) WriteNullArray() {
	if c.proto >= 3 {
		c.out = append(c.out, "_\r\n"...)
	} else {
		c.out = append(c.out, "*-1\r\n"...)
	}
}

// WriteError appends the error reply for err; see appendErrorText.
func (c *Conn) WriteError(err error) { c.out = appendErrorReply(c.out, err) }

// appendErrorReply appends err as a RESP error reply: '-', its wording
// (appendErrorText), CRLF.
func appendErrorReply(b []byte, err error) []byte {
	b = append(b, '-')
	b = appendErrorText(b, err)
	return append(b, '\r', '\n')
}

func (c *Conn) header(kind byte, n int) {
	c.out = append(c.out, kind)
	c.out = strconv.AppendInt(c.out, int64(n), 10)
	c.out = append(c.out, '\r', '\n')
}

// WriteDouble appends a double reply: RESP3's double, or in RESP2 a bulk
// string of the shortest decimal that reads back as f, as Redis does.
func (c *Conn) WriteDouble(f float64) {
	if c.proto >= 3 {
		c.out = append(c.out, ',')
		c.out = strconv.AppendFloat(c.out, f, 'g', -1, 64)
		c.out = append(c.out, '\r', '\n')
		return
	}
	var tmp [32]byte
	c.WriteBulk(strconv.AppendFloat(tmp[:0], f, 'g', -1, 64))
}
