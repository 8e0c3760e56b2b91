package replication

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
)

// Node-to-node security on the raft port. Every connection, raft's and the
// forwarding service's alike, goes through the same steps:
//
//  1. TLS, when Config.TLS is set: mutual, both certificates verified
//     against the cluster's CA.
//  2. The dialer sends the header byte naming the service and a random
//     nonce Nd (32 bytes).
//  3. The acceptor answers with its own random nonce Na (32 bytes).
//  4. The dialer proves it knows the cluster secret:
//     HMAC-SHA256(secret, "cellserver dial" ‖ header ‖ Na ‖ Nd).
//  5. The acceptor checks it in constant time, closes the connection if it
//     is wrong, and otherwise proves the secret in turn:
//     HMAC-SHA256(secret, "cellserver accept" ‖ header ‖ Nd ‖ Na), which
//     the dialer checks. Only then does the dialer send anything else.
//
// On a raft connection (headerRaft) between two nodes of this version the
// exchange also carries each side's group id (groupid.go): a node marks
// its nonce with idMark, and when both nonces carry it, the dialer's step
// 4 message is its group id (a length byte, then the id) followed by
// HMAC-SHA256(secret, "cellserver dial" ‖ header ‖ Na ‖ Nd ‖ length ‖ id),
// and the acceptor's step 5 message its own id followed by its proof over
// it likewise. Both sides then apply one rule (groupIDsConflict): two
// different ids refuse the connection — the acceptor closes it after its
// proof, the dialer reports the other group — so that raft never runs
// between nodes holding two groups' logs (another group's process at a
// member's address). A node with no id yet (a new node, a log from before
// group ids) talks to any. A node of an earlier version sends an unmarked
// nonce and the exchange stays the one above. Forwarding connections
// (headerForward) never carry ids: groups talk to each other there.
//
// Without a secret the exchange still runs with an empty key: a peer with a
// different setting is refused by name, and the dialer always knows
// whether its connection was accepted before it sends a request (a refusal
// is errNotSent for the forwarding client). Fresh nonces on both sides make
// a recorded exchange useless, and the labels keep one side's proof from
// being replayed as the other's.

// Connection headers: the first byte a dialer sends on the raft port names
// the service. They avoid 0–3 (raft's own RPC types, which a node from
// before the header would send first), 0x16 (a TLS handshake: TLS is on at
// the other end only) and printable ASCII (a Redis client at the wrong
// port), so that each mistake is refused with its own reason.
const (
	headerRaft    byte = 0xC5 // raft's NetworkTransport
	headerForward byte = 0xC6 // the forwarding service (service.go)
)

const (
	nonceLen = 32
	macLen   = sha256.Size
)

// security is how the raft port protects its connections. Safe for
// concurrent use: the certificates and CA can be replaced while the node
// runs (setTLS); each handshake uses those in force when it starts.
type security struct {
	serverTLS, clientTLS *tls.Config // both nil: plain TCP
	secret               []byte      // the HMAC key; may be empty
	// groupID gives this node's group id for raft connections' handshakes
	// ("" while its log records none); nil: always "". Set before the
	// port's first connection.
	groupID func() string
	// material is the certificate this node presents and the CA it
	// checks peers against; nil without TLS.
	material atomic.Pointer[tlsMaterial]
}

// tlsMaterial is one generation of the raft port's TLS files.
type tlsMaterial struct {
	cert  tls.Certificate
	roots *x509.CertPool
}

// newSecurity derives the acceptor's and dialer's TLS configurations from
// cfg.TLS (see Config.TLS) and takes the cluster secret.
func newSecurity(cfg *Config) *security {
	s := &security{secret: []byte(cfg.ClusterSecret)}
	if cfg.TLS == nil {
		return s
	}
	s.material.Store(&tlsMaterial{cert: cfg.TLS.Certificates[0], roots: cfg.TLS.RootCAs})
	minVersion := max(cfg.TLS.MinVersion, tls.VersionTLS12)
	s.serverTLS = &tls.Config{
		MinVersion: minVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.material.Load()
			return &tls.Config{
				Certificates: []tls.Certificate{m.cert},
				ClientCAs:    m.roots,
				ClientAuth:   tls.RequireAndVerifyClientCert,
				MinVersion:   minVersion,
				// No resumption on long-lived connections, and no
				// post-handshake tickets for connAlive to mistake for
				// stray bytes.
				SessionTicketsDisabled: true,
			}, nil
		},
	}
	s.clientTLS = &tls.Config{
		MinVersion: minVersion,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			m := s.material.Load()
			return &m.cert, nil
		},
		// The chain is verified in VerifyConnection; host names are not
		// (every certificate the cluster's CA signed is a node).
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyChain(cs, s.material.Load().roots, x509.ExtKeyUsageServerAuth)
		},
	}
	return s
}

