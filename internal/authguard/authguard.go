package authguard

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
	// FreeFailures failures from one address answer at once; from then
	// on every attempt from it, right or wrong, waits before its password
	// is checked: DelayMin, doubling with each further failure up to
	// DelayMax. Waiting before the check, whatever its outcome, means
	// the timing of a reply tells nothing about the password.
	FreeFailures = 3
	DelayMin     = 10 * time.Millisecond
	DelayMax     = time.Second
	// QueueMax bounds how far ahead one address's attempts are
	// scheduled: attempts from parallel connections wait one after another,
	// and one that would wait longer than this is refused at once, without
	// its password being checked, and its connection closed.
	QueueMax = 5 * time.Second
	// ConnFailures consecutive failures on one connection close it,
	// after the last error reply.
	ConnFailures = 10
	// Forget: an address with no failure for this long starts afresh
	// (a successful AUTH from it forgets it at once).
	Forget = time.Minute
	// MaxAddrs bounds the addresses tracked (about 150 bytes each);
	// beyond it the address whose last failure is the oldest is forgotten.
	MaxAddrs = 10000
	// LogEvery: at most one log line per address per interval.
	LogEvery = time.Second
)

// addrState is the state of one address with recent failures.
type addrState struct {
	key    string
	fails  int       // failures since the last success or Forget
	last   time.Time // the last failure
	next   time.Time // the end of the last wait scheduled
	logged time.Time // the last log line
}

// Guard tracks the failed authentications of every address. Its methods
// are safe for concurrent use; the lock is taken only by authentication
// attempts (AUTH, HELLO … AUTH: a wrong user name fails even while no
// password is set), never by other commands. The counters are read
// by INFO and Stats.
type Guard struct {
	now func() time.Time // the monotonic clock; tests replace it

	mu    sync.Mutex
	addrs map[string]*list.Element // of *addrState
	lru   list.List                // most recent failure at the front

	failures    atomic.Int64 // acl_access_denied_auth
	disconnects atomic.Int64 // connections closed by the guard
}

// Failures counts the failed attempts (acl_access_denied_auth).
func (g *Guard) Failures() int64 { return g.failures.Load() }

// Disconnects counts the connections closed for their failures.
func (g *Guard) Disconnects() int64 { return g.disconnects.Load() }

// CountDisconnect counts one connection closed for its failures.
func (g *Guard) CountDisconnect() { g.disconnects.Add(1) }

// ResetCounters sets Failures and Disconnects to 0 (CONFIG RESETSTAT).
func (g *Guard) ResetCounters() {
	g.failures.Store(0)
	g.disconnects.Store(0)
}

// New returns a guard tracking no address.
func New() *Guard {
	return &Guard{now: time.Now, addrs: make(map[string]*list.Element)}
}

// Delay is the wait of an attempt after fails failures (0 for the
// first FreeFailures).
func Delay(fails int) time.Duration {
	if fails < FreeFailures {
		return 0
	}
	n := fails - FreeFailures
	if n >= 10 { // 10 ms << 7 already passes DelayMax
		return DelayMax
	}
	return min(DelayMin<<n, DelayMax)
}

// lookup returns key's state, forgetting it when its last failure is older
// than Forget. The caller holds mu.
func (g *Guard) lookup(key string, now time.Time) *addrState {
	el := g.addrs[key]
	if el == nil {
		return nil
	}
	a := el.Value.(*addrState)
	if now.Sub(a.last) > Forget {
		g.lru.Remove(el)
		delete(g.addrs, key)
		return nil
	}
	return a
}

// Schedule returns how long an attempt from key must wait before its
// password is checked. ok is false when the attempt is refused unchecked
// (the address's schedule is full; see QueueMax).
func (g *Guard) Schedule(key string) (wait time.Duration, ok bool) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.lookup(key, now)
	if a == nil {
		return 0, true
	}
	d := Delay(a.fails)
	if d == 0 {
		return 0, true
	}
	at := now
	if a.next.After(at) {
		at = a.next
	}
	at = at.Add(d)
	if at.Sub(now) > QueueMax {
		return 0, false
	}
	a.next = at
	return at.Sub(now), true
}

// Fail records a failed attempt from key. It returns the failures from key
// since it was last forgotten, and whether to log this one (at most one
// line per LogEvery per address).
func (g *Guard) Fail(key string) (fails int, log bool) {
	g.failures.Add(1)
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.lookup(key, now)
	if a == nil {
		for g.lru.Len() >= MaxAddrs {
			old := g.lru.Remove(g.lru.Back()).(*addrState)
			delete(g.addrs, old.key)
		}
		a = &addrState{key: key}
		g.addrs[key] = g.lru.PushFront(a)
	} else {
		g.lru.MoveToFront(g.addrs[key])
	}
	a.fails++
	a.last = now
	if now.Sub(a.logged) >= LogEvery {
		a.logged = now
		log = true
	}
	return a.fails, log
}

// Succeed forgets key: a client from it proved it knows the password.
func (g *Guard) Succeed(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if el := g.addrs[key]; el != nil {
		g.lru.Remove(el)
		delete(g.addrs, key)
	}
}

// Tracked returns the number of addresses with recent failures.
func (g *Guard) Tracked() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lru.Len()
}

// AddrKey is the address failures are counted against: the IP of a TCP
// peer (an IPv6 peer's /64), "unix" for a unix socket.
func AddrKey(a net.Addr) string {
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

// IsLocal reports whether a peer is on this host: a loopback address
// (127.0.0.0/8, ::1) or a unix socket, as Redis's protected mode decides.
func IsLocal(a net.Addr) bool {
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
