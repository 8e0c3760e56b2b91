package replication

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// forwarder is a small RESP client with a pool of idle connections per
// address, used to forward commands to the leader (RAFT.APPLY,
// RAFT.READINDEX, RAFT.JOIN ...). A connection carries one request at a time;
// concurrency comes from several connections. Safe for concurrent use.
type forwarder struct {
	maxIdle  int
	password string        // sent with AUTH on every new connection when set
	timeout  time.Duration // dial and per-request I/O bound

	mu     sync.Mutex
	idle   map[string][]*fconn // guarded by mu
	busy   map[*fconn]struct{} // connections carrying a request; guarded by mu
	closed bool                // guarded by mu
}

type fconn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// errNotSent marks a failure before the request could have reached the
// other node (dial failure): retrying cannot apply a command twice.
var errNotSent = errors.New("request not sent")

func newForwarder(maxIdle int, timeout time.Duration, password string) *forwarder {
	return &forwarder{maxIdle: maxIdle, timeout: timeout, password: password, idle: map[string][]*fconn{}, busy: map[*fconn]struct{}{}}
}

func (f *forwarder) get(ctx context.Context, addr string) (*fconn, bool, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, false, ErrShutdown
	}
	for l := f.idle[addr]; len(l) > 0; l = f.idle[addr] {
		c := l[len(l)-1]
		f.idle[addr] = l[:len(l)-1]
		f.mu.Unlock()
		if c.alive() {
			f.markBusy(c)
			return c, true, nil
		}
		_ = c.c.Close()
		f.mu.Lock()
	}
	f.mu.Unlock()
	d := net.Dialer{Timeout: f.timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, false, fmt.Errorf("replication: dial %s: %w: %w", addr, errNotSent, err)
	}
	fc := &fconn{c: c, r: bufio.NewReaderSize(c, 16<<10), w: bufio.NewWriterSize(c, 16<<10)}
	if f.password != "" {
		// Nothing has been sent yet if this fails: still errNotSent.
		_ = c.SetDeadline(time.Now().Add(f.timeout))
		writeCommand(fc.w, [][]byte{[]byte("AUTH"), []byte(f.password)})
		err := fc.w.Flush()
		var rerr error
		if err == nil {
			_, rerr, err = readReply(fc.r)
		}
		if err == nil {
			err = rerr
		}
		if err != nil {
			_ = c.Close()
			return nil, false, fmt.Errorf("replication: authenticate to %s: %w: %w", addr, errNotSent, err)
		}
	}
	f.markBusy(fc)
	return fc, false, nil
}

func (f *forwarder) markBusy(c *fconn) {
	f.mu.Lock()
	f.busy[c] = struct{}{}
	f.mu.Unlock()
}

// drop closes a connection that failed.
func (f *forwarder) drop(c *fconn) {
	f.mu.Lock()
	delete(f.busy, c)
	f.mu.Unlock()
	_ = c.c.Close()
}

// alive reports whether an idle connection is still open and quiet. A
// request sent on a connection the other side had already closed could not
// tell "not processed" from "processed, then the node died", so stale
// connections are weeded out before reuse.
func (c *fconn) alive() bool {
	if c.r.Buffered() > 0 {
		return false // stray bytes: the stream is out of step
	}
	return connAlive(c.c)
}

func (f *forwarder) put(addr string, c *fconn) {
	f.mu.Lock()
	delete(f.busy, c)
	if !f.closed && len(f.idle[addr]) < f.maxIdle {
		f.idle[addr] = append(f.idle[addr], c)
		c = nil
	}
	f.mu.Unlock()
	if c != nil {
		_ = c.c.Close()
	}
}

// close closes every connection, idle or carrying a request (which then
// fails at once); later calls fail with ErrShutdown.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	idle, busy := f.idle, f.busy
	f.idle, f.busy = map[string][]*fconn{}, map[*fconn]struct{}{}
	f.mu.Unlock()
	for _, l := range idle {
		for _, c := range l {
			_ = c.c.Close()
		}
	}
	for c := range busy {
		_ = c.c.Close()
	}
}

// reply is one RESP reply: a bulk or simple string in str, an integer in
// num, or an error reply in err (a sentinel when it names one).
type reply struct {
	str []byte
	num int64
	nil bool
}

// do sends one command and reads its reply. The error is the error reply
// (mapped by errorFromReply) or a transport error; a transport error that
// wraps errNotSent guarantees the command never left this node. A pooled
// connection that fails on write is retried once on a fresh one, since the
// other side may have closed it while idle; so is one that reads EOF before
// any reply when idempotent is set (a command that may run twice).
func (f *forwarder) do(ctx context.Context, addr string, idempotent bool, args ...[]byte) (reply, error) {
	for attempt := 0; ; attempt++ {
		c, pooled, err := f.get(ctx, addr)
		if err != nil {
			return reply{}, err
		}
		deadline := time.Now().Add(f.timeout)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		_ = c.c.SetDeadline(deadline)
		writeCommand(c.w, args)
		if err := c.w.Flush(); err != nil {
			f.drop(c)
			if pooled && attempt == 0 {
				continue
			}
			return reply{}, fmt.Errorf("replication: send to %s: %w", addr, err)
		}
		rep, rerr, err := readReply(c.r)
		if err != nil {
			f.drop(c)
			if idempotent && pooled && attempt == 0 && errors.Is(err, io.EOF) && c.r.Buffered() == 0 {
				continue
			}
			return reply{}, fmt.Errorf("replication: reply from %s: %w", addr, err)
		}
		f.put(addr, c)
		return rep, rerr
	}
}

func writeCommand(w *bufio.Writer, args [][]byte) {
	w.WriteByte('*')
	w.WriteString(strconv.Itoa(len(args)))
	w.WriteString("\r\n")
	for _, a := range args {
		w.WriteByte('$')
		w.WriteString(strconv.Itoa(len(a)))
		w.WriteString("\r\n")
		w.Write(a)
		w.WriteString("\r\n")
	}
}

// maxReply bounds a bulk reply read from another node.
const maxReply = 512 << 20

// readReply reads one reply. Arrays are not expected by the internal
// commands and are refused.
func readReply(r *bufio.Reader) (reply, error, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return reply{}, nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return reply{}, nil, fmt.Errorf("malformed reply line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return reply{str: append([]byte(nil), body...)}, nil, nil
	case '-':
		return reply{}, errorFromReply(string(body)), nil
	case ':':
		n, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil {
			return reply{}, nil, fmt.Errorf("malformed integer reply %q", body)
		}
		return reply{num: n}, nil, nil
	case '$':
		n, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil || n < -1 || n > maxReply {
			return reply{}, nil, fmt.Errorf("malformed bulk length %q", body)
		}
		if n == -1 {
			return reply{nil: true}, nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return reply{}, nil, err
		}
		return reply{str: buf[:n]}, nil, nil
	}
	return reply{}, nil, fmt.Errorf("unexpected reply type %q", line[0])
}
