package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// tcpStream is the raft port: raft's stream layer and the forwarding
// service's listener in one. Every connection starts with a header byte
// naming its service, then (inside TLS when configured) the challenge-
// response handshake of auth.go, admitted and bounded by admission.go's
// rules. Accept hands authenticated raft connections to raft's
// NetworkTransport; forwarding connections go to the
// handler set with handle, each on its own goroutine. Dial (raft's) and
// dial (the forwarding client's) write the header and run the dialer's half
// of the handshake.
//
// All methods are safe for concurrent use. Close stops every goroutine the
// stream started, service connections included.
type tcpStream struct {
	ln          net.Listener
	advertise   net.Addr
	dialer      *dialer // resolves names at every dial
	sec         *security
	log         *slog.Logger
	lim         acceptLimits // bounds on inbound handshakes
	refusals    refusalLog
	handshaking *admission                       // inbound handshakes under way
	raftConns   chan net.Conn                    // authenticated raft connections, for Accept
	service     atomic.Pointer[func(c net.Conn)] // the forwarding service; nil until handle
	admit       atomic.Pointer[func() bool]      // nil in production; see admits
	done        chan struct{}                    // closed by Close
	closeOnce   sync.Once
	wg          sync.WaitGroup // the accept loop, handshakes and service connections

	mu      sync.Mutex
	conns   map[net.Conn]struct{} // open connections, both directions; guarded by mu
	closing bool                  // guarded by mu
}

var _ raft.StreamLayer = (*tcpStream)(nil)

// errPartitioned refuses a connection the admit filter turned away (or one
// made while the stream closes).
var errPartitioned = errors.New("replication: node partitioned")

// handshakeTimeout bounds an outbound handshake when the dial's context
// has no deadline (inbound ones are bounded by acceptLimits).
const handshakeTimeout = 5 * time.Second

// acceptLimits bound the inbound handshakes (Config.HandshakeTimeout and
// Config.MaxHandshakes).
type acceptLimits struct {
	timeout time.Duration // a whole handshake, from accept; > 0
	max     int           // handshakes under way at once; >= 1
}

// newTCPStream listens on bind and starts accepting. advertise, when not
// empty, is the address other nodes dial, kept as written (a host name is
// resolved by each dialer, at each dial). log receives the refusals; lim
// bounds the inbound handshakes. The stream dials through the system
// resolver until its dialer is replaced, which must happen before its
// first dial.
func newTCPStream(bind, advertise string, sec *security, log *slog.Logger, lim acceptLimits) (*tcpStream, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	s := &tcpStream{
		ln: ln, advertise: ln.Addr(), dialer: newDialer(nil, log), sec: sec, log: log, lim: lim,
		handshaking: newAdmission(lim.max),
		raftConns:   make(chan net.Conn),
		done:        make(chan struct{}),
		conns:       map[net.Conn]struct{}{},
	}
	if advertise != "" {
		if _, _, err := net.SplitHostPort(advertise); err != nil {
			ln.Close()
			return nil, err
		}
		s.advertise = nameAddr(advertise)
	} else if a := ln.Addr().(*net.TCPAddr); a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, errors.New("replication: raft address has no host other nodes can dial; set the advertised raft address")
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// handle sets the forwarding service: serve runs on its own goroutine for
// each authenticated forwarding connection and must close it when done.
// Until it is set, forwarding connections are refused before the handshake
// completes (the dialer then knows nothing was sent).
func (s *tcpStream) handle(serve func(c net.Conn)) { s.service.Store(&serve) }

// acceptLoop accepts connections and starts a handshake for each, until
// the listener closes. It never waits on a peer: admission decides at
// once.
func (s *tcpStream) acceptLoop() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.isClosing() {
				return
			}
			// Transient (out of descriptors): back off, keep accepting.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-s.done:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		tc, err := s.track(c)
		if err != nil {
			continue // partitioned or closing
		}
		t := s.handshaking.admit(tc)
		if t == nil {
			s.refuse(tc, "every handshake slot is held by a peer that sent its first message")
			continue
		}
		s.wg.Add(1)
		go s.serveConn(tc, t)
	}
}

// serveConn runs the acceptor's handshake on c and hands it on.
func (s *tcpStream) serveConn(tc net.Conn, t *hsTicket) {
	defer s.wg.Done()
	conn, hdr, err := s.acceptHandshake(tc, t)
	o := hsAccepted
	if err != nil {
		o = hsFailed
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			o = hsTimedOut
		}
	}
	if s.handshaking.release(t, o) {
		s.refuse(tc, "closed to make room for a newer connection (it had not sent its first message)")
		return
	}
	if err != nil {
		s.refuse(tc, err.Error())
		return
	}
	switch hdr {
	case headerRaft:
		select {
		case s.raftConns <- conn:
		case <-s.done:
			conn.Close()
		}
	case headerForward:
		(*s.service.Load())(conn) // acceptHandshake checked it is set
	}
}

