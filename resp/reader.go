package resp

import (
	"bytes"
	"errors"
	"io"
)

// Protocol limits. Input beyond them is a protocol error: the client gets an
// error reply and the connection is closed, as Redis does, so that no client
// can make the server loop over a forged length or buffer without bound.
const (
	// maxInlineLen bounds an inline command line and a RESP length line
	// (Redis's PROTO_INLINE_MAX_SIZE).
	maxInlineLen = 64 << 10
	// defaultMaxBulkLen bounds one argument (Redis's proto-max-bulk-len).
	defaultMaxBulkLen = 512 << 20
	// defaultMaxArgs bounds the arguments of one command.
	defaultMaxArgs = 1 << 20
	// initialReadBuf is a connection's starting read buffer; it grows for
	// large commands and shrinks back once they are consumed.
	initialReadBuf = 16 << 10
)

// protocolError is malformed input. Its text is the reply, in Redis's wording.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return "Protocol error: " + e.msg }

var (
	errInvalidMultibulk = &protocolError{"invalid multibulk length"}
	errInvalidBulk      = &protocolError{"invalid bulk length"}
	errBigInline        = &protocolError{"too big inline request"}
	errBigCount         = &protocolError{"too big mbulk count string"}
	errBigBulkCount     = &protocolError{"too big bulk count string"}
	errUnbalanced       = &protocolError{"unbalanced quotes in request"}
)

// span is one parsed command: args[lo:hi] of the reader's argument list.
type span struct{ lo, hi int }

// reader parses RESP and inline commands from a connection without
// allocating in the steady state: arguments are slices of its buffer, valid
// until the next call to next. It parses every complete command already
// received, so that a pipeline is handed over as one batch.
type reader struct {
	rd      io.Reader
	buf     []byte
	r, w    int // unread input is buf[r:w]
	args    [][]byte
	cmds    []span
	err     error // a protocol error met after the commands of the batch
	maxBulk int
	maxArgs int
}

func newReader(rd io.Reader, maxBulk, maxArgs int) *reader {
	return &reader{rd: rd, buf: make([]byte, initialReadBuf), maxBulk: maxBulk, maxArgs: maxArgs}
}

// next returns the commands of the next batch: every complete command in the
// input, reading from the connection only when there is none. Commands
// received before a protocol error are returned first; the error comes on
// the following call.
func (rd *reader) next() ([]span, error) {
	rd.args = rd.args[:0]
	rd.cmds = rd.cmds[:0]
	for {
		if rd.err == nil {
			rd.err = rd.parse()
		}
		if len(rd.cmds) > 0 {
			return rd.cmds, nil
		}
		if rd.err != nil {
			return nil, rd.err
		}
		// Nothing complete: make room and read more. No argument refers to
		// the buffer now, so it may move.
		if rd.r == rd.w {
			rd.r, rd.w = 0, 0
			if len(rd.buf) > 4*initialReadBuf {
				rd.buf = make([]byte, initialReadBuf)
			}
		} else if rd.r > 0 {
			rd.w = copy(rd.buf, rd.buf[rd.r:rd.w])
			rd.r = 0
		}
		if rd.w == len(rd.buf) {
			nb := make([]byte, 2*len(rd.buf))
			copy(nb, rd.buf[:rd.w])
			rd.buf = nb
		}
		n, err := rd.rd.Read(rd.buf[rd.w:])
		rd.w += n
		if err != nil && n == 0 {
			return nil, err
		}
	}
}

// parse appends the complete commands of buf[r:w] to cmds. It stops at the
// first incomplete command (nil) or at malformed input (the error).
func (rd *reader) parse() error {
	for rd.r < rd.w {
		b := rd.buf[rd.r:rd.w]
		var n int
		var err error
		lo := len(rd.args)
		if b[0] == '*' {
			n, err = rd.parseMultibulk(b)
		} else {
			n, err = rd.parseInline(b)
		}
		if err != nil || n == 0 {
			rd.args = rd.args[:lo]
			return err
		}
		rd.r += n
		if len(rd.args) > lo {
			rd.cmds = append(rd.cmds, span{lo, len(rd.args)})
		}
	}
	return nil
}

