package replication

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// forwarder is the forwarding service's client (service.go): a pool of idle
// authenticated connections per leader raft address. A connection carries
// one request at a time; concurrency comes from several connections. Safe
// for concurrent use.
type forwarder struct {
	// dial connects to addr's forwarding service and completes the
	// handshake; an error means nothing was sent.
	dial    func(ctx context.Context, addr string) (net.Conn, error)
	maxIdle int
	timeout time.Duration // per-request I/O bound

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
// other node (dial or handshake failure): retrying cannot apply a command
// twice.
var errNotSent = errors.New("request not sent")

func newForwarder(maxIdle int, timeout time.Duration, dial func(ctx context.Context, addr string) (net.Conn, error)) *forwarder {
	return &forwarder{dial: dial, maxIdle: maxIdle, timeout: timeout, idle: map[string][]*fconn{}, busy: map[*fconn]struct{}{}}
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
	dctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	c, err := f.dial(dctx, addr)
	if err != nil {
		return nil, false, fmt.Errorf("replication: connect to %s: %w: %w", addr, errNotSent, err)
	}
	fc := &fconn{c: c, r: bufio.NewReaderSize(c, 16<<10), w: bufio.NewWriterSize(c, 16<<10)}
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

// do sends one request (kind, payload) to the service at addr and returns
// the response's payload. The error is the response's error (a sentinel by
// its code, or a *PeerError) or a transport error; a transport error that
// wraps errNotSent guarantees the request never left this node. A pooled
// connection that fails on write is retried once on a fresh one, since the
// other side may have closed it while idle (a partly written frame is never
// processed); so is one that ends before any byte of the response when
// idempotent is set (a request that may run twice).
func (f *forwarder) do(ctx context.Context, addr string, kind byte, payload []byte, idempotent bool) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		c, pooled, err := f.get(ctx, addr)
		if err != nil {
			return nil, err
		}
		deadline := time.Now().Add(f.timeout)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		_ = c.c.SetDeadline(deadline)
		if err := writeFrame(c.w, kind, payload); err != nil {
			f.drop(c)
			if pooled && attempt == 0 {
				continue
			}
			return nil, fmt.Errorf("replication: send to %s: %w", addr, err)
		}
		status, body, err := readResponse(c.r)
		if err != nil {
			f.drop(c)
			if idempotent && pooled && attempt == 0 && errors.Is(err, io.EOF) {
				continue
			}
			return nil, fmt.Errorf("replication: reply from %s: %w", addr, err)
		}
		f.put(addr, c)
		if status != statusOK {
			return nil, fmt.Errorf("replication: %s answered: %w", addr, statusError(status, body))
		}
		return body, nil
	}
}

// readResponse reads one response frame: io.EOF only when the connection
// ended before its first byte.
func readResponse(r *bufio.Reader) (byte, []byte, error) {
	status, size, err := readFrameHeader(r)
	if err != nil {
		return 0, nil, err
	}
	body, err := readPayload(r, size)
	return status, body, err
}
