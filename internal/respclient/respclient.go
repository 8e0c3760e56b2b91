package respclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// Errors of a Client. I/O failures are returned wrapped in an *IOError;
// an error reply of the peer is a *ReplyError (replyerr.go), not a failure
// of the connection.
var (
	// ErrProtocol: the peer sent something that is not a RESP2 reply.
	ErrProtocol = errors.New("respclient: protocol error")
	// ErrTooLarge: a reply line, bulk string, array or nesting beyond the
	// Config's bounds.
	ErrTooLarge = errors.New("respclient: reply too large")
)

// IOError is a failure to dial, write or read. Op is "dial", "write" or
// "read"; after a failed write or read the peer may have received some or
// all of what was sent.
type IOError struct {
	Op   string
	Addr string
	Err  error
}

func (e *IOError) Error() string { return "respclient: " + e.Op + " " + e.Addr + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *IOError) Unwrap() error { return e.Err }

// Defaults of Config's bounds.
const (
	DefaultTimeout  = 5 * time.Second
	DefaultMaxLine  = 64 << 10
	DefaultMaxBulk  = 1 << 20
	DefaultMaxArray = 1 << 16
	DefaultMaxDepth = 8
)

// Config bounds a Client. Zero fields take the defaults above.
type Config struct {
	// Timeout bounds the dial, each write and each reply as a whole (not
	// each read of it).
	Timeout time.Duration
	// MaxLine bounds a reply line (simple string, error, integer, header)
	// in bytes, CRLF included.
	MaxLine int
	// MaxBulk bounds a bulk string in bytes.
	MaxBulk int
	// MaxArray bounds the elements of one array.
	MaxArray int
	// MaxDepth bounds the nesting of arrays.
	MaxDepth int
	// Username and Password, when Password is set, are sent as AUTH
	// [username] password right after the dial.
	Username, Password string
	// TLS, when not nil, makes the connection TLS with this client
	// configuration (its ServerName defaults to addr's host); the
	// handshake counts in the dial's Timeout.
	TLS *tls.Config
}

func (c *Config) defaults() {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxLine <= 0 {
		c.MaxLine = DefaultMaxLine
	}
	if c.MaxBulk <= 0 {
		c.MaxBulk = DefaultMaxBulk
	}
	if c.MaxArray <= 0 {
		c.MaxArray = DefaultMaxArray
	}
	if c.MaxDepth <= 0 {
		c.MaxDepth = DefaultMaxDepth
	}
}

// Kind is the type of a reply.
type Kind byte

// The reply kinds.
const (
	Simple  Kind = '+'
	Error   Kind = '-'
	Integer Kind = ':'
	Bulk    Kind = '$'
	Array   Kind = '*'
	Null    Kind = '_' // a null bulk string or null array
)

// Value is one reply: Str for a simple string, error or bulk string, Int
// for an integer, Elems for an array.
type Value struct {
	Kind  Kind
	Str   string
	Int   int64
	Elems []Value
}

// Err returns the reply as a *ReplyError when it is an error reply
// (decoded by DecodeError: errors.Is and errors.As find its typed error),
// nil otherwise.
func (v Value) Err() error {
	if v.Kind == Error {
		return DecodeError(v.Str)
	}
	return nil
}

// Client is one connection to a RESP server. Not safe for concurrent use.
type Client struct {
	nc   net.Conn
	addr string
	cfg  Config
	r    *bufio.Reader
	out  []byte
	stop func() bool
}

