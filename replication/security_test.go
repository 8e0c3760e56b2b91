package replication

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/internal/testcert"
	"github.com/cellserver/cellserver/internal/testlog"
)

// newTestCA is a throwaway certificate authority for node certificates.
func newTestCA(t *testing.T) *testcert.CA { return testcert.NewCA(t, "test CA") }

// nodeTLS returns a node's replication TLS settings: a fresh certificate
// signed by ca (serverAuth and clientAuth, as the raft port uses it both
// ways), and ca as the root.
func nodeTLS(t *testing.T, ca *testcert.CA) *tls.Config {
	t.Helper()
	cert := ca.TLSCert(t, "node", x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: ca.Pool}
}

// addNodeWith starts a node (joining through node 0) with extra settings
// on top of the cluster's.
func (c *testCluster) addNodeWith(extra func(*Config)) *testNode {
	c.t.Helper()
	base := c.tweak
	c.tweak = func(cfg *Config) {
		if base != nil {
			base(cfg)
		}
		extra(cfg)
	}
	defer func() { c.tweak = base }()
	return c.addNode()
}

// A node whose security settings differ from the cluster's never becomes a
// member: the leader's probe of its raft port fails the handshake, the node
// logs the refusal, and the cluster (here of one node, whose quorum an
// unreachable voter would break) keeps serving.
func TestMismatchedNodeCannotJoin(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	withSecret := func(s string) func(*Config) { return func(cfg *Config) { cfg.ClusterSecret = s } }
	tests := []struct {
		name    string
		cluster func(*Config)
		joiner  func(*Config)
		refusal string // in the joiner's log
	}{
		{"different secret", withSecret("s3cret"), withSecret("guess"), "bad cluster secret"},
		{"no secret", withSecret("s3cret"), withSecret(""), "bad cluster secret"},
		{"TLS off on the joiner", func(cfg *Config) { cfg.TLS = nodeTLS(t, ca) }, func(cfg *Config) { cfg.TLS = nil }, "TLS is off on this node"},
		{"certificate from another CA", func(cfg *Config) { cfg.TLS = nodeTLS(t, ca) }, func(cfg *Config) { cfg.TLS = nodeTLS(t, other) }, "TLS handshake"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCluster(t, 1, tt.cluster)
			j := c.addNodeWith(tt.joiner)
			poll.Until(c.t, 20*time.Second, func() error {
				logs := j.logs.String()
				if !strings.Contains(logs, "refused raft connection from 127.0.0.1:") || !strings.Contains(logs, tt.refusal) {
					return fmt.Errorf("joiner has not logged the refusal (%q)", tt.refusal)
				}
				if !strings.Contains(logs, "join attempt failed") {
					return fmt.Errorf("joiner has not seen its join fail")
				}
				return nil
			})
			if got := len(c.nodes[0].node.Info().Members); got != 1 {
				t.Fatalf("cluster has %d members, want 1 (the joiner must not be added)", got)
			}
			if r, err := write(t, c.nodes[0].node, throttle("k", 1, 1, 60, 1)); err != nil || r.Limited {
				t.Fatalf("write on the cluster = %+v, %v; want allowed", r, err)
			}
			if j.node.Info().LeaderID != "" {
				t.Fatalf("the joiner knows a leader: it replicated")
			}
		})
	}
}

// With mutual TLS and a cluster secret, a cluster forms and forwards.
func TestTLSCluster(t *testing.T) {
	ca := newTestCA(t)
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.TLS = nodeTLS(t, ca)
		cfg.ClusterSecret = "s3cret"
	})
	l := c.WaitForLeader(10 * time.Second)
	for _, f := range c.followers(l) {
		n := c.nodes[f].node
		if r, err := write(t, n, throttle("tls", 9, 10, 60, 1)); err != nil || r.Limited {
			t.Fatalf("write via %s = %+v, %v", c.nodes[f].id, r, err)
		}
		if _, err := n.ReadNow(context.Background()); err != nil {
			t.Fatalf("ReadNow via %s: %v", c.nodes[f].id, err)
		}
	}
	c.waitConverged(10 * time.Second)
}

// Certificate rotation: every node switches to certificates of a new CA
// while running (SetTLS), connections made afterwards use them (the
// cluster keeps electing and forwarding through fresh handshakes), and a
// dialer still holding the old CA's certificate is refused. A node started
// without TLS refuses SetTLS.
func TestSetTLSRotatesCertificates(t *testing.T) {
	oldCA, newCA := newTestCA(t), newTestCA(t)
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.TLS = nodeTLS(t, oldCA) })
	l := c.WaitForLeader(10 * time.Second)
	for _, tn := range c.nodes {
		if err := tn.node.SetTLS(nodeTLS(t, newCA)); err != nil {
			t.Fatalf("SetTLS on %s: %v", tn.id, err)
		}
	}
	// Drop every open connection: the next ones handshake with the new
	// certificates only.
	for i := range c.nodes {
		c.Partition(i, true)
		c.Partition(i, false)
	}
	for _, f := range c.followers(c.WaitForLeader(20 * time.Second)) {
		if _, err := writeWithin(c.nodes[f].node, "rotated:"+c.nodes[f].id, 20*time.Second); err != nil {
			t.Fatalf("write via %s after the rotation: %v", c.nodes[f].id, err)
		}
	}
	// The node presents the new certificate: a dialer trusting only the
	// old CA refuses it, one trusting the new CA completes the handshake.
	handshake := func(ca *testcert.CA) error {
		d := &tcpStream{sec: newSecurity(&Config{TLS: nodeTLS(t, ca)}), conns: map[net.Conn]struct{}{}}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := d.dial(ctx, c.nodes[l].raftAddr, headerForward)
		if err == nil {
			conn.Close()
		}
		return err
	}
	if err := handshake(oldCA); err == nil {
		t.Fatal("a dialer trusting only the old CA accepted the node's certificate after the rotation")
	}
	if err := handshake(newCA); err != nil {
		t.Fatalf("a dialer with the new CA's certificate: %v", err)
	}

	plain := newTestCluster(t, 1, nil)
	if err := plain.nodes[0].node.SetTLS(nodeTLS(t, newCA)); err == nil {
		t.Fatal("SetTLS on a node without TLS succeeded")
	}
}

