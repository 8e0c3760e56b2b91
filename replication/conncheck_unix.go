//go:build unix

package replication

import (
	"errors"
	"net"
	"syscall"
)

// connAlive peeks at the socket without blocking: EAGAIN means open and
// idle; 0 bytes means the other side closed it; data means it is out of
// step (for TLS, raw bytes: an alert or a close). Wrappers that expose
// NetConn (tls.Conn, trackedConn) are seen through; connections that are
// not raw-accessible count as alive.
func connAlive(c net.Conn) bool {
	st := peek(c)
	return st == peekIdle || st == peekUnknown
}

// bytesWaiting reports whether the peer has sent bytes that are not read
// yet (without blocking; false when it cannot tell).
func bytesWaiting(c net.Conn) bool { return peek(c) == peekData }

type peekState int

const (
	peekUnknown peekState = iota // not a raw socket
	peekIdle                     // open, nothing to read
	peekData                     // bytes waiting
	peekClosed                   // EOF or an error
)

// peek looks at the socket beneath c without blocking or consuming, even
// while another goroutine is blocked reading it.
func peek(c net.Conn) peekState {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return peekUnknown
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return peekClosed
	}
	st := peekIdle
	var buf [1]byte
	// Control, not Read: Read would wait for a reader blocked on c (a
	// handshake under way) to finish; a non-blocking peek needs no lock.
	err = raw.Control(func(fd uintptr) {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case n > 0:
			st = peekData
		case n == 0 && rerr == nil:
			st = peekClosed // EOF
		case rerr != nil && !errors.Is(rerr, syscall.EAGAIN) && !errors.Is(rerr, syscall.EWOULDBLOCK):
			st = peekClosed
		}
	})
	if err != nil {
		return peekClosed
	}
	return st
}