// acceptHandshake runs TLS (when configured), reads the header and
// authenticates the dialer, all within the handshake timeout. The first
// byte is read on its own, so that admission knows the peer has begun;
// once the header and nonce are in, t is no longer evictable.
func (s *tcpStream) acceptHandshake(tc net.Conn, t *hsTicket) (net.Conn, byte, error) {
	_ = tc.SetDeadline(time.Now().Add(s.lim.timeout))
	var first [1]byte
	if _, err := io.ReadFull(tc, first[:]); err != nil {
		return nil, 0, fmt.Errorf("no header: %w", err)
	}
	s.handshaking.began(t)
	pc := &prefixConn{Conn: tc, first: first[0], unread: true}
	conn, err := s.sec.server(pc)
	if err != nil {
		return nil, 0, err
	}
	hdr, dialerNonce, err := readHeader(conn, s.sec.tlsOn())
	if err != nil {
		return nil, 0, err
	}
	if !s.handshaking.sent(t) {
		return nil, 0, errEvicted
	}
	if hdr == headerForward && s.service.Load() == nil {
		return nil, 0, errors.New("forwarding service not started yet")
	}
	if err := acceptAuth(conn, hdr, dialerNonce, s.sec.secret, s.sec.ownGroupID()); err != nil {
		return nil, 0, err
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, hdr, nil
}

// errEvicted ends a handshake whose connection admission closed.
var errEvicted = errors.New("evicted")

// prefixConn gives back the first byte acceptHandshake read before
// knowing whether TLS follows.
type prefixConn struct {
	net.Conn
	first  byte
	unread bool // first not yet returned; used by one reader at a time
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if c.unread && len(p) > 0 {
		p[0], c.unread = c.first, false
		return 1, nil
	}
	return c.Conn.Read(p)
}

// NetConn returns the connection beneath (as tls.Conn does), so that
// connAlive can peek at the socket.
func (c *prefixConn) NetConn() net.Conn { return c.Conn }

// refuse closes a connection that failed its handshake and logs why
// (rate-limited: see refusalLog).
func (s *tcpStream) refuse(c net.Conn, why string) {
	c.Close()
	if s.isClosing() {
		return
	}
	if ok, dropped := s.refusals.allow(time.Now()); ok {
		s.log.Warn(fmt.Sprintf("replication: refused raft connection from %s: %s", c.RemoteAddr(), why),
			"remote", c.RemoteAddr().String(), "refusals_not_logged", dropped)
	}
}

// Dial implements raft.StreamLayer: a raft connection, authenticated.
func (s *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := s.dial(ctx, string(address), headerRaft)
	if err != nil {
		if !errors.Is(err, errPartitioned) {
			s.dialer.unreachable(string(address), "a member's raft address", err)
		}
		return nil, err
	}
	s.dialer.reached(string(address))
	return c, nil
}

// dial connects to addr's raft port for the service hdr names and runs the
// dialer's handshake, bounded by ctx (or handshakeTimeout when ctx has no
// deadline). An error means no request was sent.
func (s *tcpStream) dial(ctx context.Context, addr string, hdr byte) (net.Conn, error) {
	if !s.admits() {
		return nil, errPartitioned
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, handshakeTimeout)
		defer cancel()
	}
	c, err := s.dialer.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	tc, err := s.track(c)
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	_ = tc.SetDeadline(deadline)
	conn, err := s.sec.client(ctx, tc)
	if err == nil {
		err = dialAuth(conn, hdr, s.sec.secret, s.sec.ownGroupID())
	}
	if err != nil {
		tc.Close()
		return nil, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}

// Accept implements net.Listener: the next authenticated raft connection.
func (s *tcpStream) Accept() (net.Conn, error) {
	select {
	case c := <-s.raftConns:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

func (s *tcpStream) track(c net.Conn) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || !s.admits() {
		c.Close()
		return nil, errPartitioned
	}
	s.conns[c] = struct{}{}
	return &trackedConn{Conn: c, s: s}, nil
}

// Close implements net.Listener: it stops accepting, closes every
// connection (raft's and the forwarding service's, both directions) and
// waits for the goroutines it started. Idempotent.
func (s *tcpStream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true // from here on, track refuses new connections
		s.mu.Unlock()
		close(s.done)
		err = s.ln.Close()
		s.closeConns()
		s.wg.Wait()
	})
	return err
}

// Addr implements net.Listener: the advertised address.
func (s *tcpStream) Addr() net.Addr { return s.advertise }

func (s *tcpStream) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// admits reports whether the admit filter, when set, lets connections
// through. Tests set the filter to cut a node off on real sockets
// (helper_test.go's Partition, which then calls closeConns).
func (s *tcpStream) admits() bool {
	f := s.admit.Load()
	return f == nil || (*f)()
}

// closeConns closes every open connection, both directions.
func (s *tcpStream) closeConns() {
	s.mu.Lock()
	open := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		open = append(open, c)
	}
	s.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

// trackedConn is a TCP connection the stream closes on Close (and
// closeConns).
type trackedConn struct {
	net.Conn
	s    *tcpStream
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c.Conn)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}

// NetConn returns the TCP connection (as tls.Conn does), so that connAlive
// can peek at the socket.
func (c *trackedConn) NetConn() net.Conn { return c.Conn }

// refusalLog rate-limits the refusal lines: at most one per
// refusalLogEvery, so that a scanner cannot flood the log; each line counts
// the refusals left out since the previous one.
type refusalLog struct {
	mu      sync.Mutex
	next    time.Time // guarded by mu
	dropped int       // guarded by mu
}

const refusalLogEvery = time.Second

// allow reports whether a refusal at now may be logged, and how many were
// not logged since the last line.
func (r *refusalLog) allow(now time.Time) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Before(r.next) {
		r.dropped++
		return false, 0
	}
	dropped := r.dropped
	r.next, r.dropped = now.Add(refusalLogEvery), 0
	return true, dropped
}
