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
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := true
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case n > 0:
			alive = false
		case n == 0 && rerr == nil:
			alive = false // EOF
		case rerr != nil && !errors.Is(rerr, syscall.EAGAIN) && !errors.Is(rerr, syscall.EWOULDBLOCK):
			alive = false
		}
		return true // never wait for readiness
	})
	return err == nil && alive
}
