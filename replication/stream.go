package replication

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// tcpStream is the raft transport's stream layer: plain TCP, plus a switch
// that cuts this node off (every connection closed, dials and accepts
// refused) so that tests can partition a node on real sockets. Production
// code never sets the switch.
type tcpStream struct {
	ln        net.Listener
	advertise net.Addr

	mu      sync.Mutex
	cut     bool                  // guarded by mu
	conns   map[net.Conn]struct{} // open connections; guarded by mu
	closing bool                  // guarded by mu
}

var _ raft.StreamLayer = (*tcpStream)(nil)

var errPartitioned = errors.New("replication: node partitioned")

func newTCPStream(bind, advertise string) (*tcpStream, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	s := &tcpStream{ln: ln, advertise: ln.Addr(), conns: map[net.Conn]struct{}{}}
	if advertise != "" {
		a, err := net.ResolveTCPAddr("tcp", advertise)
		if err != nil {
			ln.Close()
			return nil, err
		}
		s.advertise = a
	} else if a := ln.Addr().(*net.TCPAddr); a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, errors.New("replication: raft address has no host other nodes can dial; set the advertised raft address")
	}
	return s, nil
}

// Dial implements raft.StreamLayer.
func (s *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	s.mu.Lock()
	cut := s.cut
	s.mu.Unlock()
	if cut {
		return nil, errPartitioned
	}
	c, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	return s.track(c)
}

// Accept implements net.Listener.
func (s *tcpStream) Accept() (net.Conn, error) {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return nil, err
		}
		if tc, err := s.track(c); err == nil {
			return tc, nil
		}
	}
}

func (s *tcpStream) track(c net.Conn) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cut || s.closing {
		c.Close()
		return nil, errPartitioned
	}
	s.conns[c] = struct{}{}
	return &trackedConn{Conn: c, s: s}, nil
}

// Close implements net.Listener.
func (s *tcpStream) Close() error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	return s.ln.Close()
}

// Addr implements net.Listener: the advertised address.
func (s *tcpStream) Addr() net.Addr { return s.advertise }

// setPartitioned cuts (true) or restores (false) this node's raft traffic.
func (s *tcpStream) setPartitioned(cut bool) {
	s.mu.Lock()
	s.cut = cut
	var open []net.Conn
	if cut {
		for c := range s.conns {
			open = append(open, c)
		}
	}
	s.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

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
