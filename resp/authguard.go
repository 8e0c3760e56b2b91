package resp

import (
	"net"
	"time"

	"github.com/cellserver/cellserver/internal/authguard"
)

// authState is a connection's authentication: authed once it passed AUTH
// (or no password was required at connect); fails counts its consecutive
// failed attempts (see authguard.Guard); penalty is the time the current
// command waited for the guard, kept out of its execution time.
type authState struct {
	authed  bool
	fails   int
	penalty time.Duration
}

// authWait makes the connection wait d before its password is checked. It
// returns false when the server is stopping first. The time is kept out of
// the command's execution time (latency, slow log).
func (a *authState) authWait(c *Conn, d time.Duration) bool {
	t0 := time.Now()
	defer func() { a.penalty += time.Since(t0) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.srv.stopping:
		return false
	}
}

// checkPassword runs one authentication attempt of user under the guard
// (authguard.Guard.Attempt: the wait its address has earned, then check,
// true when the password is right), then the log line, the ACL LOG entry
// and the connection's close it calls for.
func (a *authState) checkPassword(c *Conn, user []byte, check func() bool) error {
	s := c.srv
	wait := func(d time.Duration) bool { return a.authWait(c, d) }
	if c.lp.gc != nil {
		// Only authenticated clients run on a loop, and a loop never
		// waits: one that keeps failing AUTH again is closed instead.
		wait = nil
	}
	out := s.guard.Attempt(authguard.AddrKey(c.nc.RemoteAddr()), &a.fails, wait, check)
	c.quit = c.quit || out.Close
	switch {
	case out.OK:
		a.authed = true
		return nil
	case out.Full:
		s.log.Debug("AUTH refused unchecked: too many failures from the address; client closed", "client", c.addr)
		return ErrAuthThrottled
	case out.Throttled:
		return ErrAuthThrottled
	}
	if out.Log {
		s.log.Warn("AUTH failed", "client", c.addr, "user", string(clip(user)), "failures", out.Fails, "closing", out.Close)
	}
	logAuthFailure(c, "auth", "toplevel", "AUTH", string(clip(user)))
	return ErrWrongPass
}

// deniedWriteTimeout bounds the write of the protected-mode refusal (a
// TLS handshake included).
const deniedWriteTimeout = 5 * time.Second

// refuseUnprotected closes the connection with the DENIED error and
// returns true when protected mode refuses it: protected-mode is yes, no
// password is set (both read now, so CONFIG SET applies to the next
// connection) and the client is not on this host. It runs on the
// connection's own goroutine, so a slow TLS handshake holds no one else.
func (c *Conn) refuseUnprotected() bool {
	s := c.srv
	if !refusesUnprotected(s, c.nc) {
		return false
	}
	s.stats.RejectedConns.Add(1)
	s.stats.ProtectedDenied.Add(1)
	s.log.Debug("protected mode: client from another host refused", "client", c.addr)
	_ = c.nc.SetDeadline(time.Now().Add(deniedWriteTimeout))
	_, _ = c.nc.Write(appendErrorReply(nil, ErrProtectedMode))
	return true
}

// refusesUnprotected reports whether protected mode refuses nc: on, no
// password set, and a client of another host.
func refusesUnprotected(s *Server, nc net.Conn) bool {
	return s.protected.Load() && *s.requirePass.Load() == "" && !authguard.IsLocal(nc.RemoteAddr())
}