// The raft port refuses what does not complete the handshake — and logs
// each refusal with the remote address and the reason — and lets through
// what does.
func TestRaftPortHandshake(t *testing.T) {
	ca := newTestCA(t)
	plain := &security{secret: []byte("s3cret")}
	withTLS := newSecurity(&Config{TLS: nodeTLS(t, ca), ClusterSecret: "s3cret"})
	tests := []struct {
		name   string
		server *security
		send   func(t *testing.T, addr string) error // the dialer's side; error if refused
		reason string                                // "" : accepted
	}{
		{"same secret", plain, dialWith(plain), ""},
		{"same secret and CA over TLS", withTLS, dialWith(withTLS), ""},
		{"wrong secret", plain, dialWith(&security{secret: []byte("guess")}), "bad cluster secret"},
		{"plain dialer, TLS port", withTLS, dialWith(plain), "TLS handshake"},
		{"TLS dialer, plain port", plain, dialWith(withTLS), "TLS is off on this node"},
		{"HTTP request", plain, sendRaw([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")), "unknown connection header 0x47"},
		{"RESP command", plain, sendRaw([]byte("*1\r\n$4\r\nPING\r\n")), "unknown connection header 0x2a"},
		{"header then a huge garbage MAC", plain, sendRaw(append([]byte{headerForward}, make([]byte, 1<<16)...)), "bad cluster secret"},
		{"silent peer", plain, sendRaw(nil), "no header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &testlog.Buffer{}
			s, err := newTCPStream("127.0.0.1:0", "", tt.server, slog.New(slog.NewTextHandler(logs, nil)), testAcceptLimits)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.handle(func(c net.Conn) {
				defer c.Close()
				_, _ = c.Write([]byte("ok"))
			})
			err = tt.send(t, s.Addr().String())
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v\n%s", err, logs)
				}
				if strings.Contains(logs.String(), "refused") {
					t.Fatalf("accepted, but logged a refusal:\n%s", logs)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted, want refused")
			}
			poll.Until(t, 5*time.Second, func() error {
				if !strings.Contains(logs.String(), tt.reason) {
					return fmt.Errorf("no refusal naming %q logged:\n%s", tt.reason, logs.String())
				}
				return nil
			})
			if !strings.Contains(logs.String(), "refused raft connection from 127.0.0.1:") {
				t.Fatalf("the refusal does not name the remote address:\n%s", logs)
			}
		})
	}
}

// dialWith dials the forwarding service with sec's settings and reads the
// service's greeting.
func dialWith(sec *security) func(t *testing.T, addr string) error {
	return func(t *testing.T, addr string) error {
		d := &tcpStream{sec: sec, conns: map[net.Conn]struct{}{}}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := d.dial(ctx, addr, headerForward)
		if err != nil {
			return err
		}
		defer c.Close()
		b := make([]byte, 2)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, b); err != nil || string(b) != "ok" {
			return fmt.Errorf("service greeting %q, %v", b, err)
		}
		return nil
	}
}

// sendRaw writes raw bytes and reports whether the other side closed the
// connection (an error) rather than keep it open for 4 s.
func sendRaw(b []byte) func(t *testing.T, addr string) error {
	return func(t *testing.T, addr string) error {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = c.Write(b)
		_ = c.SetReadDeadline(time.Now().Add(4 * time.Second))
		for {
			if _, err := c.Read(make([]byte, 256)); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					return nil // still open: accepted
				}
				return fmt.Errorf("closed: %w", err)
			}
		}
	}
}

// Refusal lines are rate-limited, and the next line counts those left out.
func TestRefusalLogRateLimit(t *testing.T) {
	var r refusalLog
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at      time.Duration
		ok      bool
		dropped int
	}{
		{0, true, 0},
		{10 * time.Millisecond, false, 0},
		{500 * time.Millisecond, false, 0},
		{refusalLogEvery, true, 2},
		{refusalLogEvery + time.Millisecond, false, 0},
		{3 * refusalLogEvery, true, 1},
	}
	for _, s := range steps {
		ok, dropped := r.allow(t0.Add(s.at))
		if ok != s.ok || dropped != s.dropped {
			t.Fatalf("allow(+%v) = %v, %d; want %v, %d", s.at, ok, dropped, s.ok, s.dropped)
		}
	}
}