// readLine returns the length line starting at b[0] (without its marker and
// "\r\n") and the offset just past it; end 0 means incomplete.
func readLine(b []byte, tooBig error) (line []byte, end int, err error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		if len(b) > maxInlineLen {
			return nil, 0, tooBig
		}
		return nil, 0, nil
	}
	if i < 2 || b[i-1] != '\r' {
		return nil, 0, errInvalidLine
	}
	return b[1 : i-1], i + 1, nil
}

var errInvalidLine = errors.New("invalid line")

// parseLen parses a decimal length, refusing overflow and anything above max.
func parseLen(b []byte, max int) (int, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
		if n > max {
			return 0, false
		}
	}
	if neg {
		return -n, true
	}
	return n, true
}

// parseMultibulk parses "*N\r\n" followed by N bulk strings. It returns the
// bytes consumed, 0 when the command is not complete yet.
func (rd *reader) parseMultibulk(b []byte) (int, error) {
	line, pos, err := readLine(b, errBigCount)
	if err != nil {
		return 0, errInvalidMultibulk
	}
	if pos == 0 {
		return 0, nil
	}
	count, ok := parseLen(line, rd.maxArgs)
	if !ok {
		return 0, errInvalidMultibulk
	}
	// A count of zero or less is an empty command, skipped as Redis does.
	for i := 0; i < count; i++ {
		if pos >= len(b) {
			return 0, nil
		}
		if b[pos] != '$' {
			return 0, &protocolError{"expected '$', got '" + printable(b[pos]) + "'"}
		}
		line, end, err := readLine(b[pos:], errBigBulkCount)
		if err != nil {
			if err == errBigBulkCount {
				return 0, err
			}
			return 0, errInvalidBulk
		}
		if end == 0 {
			return 0, nil
		}
		size, ok := parseLen(line, rd.maxBulk)
		if !ok || size < 0 {
			return 0, errInvalidBulk
		}
		start := pos + end
		if len(b)-start < size+2 {
			return 0, nil
		}
		if b[start+size] != '\r' || b[start+size+1] != '\n' {
			return 0, errInvalidBulk
		}
		rd.args = append(rd.args, b[start:start+size:start+size])
		pos = start + size + 2
	}
	return pos, nil
}

func printable(c byte) string {
	if c < 0x20 || c >= 0x7f {
		return "\\x" + string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&15])
	}
	return string(c)
}

// parseInline parses one line of space-separated arguments, with Redis's
// quoting rules ("..." with \n \r \t \b \a \\ \" \xHH escapes, '...' with \').
// Unescaping happens in place: the output never outgrows the input.
func (rd *reader) parseInline(b []byte) (int, error) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		if len(b) > maxInlineLen {
			return 0, errBigInline
		}
		return 0, nil
	}
	line := b[:nl]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return nl + 1, nil
		}
		start, out := i, i
		switch line[i] {
		case '"':
			i++
			for {
				if i >= len(line) {
					return 0, errUnbalanced
				}
				c := line[i]
				if c == '"' {
					i++
					break
				}
				if c == '\\' && i+1 < len(line) {
					i++
					switch e := line[i]; e {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					case 'b':
						c = '\b'
					case 'a':
						c = '\a'
					case 'x':
						if i+2 < len(line) && isHex(line[i+1]) && isHex(line[i+2]) {
							c = unhex(line[i+1])<<4 | unhex(line[i+2])
							i += 2
						} else {
							c = 'x'
						}
					default:
						c = e
					}
				}
				line[out] = c
				out++
				i++
			}
			if i < len(line) && !isSpace(line[i]) {
				return 0, errUnbalanced
			}
		case '\'':
			i++
			for {
				if i >= len(line) {
					return 0, errUnbalanced
				}
				c := line[i]
				if c == '\'' {
					i++
					break
				}
				if c == '\\' && i+1 < len(line) && line[i+1] == '\'' {
					i++
					c = '\''
				}
				line[out] = c
				out++
				i++
			}
			if i < len(line) && !isSpace(line[i]) {
				return 0, errUnbalanced
			}
		default:
			for i < len(line) && !isSpace(line[i]) {
				i++
			}
			out = i
		}
		rd.args = append(rd.args, line[start:out:out])
		if len(rd.args) > rd.maxArgs {
			return 0, errInvalidMultibulk
		}
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}
func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
