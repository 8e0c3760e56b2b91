package resp

import (
	"container/list"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The defences against password guessing, in one place. A failed AUTH (or
// HELLO ... AUTH) is counted against the client's address (its IP; an IPv6
// client's /64 network, since one host commonly holds the whole /64).
const (
	// authFreeFailures failures from one address answer at once; from then
	// on every attempt from it, right or wrong, waits before its password
	// is checked: authDelayMin, doubling with each further failure up to
	// authDelayMax. Waiting before the check, whatever its outcome, means
	// the timing of a reply tells nothing about the password.
	authFreeFailures = 3
	authDelayMin     = 10 * time.Millisecond
	authDelayMax     = time.Second
	// authQueueMax bounds how far ahead one address's attempts are
	// scheduled: attempts from parallel connections wait one after another,
	// and one that would wait longer than this is refused at once, without
	// its password being checked, and its connection closed.
	authQueueMax = 5 * time.Second
	// authConnFailures consecutive failures on one connection close it,
	// after the last error reply.
	authConnFailures = 10
	// authForget: an address with no failure for this long starts afresh
	// (a successful AUTH from it forgets it at once).
	authForget = time.Minute
	// authMaxAddrs bounds the addresses tracked (about 150 bytes each);
	// beyond it the address whose last failure is the oldest is forgotten.
	authMaxAddrs = 10000
	// authLogEvery: at most one log line per address per interval.
	authLogEvery = time.Second
)

// authAddr is the state of one address with recent failures.
type authAddr struct {
	key    string
	fails  int       // failures since the last success or authForget
	last   time.Time // the last failure
	next   time.Time // the end of the last wait scheduled
	logged time.Time // the last log line
}

// authGuard tracks the failed authentications of every address. Its methods
// are safe for concurrent use; the lock is taken only by authentication
// attempts (AUTH, HELLO … AUTH: a wrong user name fails even while no
// password is set), never by other commands. The counters are read
// by INFO and Stats.
type authGuard struct {
	now func() time.Time // the monotonic clock; tests replace it

	mu    sync.Mutex
	addrs map[string]*list.Element // of *authAddr
	lru   list.List                // most recent failure at the front

	failures    atomic.Int64 // acl_access_denied_auth
	disconnects atomic.Int64 // connections closed by the guard
}

func newAuthGuard() *authGuard {
	return &authGuard{now: time.Now, addrs: make(map[string]*list.Element)}
}

// authDelay is the wait of an attempt after fails failures (0 for the
// first authFreeFailures).
func authDelay(fails int) time.Duration {
	if fails < authFreeFailures {
		return 0
	}
	n := fails - authFreeFailures
	if n >= 10 { // 10 ms << 7 already passes authDelayMax
		return authDelayMax
	}
	return min(authDelayMin<<n, authDelayMax)
}

// lookup returns key's state, forgetting it when its last failure is older
// than authForget. The caller holds mu.
func (g *authGuard) lookup(key string, now time.Time) *authAddr {
	el := g.addrs[key]
	if el == nil {
		return nil
	}
	a := el.Value.(*authAddr)
	if now.Sub(a.last) > authForget {
		g.lru.Remove(el)
		delete(g.addrs, key)
		return nil
	}
	return a
}

// schedule returns how long an attempt from key must wait before its
// password is checked. ok is false when the attempt is refused unchecked
// (the address's schedule is full; see authQueueMax).
func (g *authGuard) schedule(key string) (wait time.Duration, ok bool) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.lookup(key, now)
	if a == nil {
		return 0, true
	}
	d := authDelay(a.fails)
	if d == 0 {
		return 0, true
	}
	at := now
	if a.next.After(at) {
		at = a.next
	}
	at = at.Add(d)
	if at.Sub(now) > authQueueMax {
		return 0, false
	}
	a.next = at
	return at.Sub(now), true
}

// fail records a failed attempt from key. It returns the failures from key
// since it was last forgotten, and whether to log this one (at most one
// line per authLogEvery per address).
func (g *authGuard) fail(key string) (fails int, log bool) {
	g.failures.Add(1)
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.lookup(key, now)
	if a == nil {
		for g.lru.Len() >= authMaxAddrs {
			old := g.lru.Remove(g.lru.Back()).(*authAddr)
			delete(g.addrs, old.key)
		}
		a = &authAddr{key: key}
		g.addrs[key] = g.lru.PushFront(a)
	} else {
		g.lru.MoveToFront(g.addrs[key])
	}
	a.fails++
	a.last = now
	if now.Sub(a.logged) >= authLogEvery {
		a.logged = now
		log = true
	}
	return a.fails, log
}

// succeed forgets key: a client from it proved it knows the password.
func (g *authGuard) succeed(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if el := g.addrs[key]; el != nil {
		g.lru.Remove(el)
		delete(g.addrs, key)
	}
}

// tracked returns the number of addresses with recent failures.
func (g *authGuard) tracked() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lru.Len()
}

