package respclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"

	"github.com/cellserver/cellserver/internal/testcert"
)

// TestDialTLS: with Config.TLS the client speaks TLS, checking the server's
// certificate against its roots and addr's host; a server of another CA is
// refused at the dial.
func TestDialTLS(t *testing.T) {
	ca := testcert.NewCA(t, "respclient test CA")
	srvCfg := &tls.Config{Certificates: []tls.Certificate{ca.TLSCert(t, "server", x509.ExtKeyUsageServerAuth)}}
	addr := fakeServer(t, func(nc net.Conn) {
		tc := tls.Server(nc, srvCfg)
		defer tc.Close()
		replying("+PONG\r\n")(tc)
	})
	c, err := Dial(context.Background(), addr, Config{TLS: &tls.Config{RootCAs: ca.Pool}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v, err := c.Do([]byte("PING")); err != nil || v.Str != "PONG" {
		t.Fatalf("PING over TLS = %+v, %v", v, err)
	}
	other := testcert.NewCA(t, "another CA")
	if c, err := Dial(context.Background(), addr, Config{TLS: &tls.Config{RootCAs: other.Pool}}); err == nil {
		c.Close()
		t.Fatal("dialled a server whose certificate another CA signed")
	}
}
