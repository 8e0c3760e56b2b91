package resp

import (
	"bytes"
	"errors"
	"io"

	"github.com/cellserver/cellserver/internal/splitargs"
)

// Protocol limits. Input beyond them is a protocol error: the client gets an
// error reply and the connection is closed, as Redis does, so that no client
// can make the server loop over a forged length or buffer without bound.
const (
	// maxInlineLen bounds an inline command line and a RESP length line
	// (Redis's PROTO_INLINE_MAX_SIZE).
	maxInlineLen = 64 << 10
	// defaultMaxArgs bounds the arguments of one command.
	defaultMaxArgs = 1 << 20
	// initialReadBuf is a connection's starting read buffer; it grows for
	// large commands and shrinks back once they are consumed.
	initialReadBuf = 16 << 10
	// Before authenticating, a client may send at most unauthMaxArgs
	// arguments per command and unauthMaxBulk bytes per argument (Redis 7's
	// limits), one command at a time.
	unauthMaxArgs = 10
	unauthMaxBulk = 16384
	// keepScratch is the capacity of the argument lists kept between
	// batches; a larger command's lists are released after it.
	keepScratch = 4096
	// noQueryLimit is a reader's query buffer limit until its connection
	// sets client-query-buffer-limit's (refreshLimits).
	noQueryLimit = 1 << 40
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
	errUnauthMultibulk  = &protocolError{"unauthenticated multibulk length"}
	errUnauthBulk       = &protocolError{"unauthenticated bulk length"}
)

// errQueryLimit is a client whose unparsed input passed
// client-query-buffer-limit. As Redis does, the server closes it without a
// reply.
var errQueryLimit = errors.New("query buffer limit reached")

// span is one parsed command: args[lo:hi] of the reader's argument list.
type span struct{ lo, hi int }

// reader parses RESP and inline commands from a connection without
// allocating in the steady state: arguments are slices of its buffer, valid
// until the next call to next. It parses every complete command already
// received, so that a pipeline is handed over as one batch.
//
// The limits are fields that the connection refreshes before each batch
// (they can change live). A multibulk command that arrives in pieces is
// parsed incrementally: the arguments already complete are not parsed
// again when more input arrives, so a command sent a byte at a time costs
// linear time, not quadratic.
type reader struct {
	rd   io.Reader
	buf  []byte
	r, w int // unread input is buf[r:w]
	args [][]byte
	cmds []span
	err  error // a protocol error met after the commands of the batch

	maxBulk  int
	maxArgs  int
	maxQuery int  // client-query-buffer-limit (noQueryLimit until set)
	maxBatch int  // most commands per batch (0: every complete command)
	unauth   bool // the client has not authenticated: Redis's tighter limits
	// beforeRead, when set, is called before each read from the
	// connection; partial tells whether part of a command is pending.
	beforeRead func(partial bool)

	// The multibulk command being received, when pend is true: its
	// argument count, the arguments complete so far (offsets from the
	// command's first byte, buf[r]) and the offset of the next one.
	pend      bool
	pendCount int
	pendPos   int
	pendArgs  []argSpan
	// scanned is how far (from buf[r]) an incomplete inline command has
	// been searched for its newline, so that a line arriving a byte at a
	// time is scanned once.
	scanned int
}

// argSpan is an argument's place in the pending command.
type argSpan struct{ lo, hi int }

func newReader(rd io.Reader, maxBulk, maxArgs int) *reader {
	return &reader{rd: rd, buf: make([]byte, initialReadBuf), maxBulk: maxBulk, maxArgs: maxArgs, maxQuery: noQueryLimit}
}

// next returns the commands of the next batch: every complete command in the
// input, reading from the connection only when there is none. Commands
// received before a protocol error are returned first; the error comes on
// the following call.
func (rd *reader) next() ([]span, error) {
	if cap(rd.args) > keepScratch {
		rd.args = nil
	}
	if cap(rd.pendArgs) > keepScratch && !rd.pend {
		rd.pendArgs = nil
	}
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
		if rd.w-rd.r > rd.maxQuery {
			return nil, errQueryLimit
		}
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
			// Grow, but never much past the query buffer limit: a client
			// can make the server hold at most that much for it.
			nb := make([]byte, min(2*len(rd.buf), rd.maxQuery+initialReadBuf))
			copy(nb, rd.buf[:rd.w])
			rd.buf = nb
		}
		if rd.beforeRead != nil {
			rd.beforeRead(rd.w > rd.r)
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
		rd.scanned = 0
		if len(rd.args) > lo {
			rd.cmds = append(rd.cmds, span{lo, len(rd.args)})
			if rd.maxBatch > 0 && len(rd.cmds) >= rd.maxBatch {
				return nil // the rest waits for the next batch
			}
			if rd.unauth {
				// One command at a time until AUTH has run, so that the
				// limits above apply to every command before it.
				return nil
			}
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
// bytes consumed, 0 when the command is not complete yet (its complete
// arguments are remembered in pend*, so the next call resumes after them).
func (rd *reader) parseMultibulk(b []byte) (int, error) {
	if !rd.pend {
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
		if rd.unauth && count > unauthMaxArgs {
			return 0, errUnauthMultibulk
		}
		if count <= 0 {
			// An empty command, skipped as Redis does.
			return pos, nil
		}
		rd.pend, rd.pendCount, rd.pendPos = true, count, pos
		rd.pendArgs = rd.pendArgs[:0]
	}
	maxBulk := rd.maxBulk
	if rd.unauth {
		maxBulk = min(maxBulk, unauthMaxBulk)
	}
	for len(rd.pendArgs) < rd.pendCount {
		pos := rd.pendPos
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
		if size > maxBulk {
			return 0, errUnauthBulk
		}
		start := pos + end
		if len(b)-start < size+2 {
			return 0, nil
		}
		if b[start+size] != '\r' || b[start+size+1] != '\n' {
			return 0, errInvalidBulk
		}
		rd.pendArgs = append(rd.pendArgs, argSpan{start, start + size})
		rd.pendPos = start + size + 2
	}
	for _, a := range rd.pendArgs {
		rd.args = append(rd.args, b[a.lo:a.hi:a.hi])
	}
	rd.pend = false
	return rd.pendPos, nil
}

func printable(c byte) string {
	if c < 0x20 || c >= 0x7f {
		return "\\x" + string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&15])
	}
	return string(c)
}

// parseInline parses one line of space-separated arguments, with Redis's
// quoting rules (internal/splitargs, shared with configuration lines).
// Unescaping happens in place: the output never outgrows the input.
func (rd *reader) parseInline(b []byte) (int, error) {
	nl := bytes.IndexByte(b[rd.scanned:], '\n')
	if nl < 0 {
		if len(b) > maxInlineLen {
			return 0, errBigInline
		}
		rd.scanned = len(b)
		return 0, nil
	}
	nl += rd.scanned
	line := b[:nl]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	args, err := splitargs.Split(rd.args, line)
	if err != nil {
		return 0, errUnbalanced // Redis words both quote errors so
	}
	rd.args = args
	if len(rd.args) > rd.maxArgs {
		return 0, errInvalidMultibulk
	}
	return nl + 1, nil
}
