package replication

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
)

// admission decides which inbound connections on the raft port may run a
// handshake, so that connections that do not complete one (half-open,
// trickling a byte a second, or simply many) cannot keep the members out.
//
// At most max handshakes are under way at once. A connection that arrives
// when all are taken makes room by closing another that is not past its
// first message (the header and nonce, after TLS when on), from the source
// address with the most handshakes under way that has one — the
// newcomer's own address when it is the greediest:
//
//  1. the oldest that has sent nothing: no byte read from it, none waiting
//     unread in its socket (a half-open connection);
//  2. failing that, the oldest not past its first message (trickling, or
//     a dialer whose bytes are not read yet: a newer connection is likelier
//     to be a dialer that sends at once than an old one still short of 33
//     bytes).
//
// Only when every handshake under way is past its first message is the
// newcomer refused. A member's dial sends its first message as soon as it
// connects, so it is never displaced by silent connections, nor by any
// source with fewer handshakes under way than its own address. Each
// handshake is bounded in time besides (Config.HandshakeTimeout), so a
// connection past its first message that stalls holds its slot for at
// most that long.
//
// The mutex guards bookkeeping only: nothing reads from a peer while
// holding it, and admit never blocks. Safe for concurrent use.
type admission struct {
	max int // handshakes under way at once, at least 1

	mu    sync.Mutex
	total int                        // handshakes under way; guarded by mu
	bySrc map[netip.Addr][]*hsTicket // under way per source address, oldest first; guarded by mu

	accepted, refusedFull, evicted, timedOut, failed atomic.Uint64
}

// hsTicket is one handshake under way, from admit to release.
type hsTicket struct {
	src  netip.Addr
	conn net.Conn
	// began: a byte of the peer's has been read; sent: the peer has
	// sent its whole first message (no longer evictable); evicted:
	// closed to make room (release then does nothing). Guarded by
	// admission.mu.
	began, sent, evicted bool
}

func newAdmission(max int) *admission {
	return &admission{max: max, bySrc: map[netip.Addr][]*hsTicket{}}
}

// sourceOf is the address a connection comes from (IPv4-mapped IPv6
// addresses unmapped, so that one host counts once).
func sourceOf(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}

// admit registers a handshake for c, closing an older one to make room if
// needed (see admission). It returns nil when c is refused: the caller
// closes c.
func (a *admission) admit(c net.Conn) *hsTicket {
	t := &hsTicket{src: sourceOf(c), conn: c}
	a.mu.Lock()
	var victim *hsTicket
	if a.total >= a.max {
		victim = a.victimLocked()
		if victim == nil {
			a.mu.Unlock()
			a.refusedFull.Add(1)
			return nil
		}
		victim.evicted = true
		a.removeLocked(victim)
	}
	a.bySrc[t.src] = append(a.bySrc[t.src], t)
	a.total++
	a.mu.Unlock()
	if victim != nil {
		a.evicted.Add(1)
		victim.conn.Close() // its handshake fails and releases nothing
	}
	return t
}

// victimLocked returns the handshake to close for a newcomer (see
// admission), or nil. Peeking at a socket never blocks.
func (a *admission) victimLocked() *hsTicket {
	var from []*hsTicket
	for _, q := range a.bySrc {
		if len(q) > len(from) && slices.ContainsFunc(q, func(t *hsTicket) bool { return !t.sent }) {
			from = q
		}
	}
	var short *hsTicket
	for _, t := range from {
		switch {
		case t.sent:
		case !t.began && !bytesWaiting(t.conn):
			return t
		case short == nil:
			short = t
		}
	}
	return short
}

func (a *admission) removeLocked(t *hsTicket) {
	q := a.bySrc[t.src]
	for i, o := range q {
		if o == t {
			q = append(q[:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(a.bySrc, t.src)
	} else {
		a.bySrc[t.src] = q
	}
	a.total--
}

// began records that a byte of t's peer has been read: t no longer counts
// as having sent nothing.
func (a *admission) began(t *hsTicket) {
	a.mu.Lock()
	t.began = true
	a.mu.Unlock()
}

// sent records that t's peer has sent its first message: t is no longer
// evictable. It reports false when t was evicted meanwhile.
func (a *admission) sent(t *hsTicket) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	t.sent = true
	return !t.evicted
}

// hsOutcome is how a handshake ended, for the counters.
type hsOutcome int

const (
	hsAccepted hsOutcome = iota // authenticated
	hsTimedOut                  // a deadline passed
	hsFailed                    // refused: wrong secret, bad header, TLS, closed early
)

// release ends t's handshake and counts its hsOutcome; an evicted
// handshake was counted when it was evicted. It reports whether t was
// evicted.
func (a *admission) release(t *hsTicket, o hsOutcome) (evicted bool) {
	a.mu.Lock()
	evicted = t.evicted
	if !evicted {
		a.removeLocked(t)
	}
	a.mu.Unlock()
	switch {
	case evicted:
	case o == hsAccepted:
		a.accepted.Add(1)
	case o == hsTimedOut:
		a.timedOut.Add(1)
	default:
		a.failed.Add(1)
	}
	return evicted
}

// RaftPortStats counts the inbound connections of the raft port since the
// node started. Every connection either completes the handshake
// (Accepted) or is closed for one reason (the other counters).
type RaftPortStats struct {
	// Handshakes is the number of handshakes under way now.
	Handshakes int
	// Accepted counts connections that completed the handshake (raft's
	// and the forwarding service's).
	Accepted uint64
	// RefusedFull counts connections closed on arrival because every
	// handshake slot was held by a peer that had sent its first message.
	RefusedFull uint64
	// Evicted counts connections closed before they sent their first
	// message, to make room for a newer one.
	Evicted uint64
	// TimedOut counts connections that did not complete the handshake
	// within its timeout.
	TimedOut uint64
	// Failed counts connections that failed the handshake: wrong cluster
	// secret, unknown header, TLS failure, or closed by the peer.
	Failed uint64
}

func (a *admission) stats() RaftPortStats {
	a.mu.Lock()
	n := a.total
	a.mu.Unlock()
	return RaftPortStats{
		Handshakes:  n,
		Accepted:    a.accepted.Load(),
		RefusedFull: a.refusedFull.Load(),
		Evicted:     a.evicted.Load(),
		TimedOut:    a.timedOut.Load(),
		Failed:      a.failed.Load(),
	}
}