// Dial connects to addr within the timeout (and ctx), then authenticates
// when cfg.Password is set. Cancelling ctx later also breaks the
// connection's pending I/O, until Close.
func Dial(ctx context.Context, addr string, cfg Config) (*Client, error) {
	cfg.defaults()
	d := net.Dialer{Timeout: cfg.Timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &IOError{Op: "dial", Addr: addr, Err: err}
	}
	if cfg.TLS != nil {
		tc := cfg.TLS
		if tc.ServerName == "" {
			tc = tc.Clone()
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		conn := tls.Client(nc, tc)
		hctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		err := conn.HandshakeContext(hctx)
		cancel()
		if err != nil {
			nc.Close()
			return nil, &IOError{Op: "tls handshake", Addr: addr, Err: err}
		}
		nc = conn
	}
	c := &Client{nc: nc, addr: addr, cfg: cfg, r: bufio.NewReaderSize(nc, 4096)}
	c.stop = context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	if cfg.Password != "" {
		args := [][]byte{[]byte("AUTH")}
		if cfg.Username != "" {
			args = append(args, []byte(cfg.Username))
		}
		v, err := c.Do(append(args, []byte(cfg.Password))...)
		if err == nil {
			err = v.Err()
		}
		if err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error {
	c.stop()
	return c.nc.Close()
}

// Send queues one command, an array of bulk strings, for the next Flush.
func (c *Client) Send(args ...[]byte) {
	c.out = append(c.out, '*')
	c.out = strconv.AppendInt(c.out, int64(len(args)), 10)
	c.out = append(c.out, "\r\n"...)
	for _, a := range args {
		c.out = append(c.out, '$')
		c.out = strconv.AppendInt(c.out, int64(len(a)), 10)
		c.out = append(c.out, "\r\n"...)
		c.out = append(c.out, a...)
		c.out = append(c.out, "\r\n"...)
	}
}

// Flush writes the queued commands within the timeout.
func (c *Client) Flush() error {
	if len(c.out) == 0 {
		return nil
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.cfg.Timeout))
	_, err := c.nc.Write(c.out)
	c.out = c.out[:0]
	if err != nil {
		return &IOError{Op: "write", Addr: c.addr, Err: err}
	}
	return nil
}

// Read reads one reply, which must arrive whole within the timeout. An
// error reply is a Value of Kind Error, not an error.
func (c *Client) Read() (Value, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.cfg.Timeout))
	v, err := c.value(0)
	if err != nil && !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrTooLarge) {
		err = &IOError{Op: "read", Addr: c.addr, Err: err}
	}
	return v, err
}

// Do sends one command and reads its reply.
func (c *Client) Do(args ...[]byte) (Value, error) {
	c.Send(args...)
	if err := c.Flush(); err != nil {
		return Value{}, err
	}
	return c.Read()
}

func (c *Client) value(depth int) (Value, error) {
	line, err := c.line()
	if err != nil {
		return Value{}, err
	}
	if len(line) == 0 {
		return Value{}, fmt.Errorf("%w: empty line", ErrProtocol)
	}
	switch k := Kind(line[0]); k {
	case Simple, Error:
		return Value{Kind: k, Str: string(line[1:])}, nil
	case Integer:
		n, err := strconv.ParseInt(string(line[1:]), 10, 64)
		if err != nil {
			return Value{}, fmt.Errorf("%w: integer %q", ErrProtocol, line)
		}
		return Value{Kind: Integer, Int: n}, nil
	case Bulk:
		n, err := c.length(line, c.cfg.MaxBulk)
		if err != nil || n < 0 {
			return Value{Kind: Null}, err
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, b); err != nil {
			return Value{}, noEOF(err)
		}
		if b[n] != '\r' || b[n+1] != '\n' {
			return Value{}, fmt.Errorf("%w: bulk string not followed by CRLF", ErrProtocol)
		}
		return Value{Kind: Bulk, Str: string(b[:n])}, nil
	case Array:
		n, err := c.length(line, c.cfg.MaxArray)
		if err != nil || n < 0 {
			return Value{Kind: Null}, err
		}
		if depth >= c.cfg.MaxDepth {
			return Value{}, fmt.Errorf("%w: arrays nested deeper than %d", ErrTooLarge, c.cfg.MaxDepth)
		}
		v := Value{Kind: Array, Elems: make([]Value, 0, min(n, 64))}
		for range n {
			e, err := c.value(depth + 1)
			if err != nil {
				return Value{}, err
			}
			v.Elems = append(v.Elems, e)
		}
		return v, nil
	}
	return Value{}, fmt.Errorf("%w: unexpected reply %q", ErrProtocol, truncate(line))
}

// length parses the length of a bulk or array header: -1 is null, other
// negatives are malformed, beyond limit too large.
func (c *Client) length(line []byte, limit int) (int, error) {
	n, err := strconv.Atoi(string(line[1:]))
	switch {
	case err != nil || n < -1:
		return 0, fmt.Errorf("%w: header %q", ErrProtocol, truncate(line))
	case n > limit:
		return 0, fmt.Errorf("%w: %d > %d", ErrTooLarge, n, limit)
	}
	return n, nil
}

// line reads one CRLF-terminated line of at most MaxLine bytes (CRLF
// included) and returns it without the CRLF.
func (c *Client) line() ([]byte, error) {
	var b []byte
	for {
		part, err := c.r.ReadSlice('\n')
		b = append(b, part...)
		if len(b) > c.cfg.MaxLine {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrTooLarge, c.cfg.MaxLine)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, noEOF(err)
		}
	}
	if len(b) < 2 || b[len(b)-2] != '\r' {
		return nil, fmt.Errorf("%w: line not ended by CRLF", ErrProtocol)
	}
	return b[:len(b)-2], nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func truncate(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "..."
	}
	return string(b)
}