func (s *security) tlsOn() bool { return s.serverTLS != nil }

// setTLS replaces the certificate and CA of a port that uses TLS.
func (s *security) setTLS(c *tls.Config) error {
	switch {
	case !s.tlsOn():
		return errors.New("replication: the raft port does not use TLS; turning it on needs a restart")
	case c == nil || len(c.Certificates) == 0 || c.RootCAs == nil:
		return errors.New("replication: a TLS configuration needs a certificate and a CA")
	}
	s.material.Store(&tlsMaterial{cert: c.Certificates[0], roots: c.RootCAs})
	return nil
}

// server runs the acceptor's TLS handshake on c (nothing without TLS).
func (s *security) server(c net.Conn) (net.Conn, error) {
	if s.serverTLS == nil {
		return c, nil
	}
	tc := tls.Server(c, s.serverTLS)
	if err := tc.Handshake(); err != nil {
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}

// client runs the dialer's TLS handshake on c (nothing without TLS).
func (s *security) client(ctx context.Context, c net.Conn) (net.Conn, error) {
	if s.clientTLS == nil {
		return c, nil
	}
	tc := tls.Client(c, s.clientTLS)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}

// verifyChain checks that the peer's certificate chains to roots for usage.
func verifyChain(cs tls.ConnectionState, roots *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("peer presented no certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{usage}}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}

// errBadSecret is the acceptor's reason for refusing a dialer whose proof
// does not match.
var errBadSecret = errors.New("bad cluster secret")

// readHeader reads the header byte and the dialer's nonce, and rejects a
// header naming no service. tlsOn says whether c is already inside TLS.
func readHeader(c net.Conn, tlsOn bool) (byte, []byte, error) {
	var b [1 + nonceLen]byte
	if _, err := io.ReadFull(c, b[:1]); err != nil {
		return 0, nil, fmt.Errorf("no header: %w", err)
	}
	switch hdr := b[0]; {
	case hdr == 0x16 && !tlsOn:
		return 0, nil, errors.New("TLS handshake, but TLS is off on this node (tls-replication/tls-cluster differ between nodes?)")
	case hdr != headerRaft && hdr != headerForward:
		return 0, nil, fmt.Errorf("unknown connection header 0x%02x (not a cellserver node of this version)", hdr)
	}
	if _, err := io.ReadFull(c, b[1:]); err != nil {
		return 0, nil, fmt.Errorf("handshake: %w", err)
	}
	return b[0], b[1:], nil
}

// ownGroupID is the group id this node sends in a raft connection's
// handshake.
func (s *security) ownGroupID() string {
	if s.groupID == nil {
		return ""
	}
	return s.groupID()
}

// idMark opens the nonce of a node that exchanges group ids in a raft
// connection's handshake (28 random bytes follow it). A node of an
// earlier version sends 32 random bytes, which match it once in 2^32.
var idMark = [4]byte{'c', 'g', 'i', 'd'}

func newNonce() []byte {
	b := make([]byte, nonceLen)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	copy(b, idMark[:])
	return b
}

// exchangesIDs reports whether a handshake for hdr whose other side sent
// nonce carries group ids.
func exchangesIDs(hdr byte, nonce []byte) bool {
	return hdr == headerRaft && len(nonce) >= len(idMark) && [4]byte(nonce[:4]) == idMark
}

// appendGroupID appends a group id as the handshake carries it: a length
// byte, then the id.
func appendGroupID(b []byte, id string) []byte {
	return append(append(b, byte(len(id))), id...)
}

// readGroupID reads a group id appendGroupID wrote.
func readGroupID(c net.Conn) (string, error) {
	var n [1]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return "", err
	}
	if n[0] > maxGroupIDLen {
		return "", fmt.Errorf("a group id of %d bytes (at most %d)", n[0], maxGroupIDLen)
	}
	id := make([]byte, n[0])
	if _, err := io.ReadFull(c, id); err != nil {
		return "", err
	}
	return string(id), nil
}

// errOtherGroupLog is why a raft connection between two nodes holding
// two groups' logs is refused, on both sides.
var errOtherGroupLog = errors.New("the raft log of another group")

// acceptAuth runs the acceptor's half of the handshake after readHeader;
// own is this node's group id.
func acceptAuth(c net.Conn, hdr byte, dialerNonce, secret []byte, own string) error {
	nonce := newNonce()
	if _, err := c.Write(nonce); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	ext := exchangesIDs(hdr, dialerNonce)
	var peer string
	if ext {
		var err error
		if peer, err = readGroupID(c); err != nil {
			return fmt.Errorf("handshake: %w", err)
		}
	}
	got := make([]byte, macLen)
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	var out []byte
	if ext {
		if !hmac.Equal(got, authMAC(secret, labelDial, hdr, nonce, dialerNonce, peer)) {
			return errBadSecret
		}
		out = authMAC(secret, labelAccept, hdr, dialerNonce, nonce, own)
		out = append(appendGroupID(nil, own), out...)
	} else {
		if !hmac.Equal(got, authMAC(secret, labelDial, hdr, nonce, dialerNonce)) {
			return errBadSecret
		}
		out = authMAC(secret, labelAccept, hdr, dialerNonce, nonce)
	}
	if _, err := c.Write(out); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if ext && groupIDsConflict(own, peer) {
		return fmt.Errorf("the dialer holds %w (group id %s; this node's is %s)", errOtherGroupLog, peer, own)
	}
	return nil
}

// dialAuth runs the dialer's half of the handshake; on success the
// acceptor has proved the secret and taken the connection for hdr. own is
// this node's group id.
func dialAuth(c net.Conn, hdr byte, secret []byte, own string) error {
	nonce := newNonce()
	if _, err := c.Write(append([]byte{hdr}, nonce...)); err != nil {
		return err
	}
	peerNonce := make([]byte, nonceLen)
	if _, err := io.ReadFull(c, peerNonce); err != nil {
		return fmt.Errorf("peer closed the handshake (not a cellserver raft port, or TLS settings differ?): %w", err)
	}
	ext := exchangesIDs(hdr, peerNonce)
	var msg []byte
	if ext {
		msg = append(appendGroupID(nil, own), authMAC(secret, labelDial, hdr, peerNonce, nonce, own)...)
	} else {
		msg = authMAC(secret, labelDial, hdr, peerNonce, nonce)
	}
	if _, err := c.Write(msg); err != nil {
		return err
	}
	var peer string
	if ext {
		var err error
		if peer, err = readGroupID(c); err != nil {
			return fmt.Errorf("refused by the peer (different cluster secret?): %w", err)
		}
	}
	proof := make([]byte, macLen)
	if _, err := io.ReadFull(c, proof); err != nil {
		return fmt.Errorf("refused by the peer (different cluster secret?): %w", err)
	}
	want := authMAC(secret, labelAccept, hdr, nonce, peerNonce)
	if ext {
		want = authMAC(secret, labelAccept, hdr, nonce, peerNonce, peer)
	}
	if !hmac.Equal(proof, want) {
		return errors.New("the peer does not know the cluster secret")
	}
	if ext && groupIDsConflict(own, peer) {
		return fmt.Errorf("the node there holds %w (group id %s; this node's is %s)", errOtherGroupLog, peer, own)
	}
	return nil
}

const (
	labelDial   = "cellserver dial"
	labelAccept = "cellserver accept"
)

// authMAC is HMAC-SHA256(secret, label ‖ hdr ‖ a ‖ b), followed by the
// group id (a length byte and the id) when the handshake exchanges them.
func authMAC(secret []byte, label string, hdr byte, a, b []byte, groupID ...string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write([]byte{hdr})
	m.Write(a)
	m.Write(b)
	for _, id := range groupID {
		m.Write(appendGroupID(nil, id))
	}
	return m.Sum(nil)
}