// addrKey is the address failures are counted against: the IP of a TCP
// peer (an IPv6 peer's /64), "unix" for a unix socket.
func addrKey(a net.Addr) string {
	switch a := a.(type) {
	case *net.TCPAddr:
		if ip4 := a.IP.To4(); ip4 != nil {
			return ip4.String()
		}
		if a.IP.IsLoopback() {
			return a.IP.String()
		}
		return (&net.IPNet{IP: a.IP.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
	case *net.UnixAddr:
		return "unix"
	case nil:
		return ""
	}
	s := a.String()
	if host, _, err := net.SplitHostPort(s); err == nil {
		return host
	}
	return s
}

// authState is a connection's authentication: authed once it passed AUTH
// (or no password was required at connect); fails counts its consecutive
// failed attempts (see authGuard); penalty is the time the current command
// waited for the guard, kept out of its execution time.
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

// checkPassword runs one authentication attempt of user under the guard:
// the wait its address has earned, then check (true: the password is
// right), and on a failure the counters, the log line, the ACL LOG entry
// and, after authConnFailures in a row on this connection, the
// connection's close.
func (a *authState) checkPassword(c *Conn, user []byte, check func() bool) error {
	s := c.srv
	g := s.guard
	key := addrKey(c.nc.RemoteAddr())
	wait, ok := g.schedule(key)
	if !ok {
		g.disconnects.Add(1)
		c.quit = true
		s.log.Debug("AUTH refused unchecked: too many failures from the address; client closed", "client", c.addr)
		return ErrAuthThrottled
	}
	if wait > 0 && c.lp.gc != nil {
		// Only authenticated clients run on a loop, and a loop never
		// waits: one that keeps failing AUTH again is closed instead.
		g.disconnects.Add(1)
		c.quit = true
		return ErrAuthThrottled
	}
	if wait > 0 && !a.authWait(c, wait) {
		c.quit = true
		return ErrAuthThrottled
	}
	if check() {
		g.succeed(key)
		a.fails = 0
		a.authed = true
		return nil
	}
	a.fails++
	fails, log := g.fail(key)
	closing := a.fails >= authConnFailures
	if closing {
		g.disconnects.Add(1)
		c.quit = true
	}
	if log {
		s.log.Warn("AUTH failed", "client", c.addr, "user", string(clip(user)), "failures", fails, "closing", closing)
	}
	s.acllog.add(c, "auth", "toplevel", "AUTH", string(clip(user)))
	return ErrWrongPass
}

// isLocal reports whether a peer is on this host: a loopback address
// (127.0.0.0/8, ::1) or a unix socket, as Redis's protected mode decides.
func isLocal(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	case nil:
		return false
	}
	if strings.HasPrefix(a.Network(), "unix") {
		return true
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
	if !s.protected.Load() || *s.requirePass.Load() != "" || isLocal(c.nc.RemoteAddr()) {
		return false
	}
	s.stats.rejectedConns.Add(1)
	s.stats.protectedDenied.Add(1)
	s.log.Debug("protected mode: client from another host refused", "client", c.addr)
	_ = c.nc.SetDeadline(time.Now().Add(deniedWriteTimeout))
	_, _ = c.nc.Write(appendErrorReply(nil, ErrProtectedMode))
	return true
}
