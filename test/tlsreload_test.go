package test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

// servedCN dials the TLS port and returns the common name of the
// certificate the server presented.
func servedCN(t *testing.T, port int, tc *tls.Config) (string, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", "127.0.0.1:"+strconv.Itoa(port), tc)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

// TestTLSCertificateReload: certificates rotated under load, by SIGHUP and
// by CONFIG SET, reach new connections while the open ones keep working;
// a bad CONFIG SET changes nothing; failed handshakes are counted (INFO,
// /metrics) and logged.
func TestTLSCertificateReload(t *testing.T) {
	pki := newTestPKI(t)
	metricsPort := freePort(t)
	s, tlsPort := tlsServer(t, pki, "yes", "--metrics-addr", "127.0.0.1:"+strconv.Itoa(metricsPort))
	ctx := context.Background()
	plain := s.client(t, 2)
	clientTLS := pki.clientConfig(t, true)

	if cn, err := servedCN(t, tlsPort, clientTLS); err != nil || cn != "server" {
		t.Fatalf("first certificate: %q, %v; want server", cn, err)
	}

	// Load: connections opened before the rotations send commands until
	// the end; none may fail.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var served atomic.Int64
	errs := make(chan error, 8)
	for i := range 4 {
		nc, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(tlsPort), clientTLS)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		wg.Go(func() {
			r := bufio.NewReader(nc)
			key := "rot:" + strconv.Itoa(i)
			for !stop.Load() {
				nc.SetDeadline(time.Now().Add(15 * time.Second))
				cmd := fmt.Sprintf("*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$7\r\n1000000\r\n$7\r\n1000000\r\n$1\r\n1\r\n", len(key), key)
				if _, err := nc.Write([]byte(cmd)); err != nil {
					errs <- err
					return
				}
				line, err := r.ReadString('\n')
				if err != nil || line != "*5\r\n" {
					errs <- fmt.Errorf("reply %q, %v", line, err)
					return
				}
				for range 5 {
					if _, err := r.ReadString('\n'); err != nil {
						errs <- err
						return
					}
				}
				served.Add(1)
			}
		})
	}
	waitServed := func(n int64) {
		t.Helper()
		poll.Until(t, 30*time.Second, func() error {
			if got := served.Load(); got < n {
				return fmt.Errorf("%d commands served under load, want %d", got, n)
			}
			return nil
		})
	}
	waitServed(100)

	// 1. SIGHUP: the same files, rewritten, are read again.
	der, key := pki.ca.Issue(t, "server-rotated", x509.ExtKeyUsageServerAuth)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(pki.ServerCert)
	writePEM(t, dir, filepath.Base(pki.ServerKey), "EC PRIVATE KEY", kder)
	writePEM(t, dir, filepath.Base(pki.ServerCert), "CERTIFICATE", der)
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 15*time.Second, func() error {
		if cn, err := servedCN(t, tlsPort, clientTLS); err != nil || cn != "server-rotated" {
			return fmt.Errorf("after SIGHUP the server presents %q (%v), want server-rotated", cn, err)
		}
		return nil
	})
	waitServed(served.Load() + 100)

	// 2. CONFIG SET of the certificate and its key together.
	newDir := t.TempDir()
	cert3, key3 := issue(t, newDir, "server-three", pki.ca, x509.ExtKeyUsageServerAuth)
	if err := plain.ConfigSet(ctx, "tls-cert-file", cert3).Err(); err == nil {
		t.Error("CONFIG SET tls-cert-file alone (the key does not match) succeeded")
	}
	if err := plain.Do(ctx, "CONFIG", "SET", "tls-cert-file", cert3, "tls-key-file", key3).Err(); err != nil {
		t.Fatalf("CONFIG SET tls-cert-file tls-key-file: %v", err)
	}
	if cn, err := servedCN(t, tlsPort, clientTLS); err != nil || cn != "server-three" {
		t.Errorf("after CONFIG SET the server presents %q, %v; want server-three", cn, err)
	}
	// A file that does not load changes nothing.
	err = plain.ConfigSet(ctx, "tls-cert-file", filepath.Join(newDir, "missing.crt")).Err()
	if err == nil || !strings.Contains(err.Error(), "CONFIG SET failed (possibly related to argument 'tls-cert-file')") {
		t.Errorf("CONFIG SET of a missing certificate: %v", err)
	}
	if got, _ := plain.ConfigGet(ctx, "tls-*-file").Result(); got["tls-cert-file"] != cert3 || got["tls-key-file"] != key3 {
		t.Errorf("CONFIG GET after refused sets = %v; want %s, %s", got, cert3, key3)
	}
	if cn, err := servedCN(t, tlsPort, clientTLS); err != nil || cn != "server-three" {
		t.Errorf("after a refused CONFIG SET the server presents %q, %v; want server-three", cn, err)
	}
	waitServed(served.Load() + 100)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a connection opened before the rotations failed: %v", err)
	}

	// 3. Failed handshakes: counted and logged.
	failures := func() int {
		n, _ := strconv.Atoi(parseInfo(plain.Info(ctx, "stats").Val())["tls_handshake_failures"])
		return n
	}
	before := failures()
	// No client certificate under tls-auth-clients yes (with TLS 1.3 the
	// client's side completes; the server's fails), then plaintext.
	_, _ = servedCN(t, tlsPort, pki.clientConfig(t, false))
	plaintext := func() {
		nc, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(tlsPort))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.Write([]byte("PING\r\n"))
		nc.SetReadDeadline(time.Now().Add(15 * time.Second))
		io.ReadAll(nc)
	}
	plaintext()
	atLeast := func(want int) {
		t.Helper()
		poll.Until(t, 15*time.Second, func() error {
			if got := failures(); got < want {
				return fmt.Errorf("tls_handshake_failures = %d, want at least %d", got, want)
			}
			return nil
		})
	}
	atLeast(before + 2)
	// A connection closed before sending anything is not a failure: after
	// one, and one more plaintext, the count is one more.
	n := failures()
	if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(tlsPort)); err == nil {
		c.Close()
	}
	plaintext()
	atLeast(n + 1)
	if got := failures(); got != n+1 {
		t.Errorf("tls_handshake_failures = %d after a bare connect and a plaintext one, want %d", got, n+1)
	}
	if !strings.Contains(s.output.String(), "TLS handshake failed") {
		t.Errorf("no handshake failure logged:\n%s", s.output)
	}
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "cellserver_tls_handshake_failures_total " + strconv.Itoa(n+1) + "\n"; !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %q", want)
	}
}
