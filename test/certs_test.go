package test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/cellserver/cellserver/internal/testcert"
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
	ca                *testcert.CA // issues more (certificate rotation)
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	p := &testPKI{}
	ca := testcert.NewCA(t, "cellserver test CA")
	p.pool, p.ca = ca.Pool, ca
	p.CAFile = writePEM(t, dir, "ca.crt", "CERTIFICATE", ca.Cert.Raw)
	p.ServerCert, p.ServerKey = issue(t, dir, "server", ca, x509.ExtKeyUsageServerAuth)
	p.ClientCert, p.ClientKey = issue(t, dir, "client", ca, x509.ExtKeyUsageClientAuth)
	p.NodeCert, p.NodeKey = issue(t, dir, "node", ca, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	other := testcert.NewCA(t, "another CA")
	p.OtherCert, p.OtherKey = issue(t, dir, "other", other, x509.ExtKeyUsageClientAuth)
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

// issue creates a key and a certificate signed by ca, valid for localhost
// and 127.0.0.1, and writes both; it returns the file names.
func issue(t *testing.T, dir, name string, ca *testcert.CA, usage ...x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	der, key := ca.Issue(t, name, usage...)
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
