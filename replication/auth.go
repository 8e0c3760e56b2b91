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

// acceptAuth runs the acceptor's half of the handshake after readHeader.
func acceptAuth(c net.Conn, hdr byte, dialerNonce, secret []byte) error {
	nonce := make([]byte, nonceLen)
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails
	if _, err := c.Write(nonce); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	got := make([]byte, macLen)
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if !hmac.Equal(got, authMAC(secret, labelDial, hdr, nonce, dialerNonce)) {
		return errBadSecret
	}
	if _, err := c.Write(authMAC(secret, labelAccept, hdr, dialerNonce, nonce)); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	return nil
}

// dialAuth runs the dialer's half of the handshake; on success the
// acceptor has proved the secret and taken the connection for hdr.
func dialAuth(c net.Conn, hdr byte, secret []byte) error {
	out := make([]byte, 1+nonceLen)
	out[0] = hdr
	_, _ = rand.Read(out[1:])
	nonce := out[1:]
	if _, err := c.Write(out); err != nil {
		return err
	}
	peerNonce := make([]byte, nonceLen)
	if _, err := io.ReadFull(c, peerNonce); err != nil {
		return fmt.Errorf("peer closed the handshake (not a cellserver raft port, or TLS settings differ?): %w", err)
	}
	if _, err := c.Write(authMAC(secret, labelDial, hdr, peerNonce, nonce)); err != nil {
		return err
	}
	proof := make([]byte, macLen)
	if _, err := io.ReadFull(c, proof); err != nil {
		return fmt.Errorf("refused by the peer (different cluster secret?): %w", err)
	}
	if !hmac.Equal(proof, authMAC(secret, labelAccept, hdr, nonce, peerNonce)) {
		return errors.New("the peer does not know the cluster secret")
	}
	return nil
}

const (
	labelDial   = "cellserver dial"
	labelAccept = "cellserver accept"
)

// authMAC is HMAC-SHA256(secret, label ‖ hdr ‖ a ‖ b).
func authMAC(secret []byte, label string, hdr byte, a, b []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write([]byte{hdr})
	m.Write(a)
	m.Write(b)
	return m.Sum(nil)
}
