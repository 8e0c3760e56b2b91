package test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testPKI is a throwaway certificate authority with a server and a client
// certificate, generated at run time (no private key is committed), written
// as PEM files in a temporary directory.
type testPKI struct {
	CAFile, ServerCert, ServerKey, ClientCert, ClientKey string
	// OtherCert and OtherKey are a client certificate from another CA.
	OtherCert, OtherKey string
	// NodeCert and NodeKey are a cluster node's certificate: serverAuth
	// and clientAuth, since the raft port uses it both ways.
	NodeCert, NodeKey string
	pool              *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	p := &testPKI{pool: x509.NewCertPool()}
	ca, caKey := newCA(t, "cellserver test CA")
	p.pool.AddCert(ca)
	p.CAFile = writePEM(t, dir, "ca.crt", "CERTIFICATE", ca.Raw)
	p.ServerCert, p.ServerKey = issue(t, dir, "server", ca, caKey, x509.ExtKeyUsageServerAuth)
	p.ClientCert, p.ClientKey = issue(t, dir, "client", ca, caKey, x509.ExtKeyUsageClientAuth)
	p.NodeCert, p.NodeKey = issue(t, dir, "node", ca, caKey, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	other, otherKey := newCA(t, "another CA")
	p.OtherCert, p.OtherKey = issue(t, dir, "other", other, otherKey, x509.ExtKeyUsageClientAuth)
	return p
}

// clientConfig returns a TLS configuration trusting the test CA, with the
// client certificate when withCert.
func (p *testPKI) clientConfig(t *testing.T, withCert bool) *tls.Config {
	t.Helper()
	tc := &tls.Config{RootCAs: p.pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if withCert {
		cert, err := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc
}

func template(t *testing.T, cn string) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatal(err)
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
}

func newCA(t *testing.T, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := template(t, cn)
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// issue creates a key and a certificate signed by ca, valid for localhost
// and 127.0.0.1, and writes both; it returns the file names.
func issue(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, usage ...x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := template(t, name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = usage
	tmpl.DNSNames = []string{"localhost"}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, name+".crt", "CERTIFICATE", der), writePEM(t, dir, name+".key", "EC PRIVATE KEY", kder)
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
