package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// maxDepth bounds the nesting of aggregate replies, so a hostile or broken
// server cannot make the reader recurse without end.
const maxDepth = 64

// errProtocol marks a reply that is not valid RESP.
var errProtocol = errors.New("resp: protocol error")

// replyReader reads RESP2 and RESP3 replies from a buffered connection.
type replyReader struct {
	r *bufio.Reader
}

// line returns the next line without its CRLF. The slice is valid until the
// next read. A line longer than the buffer (a huge simple string or error) is
// gathered into a fresh slice; only that rare case allocates.
func (rr *replyReader) line() ([]byte, error) {
	b, err := rr.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		long := append([]byte(nil), b...)
		for err == bufio.ErrBufferFull {
			b, err = rr.r.ReadSlice('\n')
			long = append(long, b...)
		}
		b = long
	}
	if err != nil {
		return nil, fmt.Errorf("resp: read line: %w", unexpectedEOF(err))
	}
	if len(b) < 3 || b[len(b)-2] != '\r' {
		return nil, fmt.Errorf("%w: line %q", errProtocol, b)
	}
	return b[:len(b)-2], nil
}

// unexpectedEOF turns io.EOF inside a reply into io.ErrUnexpectedEOF: the
// server closed the connection before the reply was whole.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseInt parses a decimal length or integer without allocating.
func parseInt(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, fmt.Errorf("%w: empty number", errProtocol)
	}
	neg := b[0] == '-'
	if neg || b[0] == '+' {
		b = b[1:]
		if len(b) == 0 {
			return 0, fmt.Errorf("%w: bare sign", errProtocol)
		}
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' || n > (1<<62)/10 {
			return 0, fmt.Errorf("%w: bad number %q", errProtocol, b)
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}

// skip consumes one whole reply. isErr is true when the reply itself is an
// error (`-` or RESP3 `!`); errors nested inside an array are part of a
// successful reply (as in EXEC) and do not count. When isErr is true, msg
// holds the start of the error text, valid until the next read.
func (rr *replyReader) skip() (isErr bool, msg []byte, err error) {
	return rr.skipDepth(0)
}

func (rr *replyReader) skipDepth(depth int) (bool, []byte, error) {
	if depth > maxDepth {
		return false, nil, fmt.Errorf("%w: replies nested deeper than %d", errProtocol, maxDepth)
	}
	b, err := rr.line()
	if err != nil {
		return false, nil, err
	}
	switch b[0] {
	case '-':
		return true, b[1:], nil
	case '+', ':', '_', ',', '#', '(':
		return false, nil, nil
	case '$', '=', '!':
		n, err := parseInt(b[1:])
		if err != nil {
			return false, nil, err
		}
		if n < 0 {
			return false, nil, nil // nil bulk string
		}
		if b[0] == '!' {
			// A RESP3 blob error: keep its start as the message.
			peek, _ := rr.r.Peek(int(min(n, 128)))
			msg := append([]byte(nil), peek...)
			if _, err := rr.r.Discard(int(n) + 2); err != nil {
				return false, nil, fmt.Errorf("resp: read blob error: %w", unexpectedEOF(err))
			}
			return true, msg, nil
		}
		if _, err := rr.r.Discard(int(n) + 2); err != nil {
			return false, nil, fmt.Errorf("resp: read bulk string: %w", unexpectedEOF(err))
		}
		return false, nil, nil
	case '*', '~', '>', '%', '|':
		n, err := parseInt(b[1:])
		if err != nil {
			return false, nil, err
		}
		if b[0] == '%' || b[0] == '|' {
			n *= 2 // maps and attributes hold key, value pairs
		}
		for i := int64(0); i < n; i++ {
			if _, _, err := rr.skipDepth(depth + 1); err != nil {
				return false, nil, err
			}
		}
		if b[0] == '|' {
			// An attribute precedes the reply it describes.
			return rr.skipDepth(depth)
		}
		return false, nil, nil
	default:
		return false, nil, fmt.Errorf("%w: unexpected reply type %q", errProtocol, b[0])
	}
}

// replyError is an error reply, as a value.
type replyError string

func (e replyError) Error() string { return string(e) }

// value reads one reply into Go values: string for simple and bulk strings,
// int64 for integers, nil for nil replies, []any for arrays, replyError for
// errors. It allocates, so it serves set-up (AUTH, SCRIPT LOAD) and tests,
// never the measured loop.
func (rr *replyReader) value() (any, error) {
	return rr.valueDepth(0)
}

func (rr *replyReader) valueDepth(depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: replies nested deeper than %d", errProtocol, maxDepth)
	}
	b, err := rr.line()
	if err != nil {
		return nil, err
	}
	switch b[0] {
	case '-':
		return replyError(b[1:]), nil
	case '+':
		return string(b[1:]), nil
	case ':':
		return parseInt(b[1:])
	case '_':
		return nil, nil
	case '$':
		n, err := parseInt(b[1:])
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rr.r, buf); err != nil {
			return nil, fmt.Errorf("resp: read bulk string: %w", unexpectedEOF(err))
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return nil, fmt.Errorf("%w: bulk string not ended by CRLF", errProtocol)
		}
		return string(buf[:n]), nil
	case '*':
		n, err := parseInt(b[1:])
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, 0, min(n, 1024))
		for i := int64(0); i < n; i++ {
			v, err := rr.valueDepth(depth + 1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%w: reply type %q not supported here (the generator speaks RESP2)", errProtocol, b[0])
	}
}

// do sends one command (no key) and reads its reply as a value; for set-up.
func do(w *bufio.Writer, rr *replyReader, args ...string) (any, error) {
	buf := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		buf = append(buf, '$')
		buf = strconv.AppendInt(buf, int64(len(a)), 10)
		buf = append(buf, "\r\n"...)
		buf = append(buf, a...)
		buf = append(buf, "\r\n"...)
	}
	if _, err := w.Write(buf); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	v, err := rr.value()
	if err != nil {
		return nil, err
	}
	if e, ok := v.(replyError); ok {
		return nil, e
	}
	return v, nil
}
